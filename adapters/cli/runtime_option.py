"""``--runtime FILE``: the agents' runtime, one option for every command that runs agents
(``serve``, ``mcp``, ``sessions send|spawn``, ``demo``).

The file is JSON or YAML: ``{"rules": [...]}`` is a ScriptedRuntime script,
``{"openai": {...}}`` an OpenAI-compatible server (adapters/runtimes/files.py). The
older ``--script FILE`` (scripts only) is still accepted, hidden from the help.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from sessionwire.adapters.cli.context import EXIT_USAGE, fail

if TYPE_CHECKING:
    from sessionwire.application.config.gateway_config import EgressConfig
    from sessionwire.application.gateway import GatewayService
    from sessionwire.application.ports.runtime import AgentRuntime

F = TypeVar("F", bound=Callable[..., Any])
RUNTIME_HELP = (
    "the agents' runtime: a scripted-agents file ({rules: [...]}) or an OpenAI-compatible "
    "server config ({openai: {...}}), JSON or YAML"
)
_SCRIPT = "sessionwire.script"
_OPENAI = "sessionwire.adapters.runtimes.openai_compatible"


def _remember_script(context: click.Context, _: click.Parameter, value: Path | None) -> None:
    if value is not None:
        context.meta[_SCRIPT] = value


def runtime_option(command: F) -> F:
    """Add ``--runtime FILE`` (passed as ``runtime_file``) and the hidden ``--script``."""
    path = click.Path(dir_okay=False, path_type=Path)
    command = click.option(
        "--script", type=path, hidden=True, expose_value=False, callback=_remember_script
    )(command)
    return click.option("--runtime", "runtime_file", type=path, help=RUNTIME_HELP)(command)


def chosen_runtime(
    runtime_file: Path | None, egress: EgressConfig | None = None
) -> AgentRuntime | None:
    """The runtime the command line names, or None; a bad file exits 2 saying why. Its
    requests are fenced by ``egress`` (the config's ``http.egress``)."""
    from sessionwire.adapters.runtimes.files import load_runtime
    from sessionwire.adapters.runtimes.scripted import ScriptedRuntime

    script: Path | None = click.get_current_context().meta.get(_SCRIPT)
    try:
        if runtime_file is not None:
            return load_runtime(runtime_file, egress)
        if script is not None:
            return ScriptedRuntime.from_file(script)
    except ValueError as error:
        fail(str(error), EXIT_USAGE)
    return None


def connect_runtime(runtime: AgentRuntime | None, gateway: GatewayService) -> None:
    """An OpenAI-compatible runtime's agents get their runs' session tools."""
    if runtime is None or _OPENAI not in sys.modules:
        return  # never imported, so not one (and httpx stays unloaded)
    from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime

    if isinstance(runtime, OpenAIRuntime):
        runtime.use_tools(gateway.call_tool)
