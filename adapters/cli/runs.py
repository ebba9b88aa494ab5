"""``sessionwire runs list|show|cancel|input``: runs as the read model holds them (ADR 0017).

Listing and showing only read, so they work beside a gateway serving the same store.
Cancelling records ``RunCancelled``: on PostgreSQL the process running the run stops it
(its cancellation watch); an SQLite file has one writer (decision 20), so while a gateway
serves it a cancel from here is refused, naming that gateway: cancel through it instead
(``POST /v1/runs/{id}/cancel``). Answering a run that waits for input (``runs input``,
decision 33) runs its next turn, so it takes ``--runtime`` as ``sessions send`` does, and
waits for that turn to settle.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from sessionwire.adapters.cli.context import CliOptions, accept_global_options, console, fail
from sessionwire.adapters.cli.lazy_group import LazyGroup
from sessionwire.adapters.cli.runtime_option import runtime_option
from sessionwire.adapters.cli.terminal_views import FittedToWidth

if TYPE_CHECKING:
    from sessionwire.application.gateway import GatewayService

pass_options = click.make_pass_decorator(CliOptions)

# The run statuses (application/ports/run_read_model.RUN_STATUSES; a test keeps them
# equal), written out so that --help does not import the application.
STATUSES = ("queued", "running", "input_required", "ok", "error", "timeout", "cancelled")
STATUS_STYLES = {
    "queued": "yellow",
    "running": "cyan",
    "input_required": "bold yellow",
    "ok": "green",
    "error": "red",
    "timeout": "red",
    "cancelled": "magenta",
}


def _time(value: str | None) -> str:
    # ISO 8601 UTC from the gateway, shown to the second.
    return "-" if not value else value.replace("T", " ")[:19]


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


# At least this wide, a run is one line of six columns; narrower, each row stacks two
# lines in three columns (run id over session key, status over step, start over end), so
# the run id stays whole and the session key folds over a line or two, not twelve.
RUNS_WIDE = 140
RUN_ID_WIDTH = 36
TIME_WIDTH = 19


def runs_table(result: dict[str, Any], width: int | None = None) -> RenderableType:
    if width is None:
        return FittedToWidth(lambda fitted: runs_table(result, fitted))
    runs = result["runs"]
    table = Table(title=f"{len(runs)} run(s), newest first", title_justify="left")
    if width < RUNS_WIDE:
        # Fixed widths (rich would narrow the run id's column first): the run id and the
        # times whole, the step cut with an ellipsis if the rest is too narrow for it.
        step_width = max(9, min(17, width - RUN_ID_WIDTH - TIME_WIDTH - 10))
        table.add_column("RUN\nSESSION", overflow="fold", width=RUN_ID_WIDTH)
        table.add_column("STATUS\nSTEP", no_wrap=True, overflow="ellipsis", width=step_width)
        table.add_column("STARTED (UTC)\nENDED (UTC)", no_wrap=True, width=TIME_WIDTH)
        for run in runs:
            table.add_row(
                Text(run["runId"]).append("\n" + run["sessionKey"], style="dim"),
                status_text(run["status"]).append("\n" + run["step"], style=""),
                f"{_time(run.get('startedAt'))}\n{_time(run.get('endedAt'))}",
            )
        return table
    table.add_column("RUN", overflow="fold", no_wrap=True)
    table.add_column("STATUS")
    table.add_column("SESSION", overflow="fold")
    table.add_column("STEP")
    table.add_column("STARTED (UTC)")
    table.add_column("ENDED (UTC)")
    for run in runs:
        table.add_row(
            run["runId"],
            status_text(run["status"]),
            run["sessionKey"],
            run["step"],
            _time(run.get("startedAt")),
            _time(run.get("endedAt")),
        )
    return table


SHOWN = (
    ("runId", "run"),
    ("sessionKey", "session"),
    ("agentId", "agent"),
    ("step", "step"),
    ("requesterSessionKey", "requester"),
    ("traceId", "trace"),
    ("parentRunId", "parent run"),
    ("hop", "hop"),
    ("exchangeId", "exchange"),
    ("spawnId", "spawn"),
    ("createdAt", "created"),
    ("startedAt", "started"),
    ("endedAt", "ended"),
    ("attempt", "attempt"),
    ("model", "model"),
    ("usage", "usage"),
    ("error", "error"),
)


def _asked(run: dict[str, Any]) -> str | None:
    """What a waiting run asks, on one line: its prompt, and its options if it has any."""
    asked = run.get("inputRequest")
    if not asked:
        return None
    options = asked.get("options")
    prompt = str(asked["prompt"])
    return prompt + (f"  [{' / '.join(options)}]" if options else "")


def run_view(run: dict[str, Any]) -> RenderableType:
    table = Table(show_header=False, box=None, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row("status", status_text(run["status"]))
    for name, label in SHOWN:
        value = run.get(name)
        if value is None:
            continue
        if isinstance(value, dict):
            value = " ".join(f"{key}={item}" for key, item in value.items())
        table.add_row(label, str(value))
    asked = _asked(run)
    if asked is not None:
        table.add_row("asks", asked)
    return table


def input_view(answer: dict[str, Any]) -> RenderableType:
    if answer["status"] == "accepted":
        return Text(f"answered run {answer['runId']}: its next turn has run", style="bold")
    return Text(f"not answered: {answer['error']}", style="yellow")


def cancel_view(run: dict[str, Any]) -> RenderableType:
    if run["cancelled"]:
        line = Text(f"cancelled run {run['runId']}", style="bold")
        cascaded = run.get("cascaded") or []
        if cascaded:
            line.append(f" and {len(cascaded)} run(s) it caused: {', '.join(cascaded)}")
        return line
    return Text(f"not cancelled: {run['reason']}", style="yellow")


def _print(options: CliOptions, result: dict[str, Any], render: Any) -> None:
    if options.as_json:
        click.echo(_json(result))
    else:
        console().print(render(result))


def _json(result: dict[str, Any]) -> str:
    import json

    return json.dumps(result, indent=2, ensure_ascii=False)


def _not_found(run_id: str) -> str:
    return f"no run {run_id!r} (unknown, or not a run id)"


# The global options (--json, --store, ...) are accepted after a subcommand's name too.
@click.group("runs", cls=LazyGroup, prepare=accept_global_options)
def runs_group() -> None:
    """List, show, cancel and answer agent runs."""


@runs_group.command("list")
@click.option("--session", "session_key", help="only this session's runs (a key or alias)")
@click.option("--status", type=click.Choice(STATUSES), help="only runs in this status")
@click.option("--trace", "trace_id", help="only runs of this trace")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="at most N runs"
)
@pass_options
def runs_list(
    options: CliOptions,
    session_key: str | None,
    status: str | None,
    trace_id: str | None,
    limit: int,
) -> int:
    """Runs newest first, filtered."""

    async def work(gateway: GatewayService) -> int:
        found = await gateway.runs(
            session_key=session_key, status=status, trace_id=trace_id, limit=limit
        )
        _print(options, found, runs_table)
        return 0

    return options.run(work, existing=True)


@runs_group.command("show")
@click.argument("run_id")
@pass_options
def runs_show(options: CliOptions, run_id: str) -> int:
    """One run: status, session, step, trace, times, usage."""

    async def work(gateway: GatewayService) -> int:
        found = await gateway.run(run_id)
        if found is None:
            fail(_not_found(run_id))
        _print(options, found, run_view)
        return 0

    return options.run(work, existing=True)


@runs_group.command("cancel")
@click.argument("run_id")
@click.option("--reason", default="", help="why (recorded with the cancellation)")
@pass_options
def runs_cancel(options: CliOptions, run_id: str, reason: str) -> int:
    """Cancel a queued or running run and the runs it caused.

    A run that has ended is left as it is (exit 0, "not cancelled"). On an SQLite store
    another gateway is serving, the cancel is refused (one writer per file): cancel
    through that gateway (POST /v1/runs/RUN_ID/cancel)."""
    from sessionwire.application.ports.store import StoreInUse

    async def work(gateway: GatewayService) -> int:
        try:
            found = await gateway.cancel_run(run_id, reason)
        except StoreInUse as refused:
            fail(f"{refused} (cancel the run through that gateway: POST /v1/runs/{{id}}/cancel)")
        if found is None:
            fail(_not_found(run_id))
        _print(options, found, cancel_view)
        return 0

    return options.run(work)


@runs_group.command("input")
@click.argument("run_id")
@click.argument("text")
@click.option("--as", "by", default=None, help="answer as this session (default: the operator)")
@runtime_option
@pass_options
def runs_input(
    options: CliOptions, run_id: str, text: str, by: str | None, runtime_file: Path | None
) -> int:
    """Answer a run waiting for input (status input_required) with TEXT.

    The run's next turn runs here, with TEXT as its message, so this takes --runtime like
    sessions send. An answer the run does not take (not one of its options, or the run
    is not waiting) is refused (exit 1), nothing written. On an SQLite store another
    gateway is serving, answer through it (POST /v1/runs/RUN_ID/input)."""
    from sessionwire.adapters.cli.session_tools import runtime_or_refusal
    from sessionwire.application.ports.store import StoreInUse

    async def work(gateway: GatewayService) -> int:
        try:
            answer = await gateway.provide_input(run_id, text, by=by)
        except StoreInUse as refused:
            fail(f"{refused} (answer the run through that gateway: POST /v1/runs/{{id}}/input)")
        await gateway.wait_idle()
        _print(options, answer, input_view)
        return 0 if answer["status"] == "accepted" else 1

    return options.run(work, **runtime_or_refusal(options, "runs input", runtime_file))
