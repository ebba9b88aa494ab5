"""``events --follow`` at a terminal (issue 24): once the screen was full the live table
was cut at the bottom, where the newest events are, and they stayed out of sight until
Ctrl-C. The view scrolls: each frame fits the screen and ends with the newest event."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from typing import Any

from rich.console import Console
from sessionwire.adapters.cli.events_command import live_view

HEIGHT = 24
# Live redraws a frame by moving the cursor up over the last one, erasing each line.
ERASE_LINE = "\x1b[2K"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def event(position: int) -> dict[str, Any]:
    # Long keys and summaries: a folding table takes two or more lines a row.
    return {
        "position": position,
        "timestamp": "2026-11-27T04:15:05.000000+00:00",
        "kind": "session",
        "sessionKey": f"agent:research:subagent:2bc97a87-e5c2-46a6-ba3a-c70b611789{position:02}",
        "type": "MessageAppended",
        "summary": f"user message {position}: " + "words that go on " * 8,
    }


async def events(count: int) -> AsyncIterator[dict[str, Any]]:
    for position in range(1, count + 1):
        yield event(position)


def last_frame(screen: str) -> list[str]:
    frame = screen.rsplit(ERASE_LINE, 1)[-1]
    return [line for line in ANSI.sub("", frame).splitlines() if line.strip()]


async def test_the_live_view_keeps_the_newest_event_in_sight_once_the_screen_is_full() -> None:
    screen = io.StringIO()
    out = Console(file=screen, force_terminal=True, width=80, height=HEIGHT, color_system=None)
    await live_view(events(60), out)  # type: ignore[arg-type]  # any async iterator of events
    frame = last_frame(screen.getvalue())
    assert len(frame) <= HEIGHT
    rows = [line for line in frame if re.match(r"│\s+\d+ │", line)]
    positions = [int(line.split("│")[1]) for line in rows]
    # The newest, in order, as many as fit: the oldest have left the top.
    assert positions[-1] == 60
    assert positions == list(range(60 - len(positions) + 1, 61))
    assert len(positions) >= HEIGHT - 8
    assert all(len(line) <= 80 for line in frame)
    # No column squeezed away to fit 80 columns.
    for title in ("POS", "TIME (UTC)", "KIND", "SESSION", "EVENT", "SUMMARY"):
        assert title in frame[2]
