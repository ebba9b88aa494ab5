"""Runtime files for the command line: a JSON or YAML file naming the agents' runtime.

``{"rules": [...]}`` is a ScriptedRuntime script; ``{"openai": {...}}`` configures the
OpenAI-compatible runtime (``OpenAIRuntimeConfig``'s keys, camelCase).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime
from sessionwire.application.ports.runtime import AgentRuntime


def load_runtime(path: Path) -> AgentRuntime:
    """The runtime a file describes; a file that describes none is a ValueError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read runtime file {path}: {error.strerror}") from error
    try:
        data = (
            yaml.safe_load(text) if path.suffix.lower() in {".yaml", ".yml"} else json.loads(text)
        )
    except (ValueError, yaml.YAMLError) as error:
        raise ValueError(f"runtime file {path} cannot be parsed: {error}") from error
    if isinstance(data, dict) and set(data) == {"openai"} and isinstance(data["openai"], dict):
        return OpenAIRuntime(data["openai"])
    if isinstance(data, dict) and "rules" in data:
        return ScriptedRuntime.from_dict(data)
    raise ValueError(
        f"runtime file {path} must hold either 'rules' (a script) or 'openai' (a server config)"
    )
