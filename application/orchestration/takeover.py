"""Taking over the work of a dead gateway (contract decision 24).

Gateways sharing a store each keep a heartbeat there; one whose heartbeat expired is
dead, and so is one the store can tell has died (on PostgreSQL: its liveness lock is
free, ADR 0049), without waiting for its heartbeat to expire. Every so often a live
gateway asks the store for the dead ones: the store hands each to exactly one asker,
which then resumes the store's pending work (the dead one's runs among it). Resuming
twice is harmless: a run executes under its session's lease and only while the run
itself is unfinished, so each taken-over run resumes exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock

log = library_logger("sessionwire.gateway")

OnTakeover = Callable[[list[str]], Awaitable[None]]


class Takeover:
    """Checks for dead gateways as often as the store says (every second on PostgreSQL,
    which tells a killed gateway at once: ADR 0049), as parked work (``wait_idle`` on a
    real clock does not wait for it), and calls ``on_takeover`` with those it took over."""

    def __init__(
        self, *, locks: AsyncStore, clock: Clock, in_flight: InFlight, on_takeover: OnTakeover
    ) -> None:
        self.locks = locks
        self.clock = clock
        self.in_flight = in_flight
        self.on_takeover = on_takeover
        self._watch: asyncio.Task[None] | None = None

    @property
    def interval(self) -> float | None:
        """Seconds between two checks; None where there is no other gateway to take over."""
        return self.locks.takeover_check_seconds

    def start(self) -> None:
        """Watch from now on (once; again after a start changes nothing). Not on a store
        that one process uses, nor on a clock that only a test moves: there the test
        calls ``check`` when it means to (a timer that re-arms itself forever would keep
        ``run_until_idle`` from ever ending)."""
        if self.interval is None or not self.clock.moves_by_itself:
            return
        if self._watch is not None and not self._watch.done():
            return
        self._watch = self.in_flight.start(self._watching(), Owner("takeover", "gateways"))

    async def check(self) -> list[str]:
        """Take over the gateways found dead now; resume their work if any."""
        taken = await self.locks.take_over_dead_gateways()
        if taken:
            log.info("took over dead gateways", gateways=taken)
            await self.on_takeover(taken)
        return taken

    async def _watching(self) -> None:
        interval = self.interval
        assert interval is not None
        while True:
            await self.in_flight.sleep(interval, parked=True)
            try:
                await self.check()
            except Exception:  # a failing store: the next check tries again
                log.exception("takeover check failed")
