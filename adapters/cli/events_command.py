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
        # A follow may start before the store's first write; a listing only reads.
        return options.run(work, existing=not follow)
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends: the gateway was closed on the way out.
        return EXIT_OK


async def live_view(subscription: Subscription, out: Console) -> None:
    """The newest events that fit the terminal, redrawn as each arrives (no timer): once
    the screen is full the oldest leave the top, so the newest stay in sight."""
    shown: deque[dict[str, Any]] = deque(maxlen=max(5, out.size.height))
    title = "following the log (Ctrl-C ends)"
    with Live(events_table([], title=title), console=out, auto_refresh=False) as live:
        async for event in subscription:
            shown.append(event)
            live.update(newest_that_fit(shown, out, title=title), refresh=True)


def newest_that_fit(shown: deque[dict[str, Any]], out: Console, *, title: str) -> Table:
    """The table of the newest events whose rendering fits the screen, one line each.

    Live crops a frame taller than the screen at the bottom, where the newest rows are:
    a table of as many events as the screen has lines (less its title, header and
    borders) still overflowed once a row took two lines. Rows are single lines here,
    and the oldest are dropped until the rendered frame fits (one line spare for the
    cursor)."""
    room = out.size.height - 1
    rows = list(shown)
    while True:
        table = events_table(rows, title=title, one_line=True)
        over = len(out.render_lines(table, pad=False)) - room
        if over <= 0 or len(rows) <= 1:
            return table
        rows = rows[min(over, len(rows) - 1) :]


def events_table(found: list[dict[str, Any]], *, title: str, one_line: bool = False) -> Table:
    table = Table(title=title, title_justify="left")
    # One line an event in the live view (cut with an ellipsis); folded in a listing.
    # Least widths, so that at 80 columns rich narrows the long columns (first, as they
    # wrap) rather than squeezing the position, time or kind to nothing. In the live view
    # a long cell is cut with an ellipsis instead of wrapped (one line an event).
    positions = max((len(str(event["position"])) for event in found), default=3)
    table.add_column("POS", justify="right", no_wrap=True, min_width=max(3, positions))
    table.add_column("TIME (UTC)", no_wrap=True, min_width=8)
    table.add_column("KIND", no_wrap=True, min_width=8)
    table.add_column("SESSION", overflow="fold", min_width=12)
    table.add_column("EVENT", overflow="fold", min_width=12)
    table.add_column("SUMMARY", overflow="fold", min_width=10)

    def cell(text: str) -> Text:
        return Text(text, no_wrap=True, overflow="ellipsis") if one_line else Text(text)

    for event in found:
        kind = event["kind"]
        table.add_row(
            str(event["position"]),
            event["timestamp"][11:19],
            Text(kind, style=STREAM_STYLES.get(kind, "")),
            cell(short_key(event["sessionKey"] or "-")),
            cell(event["type"]),
            cell(shorten(event["summary"], SUMMARY_CHARS)),
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
