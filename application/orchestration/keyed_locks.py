"""One asyncio lock per key (a trace, a session), made on first use and dropped when no
one holds or waits for it, so a long-lived gateway keeps no lock per key it once saw.

A wait for one is a wait the in-flight registry sees: a VirtualClock's advance settles
while a task waits here, as it does for every other wait (ADR 0030)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sessionwire.application.orchestration.in_flight import InFlight, Wait


class KeyedLocks:
    def __init__(self, in_flight: InFlight) -> None:
        self.in_flight = in_flight
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: dict[str, int] = {}

    def __contains__(self, key: str) -> bool:
        """Whether someone holds or waits for ``key``'s lock."""
        return key in self._locks

    @asynccontextmanager
    async def held(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        self._holders[key] = self._holders.get(key, 0) + 1
        try:
            with self.in_flight.waiting(Wait("lock", ready=lambda: not lock.locked())):
                await lock.acquire()
            try:
                yield
            finally:
                lock.release()
        finally:
            self._holders[key] -= 1
            if self._holders[key] == 0:
                del self._holders[key]
                del self._locks[key]
