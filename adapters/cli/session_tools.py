"""``sessionwire sessions send`` and ``sessions spawn``: the tools that start agent runs.

A run needs an agent runtime. The command line has none of its own: ``--script FILE``
answers with scripted agents (ScriptedRuntime rules, YAML or JSON); without it every run
fails, saying so, and the failure is recorded like any other outcome. A real runtime is
an ``AgentRuntime`` passed to ``Gateway.open(runtime=...)`` from Python.

The command waits until the work it started has settled (the reply-back loop and the
announce, or the child's run and its report) and lists what the store recorded, so
nothing is left half done when the process exits. A spawned child's archive timer is
stored: a gateway opened after it is due archives the child.
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import RenderableType
from rich.text import Text
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.cli.context import EXIT_USAGE, CliOptions, console, fail, present
from sessionwire.adapters.cli.event_lines import EventFeed, call_summary
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime, ScriptError
from sessionwire.application.ports.runtime import NoRuntime

pass_options = click.make_pass_decorator(CliOptions)
NO_RUNTIME_NOTE = (
    "note: no agent runtime here, so the runs fail (recorded as such). Pass --script FILE "
    "for scripted agents, or open the gateway from Python with Gateway.open(runtime=...)."
)

requester_option = click.option(
    "--as", "requester", default="main", show_default=True, help="the requester session key"
)
script_option = click.option(
    "--script",
    "script_path",
    type=click.Path(dir_okay=False),
    help="answer runs with scripted agents: a ScriptedRuntime rules file (YAML or JSON)",
)


def result_view(result: dict[str, Any]) -> RenderableType:
    return Text(call_summary(result), style="bold")


def _runtime(script_path: str | None) -> dict[str, Any]:
    if script_path is None:
        return {}
    try:
        return {"runtime": ScriptedRuntime.from_file(script_path)}
    except ScriptError as error:
        fail(str(error), EXIT_USAGE)


def _call(options: CliOptions, requester: str, tool: str, params: dict[str, Any]) -> Any:
    async def work(gateway: Gateway) -> int:
        feed = EventFeed(gateway.store, gateway.rules.display)
        result = await gateway.call_tool(requester, tool, params)
        code = options.show(result, result_view)
        out = console(stderr=True) if options.as_json else console()
        with out.status("waiting for the work this started to settle…"):
            await gateway.wait_idle()
        lines = feed.new_lines()
        if lines and not options.as_json:
            out.print(Text("recorded:", style="bold"))
            for line in lines:
                out.print(line.as_text(), overflow="ellipsis", no_wrap=True)
        if lines and isinstance(gateway.runtime, NoRuntime):
            click.echo(NO_RUNTIME_NOTE, err=True)
        return code

    return work


@click.command("send")
@click.argument("session")
@click.argument("message")
@requester_option
@click.option(
    "--timeout-seconds",
    type=click.IntRange(min=0),
    help="how long to wait for the reply (tool default 30; 0 returns at once)",
)
@script_option
@pass_options
def send(
    options: CliOptions,
    session: str,
    message: str,
    requester: str,
    timeout_seconds: int | None,
    script_path: str | None,
) -> int:
    """Send MESSAGE into SESSION (sessions_send) and run the agent-to-agent exchange."""
    params = present(sessionKey=session, message=message, timeoutSeconds=timeout_seconds)
    runtime = _runtime(script_path)
    return options.run(_call(options, requester, "sessions_send", params), **runtime)


@click.command("spawn")
@click.argument("task")
@requester_option
@click.option("--agent", "agent_id", help="the agent to spawn (default: the requester's)")
@click.option("--label", help="a label for the child session")
@click.option("--model", help="the model the child runs on (must be one the config names)")
@click.option(
    "--run-timeout-seconds",
    type=click.IntRange(min=0),
    help="stop the child's run after this many seconds (0: no limit)",
)
@click.option("--cleanup", type=click.Choice(["delete", "keep"]), help="delete the child at once")
@script_option
@pass_options
def spawn(
    options: CliOptions,
    task: str,
    requester: str,
    agent_id: str | None,
    label: str | None,
    model: str | None,
    run_timeout_seconds: int | None,
    cleanup: str | None,
    script_path: str | None,
) -> int:
    """Spawn a sub-agent for TASK (sessions_spawn); it reports back when its run ends."""
    params = present(
        task=task,
        agentId=agent_id,
        label=label,
        model=model,
        runTimeoutSeconds=run_timeout_seconds,
        cleanup=cleanup,
    )
    runtime = _runtime(script_path)
    return options.run(_call(options, requester, "sessions_spawn", params), **runtime)
