"""A wait with a due time ends at that time, whenever its timer first runs.

Found by the simulator (PostgreSQL, two gateways, seed 340): a send's wait began at
09:00:00 for one second; the clock reached 09:00:01 before the wait's timer task took
its first step, so the timer slept one second *from then*. The registry counted the
wait as runnable (its due time had come) while nothing would wake it before 09:00:02:
the clock's settle waited for it for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import pytest
from hang_bounds import HANG_SECONDS
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.testing import VirtualClock

pytestmark = pytest.mark.asyncio


async def test_a_wait_whose_due_time_comes_before_its_timer_runs_ends_at_that_time() -> None:
    clock = VirtualClock()
    in_flight = InFlight(clock)
    clock.attach(in_flight)
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    due = clock.now() + timedelta(seconds=1)

    # The work takes its first step inside the clock's settle: it enters its wait
    # (its timer task scheduled, not started), the settle finds it waiting for a later
    # time and the clock moves to that time before the timer's first step.
    work = in_flight.start(in_flight.wait_for(never, due=due), Owner("run", "r1"))
    # Not a timing: a guard, so that the bug fails this test instead of hanging it.
    async with asyncio.timeout(HANG_SECONDS):
        await clock.advance(1)

    assert work.done(), in_flight.snapshot()
    assert work.result() is False
    assert clock.now() == due


class Reentrant:
    """Session locks a holder may take again (as a store's lock is, within one task)."""

    def session_lock(self, key: str) -> Any:
        return contextlib.nullcontext()


async def test_a_lock_held_twice_here_is_free_once_both_holds_end() -> None:
    # Found by mutation testing (docs/testing.md): the count of holds here must reach
    # zero, not be dropped at the inner release, or a later wait for the lock never
    # counts as ready.
    from sessionwire.application.orchestration import in_flight as module

    in_flight = InFlight(VirtualClock())
    held = ("memory", "agent:main:main")
    store = Reentrant()
    async with in_flight.session_lock(store, *held):
        async with in_flight.session_lock(store, *held):
            assert module._held_here[held] == 2
        assert module._held_here[held] == 1
    assert held not in module._held_here
