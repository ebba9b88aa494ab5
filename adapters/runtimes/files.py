"""Runtime files for the command line: a JSON or YAML file naming the agents' runtime.

``{"rules": [...]}`` is a ScriptedRuntime script; ``{"openai": {...}}`` configures the
OpenAI-compatible runtime (``OpenAIRuntimeConfig``'s keys, camelCase). Either may sit
beside ``{"a2a": {"agents": {"<agentId>": {"url": ..., "token": ...}}}}``: those agents
are remote A2A agents (adapters/runtimes/a2a_remote.py), the others run locally.

Both reach their servers through the egress client, fenced by the gateway config's
``http.egress`` (ADR 0040): the command line hands it in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime
from sessionwire.application.ports.runtime import AgentRuntime

if TYPE_CHECKING:
    from sessionwire.application.config.gateway_config import EgressConfig


def load_runtime(path: Path, egress: EgressConfig | None = None) -> AgentRuntime:
    """The runtime a file describes, its requests fenced by ``egress`` (None: the
    defaults, public addresses only); a file that describes none is a ValueError."""
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
    if isinstance(data, dict) and "a2a" in data:
        return _with_remote_agents(path, data, egress)
    return _local_runtime(path, data, egress)


def _with_remote_agents(
    path: Path, data: dict[str, Any], egress: EgressConfig | None
) -> AgentRuntime:
    from pydantic import ValidationError
    from sessionwire.adapters.runtimes.a2a_remote import A2ARemoteRuntime

    section = data["a2a"]
    if not isinstance(section, dict) or not isinstance(section.get("agents"), dict):
        raise ValueError(f"runtime file {path}: a2a must hold agents: {{<agentId>: {{url}}}}")
    rest = {key: value for key, value in data.items() if key != "a2a"}
    local = _local_runtime(path, rest, egress) if rest else None
    try:
        return A2ARemoteRuntime(section["agents"], local, egress=egress)
    except ValidationError as error:
        raise ValueError(f"runtime file {path}: a2a.agents: {error.errors()[0]['msg']}") from None


def _local_runtime(path: Path, data: Any, egress: EgressConfig | None) -> AgentRuntime:
    if isinstance(data, dict) and set(data) == {"openai"} and isinstance(data["openai"], dict):
        return OpenAIRuntime(data["openai"], egress=egress)
    if isinstance(data, dict) and "rules" in data:
        return ScriptedRuntime.from_dict(data)
    raise ValueError(
        f"runtime file {path} must hold either 'rules' (a script) or 'openai' (a server config)"
    )
