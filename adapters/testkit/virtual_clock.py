"""Test kit: a virtual clock that drives every wait in the gateway."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sessionwire.application.ports.clock_and_ids import Clock

SETTLE_ROUNDS = 20
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
    """

    def __init__(self, start: datetime | None = None, *, freezer: Freezer | None = None) -> None:
        if start is None:
            start = freezer() if freezer is not None else datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._now = start.astimezone(UTC)
        self._freezer = freezer
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._move(self._now)

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
        await _settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            due, _, future = heapq.heappop(self._sleepers)
            self._move(max(self._now, due))
            if not future.done():
                future.set_result(None)
            await _settle()
        self._move(target)
        await _settle()

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
        await _settle()
        for _ in range(MAX_WAKEUPS):
            timers = self.timers
            if not timers or (horizon is not None and timers[0] > horizon):
                if horizon is not None and horizon > self._now:
                    await self.advance_to(horizon)
                return
            await self.advance_to(max(timers[0], self._now))
        raise RuntimeError(f"timers kept re-arming: still busy after {MAX_WAKEUPS} wake-ups")


async def _settle() -> None:
    for _ in range(SETTLE_ROUNDS):
        await asyncio.sleep(0)


__all__ = ["Freezer", "VirtualClock"]
