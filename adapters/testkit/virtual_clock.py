"""Test kit: a virtual clock that drives every wait in the gateway."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sessionwire.application.ports.clock_and_ids import Clock, InFlightWork

MAX_WAKEUPS = 10_000


class Freezer(Protocol):
    """What freezegun's ``freeze_time(...)`` yields (a FrozenDateTimeFactory)."""

    def __call__(self) -> datetime: ...

    def move_to(self, target_datetime: datetime) -> None: ...


class VirtualClock(Clock):
    """Time that moves only when a test says so; sleepers wake in due order.

    Given freezegun's frozen time (``with freeze_time(...) as frozen``), the clock starts
    there and moves it along, so ``datetime.now()`` in the test and the events' timestamps
    agree.

    Each gateway opened on the clock attaches its registry of in-flight work: moving the
    clock settles them all, exactly (until none has work runnable before the next due
    time), and a sleep of their work counts as waiting on the clock. One clock may serve
    several gateways.
    """

    @property
    def moves_by_itself(self) -> bool:
        return False

    def __init__(self, start: datetime | None = None, *, freezer: Freezer | None = None) -> None:
        if start is None:
            start = freezer() if freezer is not None else datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._now = start.astimezone(UTC)
        self._freezer = freezer
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._attached: list[InFlightWork] = []
        self._move(self._now)

    def attach(self, work: InFlightWork) -> None:
        if not any(attached is work for attached in self._attached):
            self._attached.append(work)

    def detach(self, work: InFlightWork) -> None:
        self._attached = [attached for attached in self._attached if attached is not work]

    def now(self) -> datetime:
        return self._now

    def _move(self, to: datetime) -> None:
        self._now = to
        if self._freezer is not None:
            self._freezer.move_to(to)

    @property
    def timers(self) -> list[datetime]:
        """When each waiting sleeper is due, soonest first."""
        return sorted(due for due, _, future in self._sleepers if not future.done())

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        due = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (due, next(self._order), future))
        with ExitStack() as waits:
            # Work of an attached gateway sleeping here (a runtime holding the clock
            # itself, say) waits on the clock: settled until its due time.
            for work in self._attached:
                waits.enter_context(work.clock_wait(due))
            await future

    def next_wake(self) -> datetime | None:
        """When the earliest sleeper is due, or None when nothing waits on this clock."""
        # A sleeper whose wait was cancelled (a timeout that lost the race) is no one's.
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, by: float | timedelta) -> None:
        """Move forward, waking each sleeper at its due time and letting work settle."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if step < timedelta(0):
            raise ValueError("a clock only moves forward")
        target = self._now + step
        await self.settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            # Every sleeper due by then wakes before work settles: work that waits on
            # the clock until a time that has come is runnable.
            self._move(max(self._now, self._sleepers[0][0]))
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _, _, future = heapq.heappop(self._sleepers)
                if not future.done():
                    future.set_result(None)
            await self.settle()
        self._move(target)
        await self.settle()

    async def settle(self) -> None:
        """Let work run until no attached gateway has work runnable before the next due
        time (none attached: until each woken sleeper has taken its step).

        Tasks already scheduled take their first step first: a tool call started just
        before enters its gateway's registry there.
        """
        await asyncio.sleep(0)
        while True:
            attached = list(self._attached)
            for work in attached:
                await work.wait_idle()
            # One gateway's work may wake another's (a lock given back): settled when
            # all are idle at once.
            if all(work.idle() for work in attached):
                return

    async def advance_to(self, instant: datetime) -> None:
        """Move to ``instant`` (aware, or naive UTC), firing everything due on the way."""
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=UTC)
        if instant < self._now:
            raise ValueError(
                f"a clock only moves forward: {instant.isoformat()} is before "
                f"{self._now.isoformat()}"
            )
        await self.advance(instant - self._now)

    async def run_due(self) -> None:
        """Wake the sleepers due now (none later) and let their work settle."""
        await self.advance(0)

    async def run_until_idle(self, *, within: float | timedelta | None = None) -> None:
        """Jump from timer to timer until none is left (or none falls ``within`` from now).

        Work started by a timer may set new timers; they are run too. A timer that keeps
        re-arming itself stops the loop after MAX_WAKEUPS with an error.
        """
        horizon = None
        if within is not None:
            span = within if isinstance(within, timedelta) else timedelta(seconds=within)
            horizon = self._now + span
        await self.settle()
        for _ in range(MAX_WAKEUPS):
            timers = self.timers
            if not timers or (horizon is not None and timers[0] > horizon):
                if horizon is not None and horizon > self._now:
                    await self.advance_to(horizon)
                return
            await self.advance_to(max(timers[0], self._now))
        raise RuntimeError(f"timers kept re-arming: still busy after {MAX_WAKEUPS} wake-ups")


__all__ = ["Freezer", "VirtualClock"]
