"""The gateway knows its in-flight work exactly (issue 12, situation 7).

``wait_idle()`` and ``VirtualClock.advance`` return when no registered work is runnable
before the clock's next due time: work waiting on a far timer is settled without moving
the clock, work that keeps the loop busy for any number of turns is waited for, and a
clock is judged by what it says (``moves_by_itself``), not by its class.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
A = "agent:main:work:a"
B = "agent:main:work:b"
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
# Far more loop turns than the old guess of idleness (200 turns and 30 ms) allowed.
BUSY_TURNS = 20_000


@asynccontextmanager
async def open_gateway(
    store: str,
    clock: Clock,
    runtime: AgentRuntime,
    *,
    config: dict[str, Any] | None = None,
    sessions: tuple[str, ...] = (MAIN, A, B),
) -> AsyncIterator[Gateway]:
    gw = await Gateway.open(
        config=GatewayConfig.load(config or QUIET),
        store=store,
        clock=clock,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )
    try:
        for key in sessions:
            await gw.record_message(key, role="user", content="(opened)")
        yield gw
    finally:
        await gw.close()


async def fire(gw: Gateway, target: str, message: str) -> str:
    """A fire-and-forget send: its run id."""
    result = await gw.call_tool(
        MAIN, "sessions_send", {"sessionKey": target, "message": message, "timeoutSeconds": 0}
    )
    assert result["status"] == "accepted", result
    return str(result["runId"])


async def run_status(gw: Gateway, run_id: str) -> str:
    run = await internals(gw).run_engine.load(UUID(run_id))
    assert run is not None
    return run.state.status


def all_slots_free(gw: Gateway) -> bool:
    return (
        internals(gw).run_engine.free_slots() == internals(gw).config.agents.defaults.maxConcurrent
    )


class BusyAgent(AgentRuntime):
    """Keeps the event loop busy for many turns (pure asyncio work) before replying."""

    def __init__(self, turns: int = BUSY_TURNS) -> None:
        self.turns = turns

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP")
        for _ in range(self.turns):
            await asyncio.sleep(0)
        return RunReply(text=f"done after {self.turns} turns")


async def test_wait_idle_waits_for_a_runtime_busy_for_thousands_of_loop_turns(
    store_url: str, clock: VirtualClock
) -> None:
    # Failed before the registry: 200 quiet loop turns and 30 ms without a new event
    # were taken for idleness, and wait_idle returned with the run still running.
    async with open_gateway(store_url, clock, BusyAgent()) as gw:
        run_id = await fire(gw, A, "work hard")
        started = clock.now()
        await gw.wait_idle()
        assert await run_status(gw, run_id) == "ok"
        assert clock.now() == started
        assert all_slots_free(gw)


async def test_wait_idle_returns_with_a_far_timer_pending_without_moving_the_clock(
    clock: VirtualClock,
) -> None:
    agent = ScriptedRuntime.from_dict({"rules": [{"step": "primary", "delaySeconds": 86_400}]})
    config = {**QUIET, "agents": {"defaults": {"timeoutSeconds": 2 * 86_400}}}
    async with open_gateway("memory", clock, agent, config=config) as gw:
        run_id = await fire(gw, A, "take a day")
        started = clock.now()
        await gw.wait_idle()
        assert clock.now() == started
        assert await run_status(gw, run_id) == "running"
        assert clock.next_wake() == started + timedelta(days=1)
        # The runtime's scripted delay is its run's wait on the clock, nothing else.
        assert any(
            line.startswith("runtime:") and "waiting on clock" in line
            for line in internals(gw).in_flight.snapshot()
        )
        await clock.advance(timedelta(days=1))
        assert await run_status(gw, run_id) == "ok"
        await gw.wait_idle()
        assert all_slots_free(gw)


class HandOffAgent(AgentRuntime):
    """A's run waits on a future that B's run resolves after busy work of its own."""

    def __init__(self) -> None:
        self.handed: asyncio.Future[str] | None = None

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP")
        if self.handed is None:
            self.handed = asyncio.get_running_loop().create_future()
        if request.session_key == A:
            return RunReply(text=f"A got {await self.handed}")
        for _ in range(BUSY_TURNS // 4):
            await asyncio.sleep(0)
        self.handed.set_result("the baton")
        return RunReply(text="B handed it over")


async def test_wait_idle_waits_for_a_run_awaiting_a_future_that_other_work_resolves(
    clock: VirtualClock,
) -> None:
    agent = HandOffAgent()
    async with open_gateway("memory", clock, agent) as gw:
        waiting = await fire(gw, A, "wait for B")
        handing = await fire(gw, B, "hand over")
        await gw.wait_idle()
        assert await run_status(gw, waiting) == "ok"
        assert await run_status(gw, handing) == "ok"
        replies = [event.reply for _, event in store_of(gw).events() if hasattr(event, "reply")]
        assert "A got the baton" in replies
        assert all_slots_free(gw)


async def test_a_run_waiting_for_a_lane_slot_is_a_lock_wait_and_runs_when_one_is_free(
    clock: VirtualClock,
) -> None:
    agent = ScriptedRuntime.from_dict({"rules": [{"step": "primary", "delaySeconds": 30}]})
    config = {**QUIET, "agents": {"defaults": {"maxConcurrent": 1}}}
    async with open_gateway("memory", clock, agent, config=config) as gw:
        first = await fire(gw, A, "first")
        second = await fire(gw, B, "second")
        await gw.wait_idle()
        states = internals(gw).in_flight.snapshot()
        assert any("waiting on lock" in line for line in states), states
        assert await run_status(gw, second) == "queued"
        await clock.advance(30)
        assert await run_status(gw, first) == "ok"
        assert await run_status(gw, second) == "running"
        await clock.advance(30)
        assert await run_status(gw, second) == "ok"
        await gw.wait_idle()
        assert all_slots_free(gw)


async def test_archive_timers_are_parked_clock_waits_not_renamed_tasks(clock: VirtualClock) -> None:
    agent = ScriptedRuntime.from_dict({"rules": [{"reply": "ANNOUNCE_SKIP"}]})
    config = {**QUIET, "agents": {"defaults": {"subagents": {"archiveAfterMinutes": 60}}}}
    async with open_gateway("memory", clock, agent, config=config) as gw:
        result = await gw.call_tool(MAIN, "sessions_spawn", {"task": "look around"})
        assert result["status"] == "accepted", result
        await gw.wait_idle()
        assert [task.get_name() for task in asyncio.all_tasks() if "timer" in task.get_name()] == []
        states = internals(gw).in_flight.snapshot()
        assert any(
            line.startswith("spawn:") and "waiting on clock" in line and "(parked)" in line
            for line in states
        ), states
        await clock.advance(timedelta(minutes=60))
        await gw.wait_idle()
        assert internals(gw).in_flight.snapshot() == []
        assert all_slots_free(gw)


async def test_one_clock_settles_every_gateway_opened_on_it(clock: VirtualClock) -> None:
    agent = ScriptedRuntime.from_dict({"rules": [{"step": "primary", "delaySeconds": 10}]})
    async with (
        open_gateway("memory", clock, agent) as first,
        open_gateway("memory", clock, agent) as second,
    ):
        runs = [(first, await fire(first, A, "one")), (second, await fire(second, B, "two"))]
        await clock.advance(10)
        # advance alone settled both: no wait_idle needed.
        assert [await run_status(gw, run_id) for gw, run_id in runs] == ["ok", "ok"]
        await first.close()
        third_run = await fire(second, A, "three")
        await clock.advance(10)
        assert await run_status(second, third_run) == "ok"


class ManualClock(Clock):
    """A clock of one's own, neither SystemClock nor VirtualClock, moved by ``tick``."""

    def __init__(self) -> None:
        self._now = datetime(2026, 3, 1, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def moves_by_itself(self) -> bool:
        return False

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        due = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (due, next(self._order), future))
        await future

    def tick(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            future = heapq.heappop(self._sleepers)[2]
            if not future.done():
                future.set_result(None)


class InstantClock(Clock):
    """A clock of one's own whose sleeps end at once (time moves by itself, fast)."""

    def __init__(self) -> None:
        self._now = datetime(2026, 3, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self._now += timedelta(seconds=max(0.0, seconds))
        await asyncio.sleep(0)


async def test_a_custom_clock_that_is_moved_by_hand_settles_waits_on_it() -> None:
    clock = ManualClock()
    agent = ScriptedRuntime.from_dict({"rules": [{"step": "primary", "delaySeconds": 5}]})
    async with open_gateway("memory", clock, agent) as gw:
        run_id = await fire(gw, A, "five seconds")
        await gw.wait_idle()  # returns: the run waits on a clock that only moves by hand
        assert await run_status(gw, run_id) == "running"
        clock.tick(5)
        await gw.wait_idle()
        assert await run_status(gw, run_id) == "ok"
        assert all_slots_free(gw)


async def test_a_custom_clock_that_moves_by_itself_is_waited_for() -> None:
    assert InstantClock().moves_by_itself
    agent = ScriptedRuntime.from_dict({"rules": [{"step": "primary", "delaySeconds": 5}]})
    async with open_gateway("memory", InstantClock(), agent) as gw:
        run_id = await fire(gw, A, "five seconds")
        await gw.wait_idle()
        assert await run_status(gw, run_id) == "ok"
        assert all_slots_free(gw)
