"""The live event stream as Server-Sent Events (ADR 0023): one message per event, its
log position as the id (what ``Last-Event-ID`` resumes from), and a comment line when
nothing was sent for a while, so proxies keep an idle connection open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from sessionwire.adapters.http.json_body import compact_json
from sessionwire.application.event_stream.subscription import Subscription
from sessionwire.application.ports.clock_and_ids import Clock

EVENT_STREAM = "text/event-stream"
LAST_EVENT_ID = "Last-Event-ID"
# Below the idle timeouts of common proxies (nginx: 60 s).
HEARTBEAT_SECONDS = 15.0


def sse_message(event: dict[str, Any]) -> str:
    # JSON escapes newlines and carriage returns in strings, so the data is one line
    # (text other than ASCII is sent as UTF-8, the stream's encoding, not escaped).
    # The id is the event's cursor: its position, or "position.k" inside a batch of
    # messages, so a client that reconnects mid-batch misses none of it.
    return f"id: {event['cursor']}\ndata: {compact_json(event)}\n\n"


async def event_source(
    subscription: Subscription,
    clock: Clock,
    heartbeat: float = HEARTBEAT_SECONDS,
    *,
    follow: bool = True,
    shown: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> AsyncIterator[str]:
    """The stream's text. A heartbeat waits on the gateway clock; a client that leaves
    cancels this (and the subscription with it); a gateway that closes ends it.
    ``follow`` False: the events recorded now, then the end. ``shown``: each event as
    this subscriber gets it (a session-bound one: sealed ids, ``EventCursors``)."""
    show = shown or (lambda event: event)
    yield ": sessionwire events\n\n"  # the headers and a first line, at once
    next_event: asyncio.Future[dict[str, Any]] | None = None
    try:
        if not follow:
            async for event in subscription.recorded():
                yield sse_message(show(event))
            return
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(subscription.__anext__())
            beat = asyncio.ensure_future(clock.sleep(heartbeat))
            either: set[asyncio.Future[Any]] = {next_event, beat}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                beat.cancel()
            if not next_event.done():
                yield ": heartbeat\n\n"
                continue
            try:
                event = next_event.result()
            except StopAsyncIteration:
                return
            next_event = None
            yield sse_message(show(event))
    finally:
        if next_event is not None:
            next_event.cancel()
        subscription.close()
