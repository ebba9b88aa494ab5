"""Test kit: a virtual clock that drives every wait in the gateway."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta

from sessionwire.application.ports import Clock

SETTLE_ROUNDS = 20


class VirtualClock(Clock):
    """Time that moves only when a test says so; sleepers wake in due order."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._now = start.astimezone(UTC)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._now

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
            self._now = max(self._now, due)
            if not future.done():
                future.set_result(None)
            await _settle()
        self._now = target
        await _settle()


async def _settle() -> None:
    for _ in range(SETTLE_ROUNDS):
        await asyncio.sleep(0)


__all__ = ["VirtualClock"]
