"""``sessionwire sessions send`` and ``sessions spawn``: the tools that start agent runs.

A run needs an agent runtime, so both commands take ``--runtime FILE`` (scripted agents
or an OpenAI-compatible server) and refuse, before writing anything, without one: a
message recorded for a run that cannot happen would only leave a failed run behind.

The command waits until the work it started has settled (the reply-back loop and the
announce, or the child's run and its report) and lists what the store recorded, so
nothing is left half done when the process exits. A spawned child's archive timer is
stored: a gateway opened after it is due archives the child.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import RenderableType
from rich.text import Text
from sessionwire.adapters.cli.context import EXIT_USAGE, CliOptions, console, fail, present
from sessionwire.adapters.cli.event_lines import EventFeed, call_summary
from sessionwire.adapters.cli.runtime_option import (
    chosen_runtime,
    connect_runtime,
    runtime_option,
)

if TYPE_CHECKING:
    from sessionwire.application.gateway import GatewayService

pass_options = click.make_pass_decorator(CliOptions)

requester_option = click.option(
    "--as", "requester", default="main", show_default=True, help="the requester session key"
)


def result_view(result: dict[str, Any]) -> RenderableType:
    return Text(call_summary(result), style="bold")


def runtime_or_refusal(
    options: CliOptions, command: str, runtime_file: Path | None
) -> dict[str, Any]:
    """How to open the gateway: its config, and the runtime fenced by its ``http.egress``."""
    config = options.config()
    runtime = chosen_runtime(runtime_file, config.http.egress)
    if runtime is None:
        # Refused before the store is opened: nothing is written for a run that cannot run.
        fail(
            f"{command} starts an agent run, and there is no agent runtime: pass --runtime "
            "FILE (scripted agents, or an OpenAI-compatible server; see docs/cli.md)",
            EXIT_USAGE,
        )
    return {"runtime": runtime, "config": config}


def _call(options: CliOptions, requester: str, tool: str, params: dict[str, Any]) -> Any:
    async def work(gateway: GatewayService) -> int:
        connect_runtime(gateway.runtime, gateway)
        feed = await gateway.store.read(EventFeed, gateway.rules.display)
        await _requester_recorded(gateway, requester)
        result = await gateway.call_tool(requester, tool, params)
        code = options.show(result, result_view)
        out = console(stderr=True) if options.as_json else console()
        with out.status("waiting for the work this started to settle…"):
            await gateway.wait_idle()
        lines = await gateway.store.read(lambda _: feed.new_lines())
        if lines and not options.as_json:
            out.print(Text("recorded:", style="bold"))
            for line in lines:
                out.print(line.as_text(out.width))
        return code

    return work


async def _requester_recorded(gateway: GatewayService, requester: str) -> None:
    """Refuse, before writing anything, a call from a session that was never recorded.

    The requester's session is where the exchange's reply-back turns and a child's
    report run: from a session that does not exist they fail, and a fresh store's
    default requester (``main``) does not exist until something is recorded in it."""
    try:
        key = gateway.rules.canonical(requester)
    except ValueError:
        return  # not a session key at all: the tool says so, in its own words
    if await gateway.store.read(lambda store: store.session(key)) is None:
        fail(
            f"the requester {requester} has no session yet (its reply-back turns and "
            f"reports would fail): record a message in it first (sessionwire record "
            f"{requester} …), or pass --as KEY of a session that exists"
        )


@click.command("send")
@click.argument("session")
@click.argument("message")
@requester_option
@click.option(
    "--timeout-seconds",
    type=click.IntRange(min=0),
    help="how long to wait for the reply (tool default 30; 0 returns at once)",
)
@runtime_option
@pass_options
def send(
    options: CliOptions,
    session: str,
    message: str,
    requester: str,
    timeout_seconds: int | None,
    runtime_file: Path | None,
) -> int:
    """Send MESSAGE into SESSION (sessions_send) and run the agent-to-agent exchange."""
    params = present(sessionKey=session, message=message, timeoutSeconds=timeout_seconds)
    opening = runtime_or_refusal(options, "sessions send", runtime_file)
    return options.run(_call(options, requester, "sessions_send", params), **opening)


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
@runtime_option
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
    runtime_file: Path | None,
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
    opening = runtime_or_refusal(options, "sessions spawn", runtime_file)
    return options.run(_call(options, requester, "sessions_spawn", params), **opening)
