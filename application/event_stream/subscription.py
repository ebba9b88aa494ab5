"""Following the sealed log: a gateway's ``EventStream`` and its pull-based subscriptions.

A subscription is a cursor (the last position it passed) and at most one page of
decoded events; it reads the next page only when its reader asks for the next event, so
a reader that stops reading costs the gateway nothing more (ADR 0023). Pages are read by
``EventLog.records_after`` in the sealed order and shared: subscribers that follow the
same positions decode each page once.

Waiting for new events: in this process, the store tells the stream when its commits
or seals may have grown the log (``EventLog.on_log_grew``), which wakes every waiting
subscriber; no polling. When another process may write (PostgreSQL, or an SQLite file
another process holds), one poller per stream looks at the sealed head on the gateway
clock, parked, and only on a clock that moves by itself. A waiting subscriber is never
runnable work, so ``wait_idle()`` does not wait for it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from sessionwire.application.event_stream.public_event import (
    StreamDirectory,
    StreamEvent,
    stream_event,
)
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.event_log import EventLog

PAGE = 200
# Pages kept for subscribers reading the same positions (a tail page only until the
# log grows again).
CACHED_PAGES = 16
# How often a stream whose store other processes write looks at the sealed head.
POLL_SECONDS = 0.25


@dataclass(frozen=True)
class EventFilter:
    """Which events a subscription yields, and as what (a requester's view)."""

    session_key: str | None = None
    trace_id: str | None = None
    sees: Callable[[tuple[str, ...]], bool] | None = None
    """With a requester: may it read every session this event belongs to?"""
    view: Callable[[StreamEvent], dict[str, Any]] | None = None

    def matches(self, event: StreamEvent) -> bool:
        if self.session_key is not None and self.session_key not in event.sessions:
            return False
        if self.trace_id is not None and event.trace_id != self.trace_id:
            return False
        return self.sees is None or self.sees(event.sessions)

    def shown(self, event: StreamEvent) -> dict[str, Any]:
        # A copy: the page, and its dicts, are shared with the other subscribers.
        return self.view(event) if self.view is not None else dict(event.public)


class EventStream:
    """The followers of one gateway's store."""

    def __init__(self, store: EventLog, in_flight: InFlight, clock: Clock) -> None:
        self.store = store
        self.in_flight = in_flight
        self.clock = clock
        self.directory = StreamDirectory(store)
        self.closed = False
        self._subscriptions: weakref.WeakSet[Subscription] = weakref.WeakSet()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Future[None] | None = None
        self._waiting = 0
        self._generation = 0
        self._pages: OrderedDict[int, tuple[int | None, list[StreamEvent]]] = OrderedDict()
        self._poller: asyncio.Task[None] | None = None
        self._stop_listening = store.on_log_grew(self._heard)

    def subscribe(self, after: int, events: EventFilter) -> Subscription:
        subscription = Subscription(self, after, events)
        self._subscriptions.add(subscription)
        return subscription

    # Pages ------------------------------------------------------------------------------

    def page_after(self, position: int) -> list[StreamEvent]:
        """The events after ``position``, at most a page (shared, never changed)."""
        cached = self._pages.get(position)
        if cached is not None and cached[0] in (None, self._generation):
            self._pages.move_to_end(position)
            return cached[1]
        records = self.store.records_after(position, PAGE)
        page = [stream_event(at, event, self.directory) for at, event in records]
        if page:
            # A full page never changes; a shorter one (the tail) only until the log grows.
            # An empty one is never kept: a subscriber about to wait must look afresh.
            self._pages[position] = (None if len(page) == PAGE else self._generation, page)
            self._pages.move_to_end(position)
            if len(self._pages) > CACHED_PAGES:
                self._pages.popitem(last=False)
        return page

    # Waiting ----------------------------------------------------------------------------

    def armed(self) -> asyncio.Future[None]:
        """The future the log's next growth resolves; take it *before* finding nothing
        new (no await in between), so a commit in between is never missed."""
        if self._wake is None or self._wake.done():
            self._loop = asyncio.get_running_loop()
            self._wake = self._loop.create_future()
            if self.closed:
                self._wake.set_result(None)
        return self._wake

    async def wait(self, wake: asyncio.Future[None]) -> None:
        self._waiting += 1
        try:
            if (
                self._poller is None
                and self.clock.moves_by_itself
                and self.store.others_may_write()
            ):
                self._poller = self.in_flight.start(self._poll(), Owner("events", "poll"))
            # A wait on a future: not runnable, so never pending work for wait_idle.
            await self.in_flight.wait_for(wake)
        finally:
            self._waiting -= 1

    def _heard(self) -> None:
        """From the thread that committed or sealed: hand the news to the loop."""
        loop = self._loop
        if loop is None or not self._subscriptions:
            return
        with suppress(RuntimeError):  # the loop closed: nobody is left to wake
            loop.call_soon_threadsafe(self._grew)

    def _grew(self) -> None:
        self._generation += 1
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _poll(self) -> None:
        """Look at the sealed head while anyone waits: other processes' commits."""
        try:
            head = self.store.sealed_position()
            while self._waiting and not self.closed:
                await self.in_flight.sleep(POLL_SECONDS, parked=True)
                if self.closed:
                    return
                now = self.store.sealed_position()
                if now != head:
                    head = now
                    self._grew()
        finally:
            self._poller = None

    def close(self) -> None:
        """End every subscription (the gateway is closing): each stops at its next step."""
        self.closed = True
        self._stop_listening()
        self._pages.clear()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)


class Subscription:
    """An async iterator over recorded events after a position, as public dicts."""

    def __init__(self, stream: EventStream, after: int, events: EventFilter) -> None:
        self._stream = stream
        self._filter = events
        self.position = after
        """The last position passed (yielded or filtered out): where to resume."""
        self._page: list[StreamEvent] = []
        self._index = 0
        self._closed = False

    @property
    def ended(self) -> bool:
        return self._closed or self._stream.closed

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while not self.ended:
            found = self._from_page()
            if found is not None:
                return found
            wake = self._stream.armed()
            self._page, self._index = self._stream.page_after(self.position), 0
            if self._page:
                # Let the loop turn between pages: a narrow filter over a long log
                # must not hold it.
                await asyncio.sleep(0)
                continue
            await self._stream.wait(wake)
        raise StopAsyncIteration

    def recorded(self) -> Iterator[dict[str, Any]]:
        """The matching events recorded now, without waiting (a one-shot listing)."""
        while not self.ended:
            found = self._from_page()
            if found is not None:
                yield found
                continue
            self._page, self._index = self._stream.page_after(self.position), 0
            if not self._page:
                return

    def _from_page(self) -> dict[str, Any] | None:
        while self._index < len(self._page):
            event = self._page[self._index]
            self._index += 1
            self.position = event.position
            if self._filter.matches(event):
                return self._filter.shown(event)
        return None

    async def aclose(self) -> None:
        """End the subscription; iterating it again ends at once."""
        self.close()

    def close(self) -> None:
        self._closed = True
        self._page = []


__all__ = ["EventFilter", "EventStream", "Subscription"]
