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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from sessionwire.application.event_stream.public_event import (
    StreamDirectory,
    StreamEvent,
    stream_event,
)
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.store import Store
from sessionwire.domain.session import single_appends

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
    prepare: Callable[[list[StreamEvent]], Awaitable[None]] | None = None
    """Looks up, off the loop, what ``sees`` will need for a page's events."""

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

    def __init__(self, store: AsyncStore, in_flight: InFlight, clock: Clock) -> None:
        self.store = store
        self.in_flight = in_flight
        self.clock = clock
        self.directory = StreamDirectory()
        self.closed = False
        self._subscriptions: weakref.WeakSet[Subscription] = weakref.WeakSet()
        self._loop: asyncio.AbstractEventLoop | None = None
        # One future per waiting subscriber: cancelling one wait touches no other.
        self._waiters: set[asyncio.Future[None]] = set()
        self._waiting = 0
        self._generation = 0
        self._pages: OrderedDict[int, tuple[int | None, list[StreamEvent]]] = OrderedDict()
        # Reads in progress, by position, with the generation each started at: a
        # subscriber asking for a page another is reading awaits that read.
        self._reads: dict[int, tuple[int, asyncio.Task[tuple[bool, list[StreamEvent]]]]] = {}
        self._poller: asyncio.Task[None] | None = None
        self._stop_listening = store.on_log_grew(self._heard)

    def subscribe(self, after: int | str, events: EventFilter) -> Subscription:
        subscription = Subscription(self, after, events)
        self._subscriptions.add(subscription)
        return subscription

    # Pages ------------------------------------------------------------------------------

    async def page_after(self, position: int, *, fresh_tail: bool = False) -> list[StreamEvent]:
        """The events after ``position``, at most a page (shared, never changed).

        A full page never changes. A shorter one, the empty one included, holds until
        the log grows: a subscriber takes the wake-up future before it looks (``armed``),
        and every growth after the page was read resolves that future. ``fresh_tail``
        reads a tail again anyway (a listing that waits for nothing)."""
        cached = self._pages.get(position)
        if cached is not None:
            generation, page = cached
            if generation is None or (generation == self._generation and not fresh_tail):
                self._pages.move_to_end(position)
                return page
        # Taken before the read: a growth while it reads makes its tail stale.
        generation = self._generation
        reading = self._reads.get(position)
        if reading is None or reading[0] != generation or fresh_tail:
            reading = generation, asyncio.ensure_future(self.store.read(self._read_page, position))
            self._reads[position] = reading
            reading[1].add_done_callback(lambda read: self._read_done(position, reading))
        # Shielded: a subscriber that stops waiting leaves the read to the others.
        return (await asyncio.shield(reading[1]))[1]

    def _read_done(
        self, position: int, reading: tuple[int, asyncio.Task[tuple[bool, list[StreamEvent]]]]
    ) -> None:
        generation, read = reading
        if self._reads.get(position) is reading:
            del self._reads[position]
        if read.cancelled() or read.exception() is not None or self.closed:
            return  # the error is its waiters' (read.exception() marked it retrieved)
        full, page = read.result()
        # A full page (of records) never changes; a shorter one only until the log grows.
        self._pages[position] = (None if full else generation, page)
        self._pages.move_to_end(position)
        if len(self._pages) > CACHED_PAGES:
            self._pages.popitem(last=False)

    def _read_page(self, store: Store, position: int) -> tuple[bool, list[StreamEvent]]:
        """On a reader thread: the page after ``position``, decoded; whether it is full."""
        records = store.records_after(position, PAGE)
        # A batch of messages is one record: its messages are published as the single
        # appends it stands for, all at the batch's position (ADR 0025).
        page = [
            stream_event(at, event, self.directory, store) for at, event in single_appends(records)
        ]
        return len(records) == PAGE, page

    # Waiting ----------------------------------------------------------------------------

    def armed(self) -> asyncio.Future[None]:
        """A future the log's next growth resolves; take it *before* finding nothing
        new (no await in between), so a commit in between is never missed."""
        self._loop = asyncio.get_running_loop()
        wake = self._loop.create_future()
        if self.closed:
            wake.set_result(None)
        else:
            self._waiters.add(wake)
        return wake

    def disarm(self, wake: asyncio.Future[None]) -> None:
        """Not waiting after all (something new was found)."""
        self._waiters.discard(wake)

    async def wait(self, wake: asyncio.Future[None]) -> None:
        self._waiting += 1
        try:
            if (
                self._poller is None
                and self.clock.moves_by_itself
                and self.store.others_may_write()
            ):
                self._poller = self.in_flight.start(self._poll(), Owner("events", "poll"))
            if self.in_flight.current() is None:
                await wake  # the subscriber's own future: cancelling it is harmless
            else:
                # Registered work waits on a future: not runnable, so not pending work.
                await self.in_flight.wait_for(wake)
        finally:
            self._waiting -= 1
            self._waiters.discard(wake)

    def _heard(self) -> None:
        """From the thread that committed or sealed: hand the news to the loop."""
        loop = self._loop
        if loop is None or not self._subscriptions:
            return
        with suppress(RuntimeError):  # the loop closed: nobody is left to wake
            loop.call_soon_threadsafe(self._grew)

    def _grew(self) -> None:
        self._generation += 1
        self._wake_all()

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for wake in waiters:
            if not wake.done():
                wake.set_result(None)

    async def _poll(self) -> None:
        """Look at the sealed head while anyone waits: other processes' commits."""
        try:
            # The first look always wakes: a record sealed between a subscriber's last
            # read and this poller's start is not missed.
            head = -1
            while self._waiting and not self.closed:
                await self.in_flight.sleep(POLL_SECONDS, parked=True)
                if self.closed:
                    return
                now = await self.store.sealed_position()
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
        self._wake_all()


