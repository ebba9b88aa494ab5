"""``sessionwire events``: the recorded events after a position, and with ``--follow``
each new one as it is recorded (a live view at a terminal; ``--json`` lines for
scripts). The events are the live stream's (``gw.subscribe``, docs/events.md)."""

from __future__ import annotations

import json
from collections import deque
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text
from sessionwire.adapters.cli.context import EXIT_OK, CliOptions, console
from sessionwire.adapters.cli.event_lines import STREAM_STYLES, short_key, shorten

if TYPE_CHECKING:
    from sessionwire.application.event_stream.subscription import Subscription
    from sessionwire.application.gateway import GatewayService

pass_options = click.make_pass_decorator(CliOptions)
SUMMARY_CHARS = 100


@click.command("events")
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=None,
    help="the log position to start after (default 0; with --follow, the log's end now)",
)
@click.option("--session", "session_key", default=None, help="only this session's events")
@click.option("--trace", "trace_id", default=None, help="only this chain's events (a traceId)")
@click.option("--follow", "-f", is_flag=True, help="keep going: show each new event (Ctrl-C ends)")
@pass_options
def events(
    options: CliOptions,
    after: int | None,
    session_key: str | None,
    trace_id: str | None,
    follow: bool,
) -> int:
    """The recorded events after a position; --follow shows each new one as it comes.

    A table, or --json lines, in the log's order: every event of every session (the
    operator's view); --session and --trace narrow it. With --follow the command
    waits for new events until Ctrl-C; another process may be writing the store (a
    `serve` on the same file, or any gateway on PostgreSQL).
    """

    async def work(gateway: GatewayService) -> int:
        # PostgreSQL seals behind its writers: what is final now gets its position.
        await gateway.store.read(lambda store: store.seal())
        start = after
        if start is None:
            start = await gateway.store.sealed_position() if follow else 0
        subscription = gateway.subscribe(start, session_key=session_key, trace_id=trace_id)
        out = console()
        if not follow:
            recorded = [event async for event in subscription.recorded()]
            if options.as_json:
                for event in recorded:
                    click.echo(json.dumps(event))
            else:
                out.print(events_table(recorded, title=f"{len(recorded)} event(s)"))
            return EXIT_OK
        if options.as_json:
            async for event in subscription:
                click.echo(json.dumps(event))
        elif out.is_terminal:
            await live_view(subscription, out)
        else:
            async for event in subscription:
                out.print(event_line(event))
        return EXIT_OK

    try:
        return options.run(work)
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends: the gateway was closed on the way out.
        return EXIT_OK


async def live_view(subscription: Subscription, out: Console) -> None:
    """The newest events that fit the terminal, redrawn as each arrives (no timer)."""
    shown: deque[dict[str, Any]] = deque(maxlen=max(5, out.size.height - 6))
    title = "following the log (Ctrl-C ends)"
    with Live(events_table(list(shown), title=title), console=out, auto_refresh=False) as live:
        async for event in subscription:
            shown.append(event)
            live.update(events_table(list(shown), title=title), refresh=True)


def events_table(found: list[dict[str, Any]], *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("POS", justify="right")
    table.add_column("TIME (UTC)")
    table.add_column("KIND")
    table.add_column("SESSION", overflow="fold")
    table.add_column("EVENT")
    table.add_column("SUMMARY", overflow="fold")
    for event in found:
        kind = event["kind"]
        table.add_row(
            str(event["position"]),
            event["timestamp"][11:19],
            Text(kind, style=STREAM_STYLES.get(kind, "")),
            short_key(event["sessionKey"] or "-"),
            event["type"],
            shorten(event["summary"], SUMMARY_CHARS),
        )
    return table


def event_line(event: dict[str, Any]) -> Text:
    """One event on one line, for a follow whose output is not a terminal."""
    kind = event["kind"]
    text = Text(f"{event['position']:>6}  {event['timestamp'][11:19]}  ", style="dim")
    text.append(f"{kind:<8} ", style=STREAM_STYLES.get(kind, ""))
    text.append(f"{short_key(event['sessionKey'] or '-'):<34} ")
    text.append(f"{event['type']:<22} ", style="bold")
    text.append(shorten(event["summary"], SUMMARY_CHARS))
    return text
