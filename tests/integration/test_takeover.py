"""The takeover watch (contract decision 24): as often as the store says (every second on
PostgreSQL, ADR 0049: far more often than a lease runs out) a gateway asks the store for
dead gateways, as parked work, and resumes their work when it took any over; a store
that one process uses, or a clock only a test moves, is not watched."""

from __future__ import annotations

from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.takeover import Takeover
from sessionwire.application.ports.session_locks import SessionLocks
from sessionwire.testing import VirtualClock

LEASE = 10.0
CHECK = 1.0


class SharedLocks(SessionLocks):
    """A store several gateways share, where one gateway is found dead once."""

    lease_seconds = LEASE
    takeover_check_seconds = CHECK

    def __init__(self) -> None:
        self.asked = 0
        self.dead = [["gateway-b"]]

    async def take_over_dead_gateways(self) -> list[str]:
        self.asked += 1
        return self.dead.pop() if self.dead else []


class MovingClock(VirtualClock):
    """Moved by the test, but judged as a clock that moves by itself (a real one)."""

    @property
    def moves_by_itself(self) -> bool:
        return True


async def test_at_each_check_the_dead_are_taken_over_and_their_work_resumed() -> None:
    clock = MovingClock()
    in_flight = InFlight(clock)
    clock.attach(in_flight)
    locks = SharedLocks()
    resumed: list[list[str]] = []

    async def resume(gateways: list[str]) -> None:
        resumed.append(gateways)

    takeover = Takeover(locks=locks, clock=clock, in_flight=in_flight, on_takeover=resume)
    takeover.start()
    takeover.start()  # once
    try:
        await clock.advance(CHECK / 2)
        assert (locks.asked, resumed) == (0, [])
        # Parked: a real clock's wait_idle does not wait for the watch.
        assert in_flight.snapshot() == [
            f"takeover:gateways waiting on clock until {clock.timers[0].isoformat()} (parked)"
        ]
        await clock.advance(CHECK / 2)
        assert (locks.asked, resumed) == (1, [["gateway-b"]])
        await clock.advance(CHECK)
        assert (locks.asked, resumed) == (2, [["gateway-b"]])
    finally:
        for task in in_flight.tasks():
            task.cancel()


async def test_nothing_is_watched_without_leases_or_on_a_clock_a_test_moves() -> None:
    async def resume(_: list[str]) -> None:
        raise AssertionError("nothing to take over")

    for locks, clock in ((SessionLocks(), MovingClock()), (SharedLocks(), VirtualClock())):
        in_flight = InFlight(clock)
        Takeover(locks=locks, clock=clock, in_flight=in_flight, on_takeover=resume).start()
        assert in_flight.tasks() == []
        assert await SessionLocks().take_over_dead_gateways() == []