class Subscription:
    """An async iterator over recorded events after a position, as public dicts."""

    def __init__(self, stream: EventStream, after: int | str, events: EventFilter) -> None:
        self._stream = stream
        self._filter = events
        position, passed = parse_cursor(after)
        # A cursor inside a batch: the batch's record comes again, less what was passed.
        self.position = position - 1 if passed else position
        """The last record passed whole (yielded or filtered out)."""
        self._skip = passed
        """How many events of the record after ``position`` a resumed cursor passed."""
        self._member = passed
        self._page: list[StreamEvent] = []
        self._index = 0
        self._closed = False

    @property
    def ended(self) -> bool:
        return self._closed or self._stream.closed

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        passed_a_page = False
        while not self.ended:
            found = self._from_page()
            if found is not None:
                return found
            if passed_a_page:
                # A whole page and nothing for this filter: let the loop turn, so a
                # narrow filter over a long log does not hold it.
                await asyncio.sleep(0)
                if self.ended:
                    break
            wake = self._stream.armed()
            if not await self._read_next_page():
                break
            if self._page:
                self._stream.disarm(wake)
                passed_a_page = True
                continue
            passed_a_page = False
            await self._stream.wait(wake)
        raise StopAsyncIteration

    async def recorded(self) -> AsyncIterator[dict[str, Any]]:
        """The matching events recorded now, without waiting (a one-shot listing)."""
        while not self.ended:
            found = self._from_page()
            if found is not None:
                yield found
                continue
            if not await self._read_next_page(fresh_tail=True) or not self._page:
                return

    async def _read_next_page(self, *, fresh_tail: bool = False) -> bool:
        """Take the page after the cursor; False when the gateway closed meanwhile (a
        read the closing store cut short ends the subscription, it is not its error)."""
        try:
            await self._take_page(
                await self._stream.page_after(self.position, fresh_tail=fresh_tail)
            )
        except Exception:
            if self.ended:
                return False
            raise
        return not self.ended

    async def _take_page(self, page: list[StreamEvent]) -> None:
        if page and self._filter.prepare is not None:
            await self._filter.prepare(page)
        self._page, self._index = page, 0
        # A resumed cursor inside a batch: pass the batch's events it had passed (a page
        # always holds whole records, so they are at its start).
        while (
            self._skip
            and self._index < len(page)
            and page[self._index].position == (self.position + 1)
        ):
            self._index += 1
            self._skip -= 1
        if page:
            self._skip = 0

    def _from_page(self) -> dict[str, Any] | None:
        while self._index < len(self._page):
            event = self._page[self._index]
            self._index += 1
            self._member = self._member + 1 if event.position == self.position + 1 else 1
            following = self._page[self._index] if self._index < len(self._page) else None
            whole = following is None or following.position != event.position
            if whole:
                # The record is passed: the cursor is its position alone.
                self.position, self._member = event.position, 0
            if self._filter.matches(event):
                shown = self._filter.shown(event)
                shown["cursor"] = (
                    str(event.position) if whole else f"{event.position}.{self._member}"
                )
                return shown
        return None

    @property
    def cursor(self) -> str:
        """Where this subscription stands: what ``subscribe(after=…)`` resumes from."""
        if self._member:
            return f"{self.position + 1}.{self._member}"
        return str(self.position)

    async def aclose(self) -> None:
        """End the subscription; iterating it again ends at once."""
        self.close()

    def close(self) -> None:
        self._closed = True
        self._page = []


def parse_cursor(after: int | str) -> tuple[int, int]:
    """A position (``12``, ``"12"``) or a cursor inside a batch (``"12.3"``: the first 3
    events of record 12 passed) as (position, events passed); ValueError otherwise."""
    if isinstance(after, int) and not isinstance(after, bool) and after >= 0:
        return after, 0
    if isinstance(after, str):
        position, dot, passed = after.partition(".")
        if position.isdigit() and (not dot or passed.isdigit()):
            count = int(passed) if dot else 0
            if not dot or (count > 0 and int(position) > 0):
                return int(position), count
    raise ValueError(
        f"after must be a log position (an integer >= 0) or an event's cursor, not {after!r}"
    )


__all__ = ["EventFilter", "EventStream", "Subscription", "parse_cursor"]
