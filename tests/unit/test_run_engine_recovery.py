"""The run engine's paths the simulator's seeds do not take (found by mutation testing,
docs/testing.md "What mutation testing left"): a session actor whose run raised goes on,
and the watch for cancellations another process recorded stops only those runs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.orchestration import runs
from sessionwire.application.orchestration.cancellation import RunCancellation
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"


class Agents(AgentRuntime):
    async def run(self, request: RunRequest) -> RunReply:
        return RunReply(text="ANNOUNCE_SKIP" if "announce" in request.step else "done")


async def test_a_run_whose_execution_raised_once_is_run_again_and_ends_ok(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[int] = []

    async def back_off(attempt: int) -> None:
        pauses.append(attempt)

    # The retry is spaced by a real-time pause that grows with the attempt (conflicts.py),
    # from the first: recorded here instead of taken.
    monkeypatch.setattr(runs, "back_off", back_off)
    clock = VirtualClock()
    gw = await Gateway.open(
        config=GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 0}}}),
        store="memory",
        clock=clock,
        runtime=Agents(),
    )
    engine = internals(gw).run_engine
    execute = engine._execute
    raised: list[UUID] = []

    async def raising_once(run_id: UUID) -> None:
        # A store hiccup in the actor's own work, before anything is recorded.
        if not raised:
            raised.append(run_id)
            raise RuntimeError("store hiccup")
        await execute(run_id)

    engine._execute = raising_once  # type: ignore[method-assign]
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "dig the logs"})
        assert spawned["status"] == "accepted", spawned
        await clock.advance(1)
        await gw.wait_idle()
        listed = await gw.call_tool(MAIN, "subagents", {})
    finally:
        await gw.close()

    assert raised
    assert pauses == [1]
    assert [row["status"] for row in listed["recent"]] == ["ok"], listed


@dataclass
class Found:
    status: str


class Engine:
    """The two runs this process executes, and what the watch stopped."""

    def __init__(self, runs: list[UUID]) -> None:
        self.runs = runs
        self.stopped: list[UUID] = []
        self.turn_started: Any = None

    def runs_in_flight(self) -> list[UUID]:
        return [run for run in self.runs if run not in self.stopped]

    def stop(self, run: UUID) -> bool:
        self.stopped.append(run)
        return True


class Store:
    def __init__(self, statuses: dict[UUID, str]) -> None:
        self.statuses = statuses

    async def run(self, run_id: str) -> Found | None:
        return Found(self.statuses[UUID(run_id)])


class RealTime:
    moves_by_itself = True


class Polls:
    """The in-flight registry as the watch uses it: its task, and a pause that lets the
    test end the watch after one pass (the running run ends by itself)."""

    def __init__(self, engine: Engine, running: UUID) -> None:
        self.engine, self.running = engine, running
        self.task: asyncio.Task[None] | None = None

    def start(self, work: Any, owner: Any, *, context: Any = None) -> None:
        # The watch starts outside any run (``outside_any_run()``): in that context.
        self.task = asyncio.get_running_loop().create_task(work, context=context)

    async def sleep(self, seconds: float, *, parked: bool = False) -> None:
        self.engine.runs.remove(self.running)


async def test_the_watch_stops_the_runs_another_process_cancelled_and_only_those() -> None:
    running, cancelled = uuid4(), uuid4()
    engine = Engine([running, cancelled])
    polls = Polls(engine, running)
    watch = RunCancellation(
        engine=engine,  # type: ignore[arg-type]
        store=Store({running: "running", cancelled: "cancelled"}),  # type: ignore[arg-type]
        clock=RealTime(),  # type: ignore[arg-type]
        in_flight=polls,  # type: ignore[arg-type]
    )

    watch.watch()
    assert polls.task is not None
    await polls.task

    assert engine.stopped == [cancelled]


async def test_a_run_still_lending_its_slot_does_not_queue_for_a_permit() -> None:
    # Two waits of one run lend its slot; the first ends while the lane is full: the
    # run must not queue for a permit (runs holding the lane may wait on its session's
    # lock), it takes one back only when its last wait ends.
    from sessionwire.application.orchestration.in_flight import InFlight
    from sessionwire.application.orchestration.runs import Lane, LaneSlot

    lane = Lane(1, InFlight(VirtualClock()))
    slot = LaneSlot(lane, uuid4())
    await slot.acquire()
    slot.lend()
    slot.lend()
    await lane.acquire()  # the nested run takes the permit

    # Returns at once (its first step): the other wait still lends. Not awaited, so
    # that a take-back that queues fails here instead of hanging.
    first = asyncio.ensure_future(slot.take_back())
    await asyncio.sleep(0)
    done = first.done()
    first.cancel()
    assert done
    assert (slot.held, lane.free) == (False, 0)
    lane.release()  # the nested run ends
    await slot.take_back()
    assert (slot.held, lane.free) == (True, 0)


class Held(AgentRuntime):
    """A child's turn that lasts until the test lets it end."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            await self.release.wait()
        return RunReply(text="ANNOUNCE_SKIP" if "announce" in request.step else "done")


async def test_timing_out_a_run_another_gateway_ended_first_is_not_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On reopening, an overdue run is recorded as timed out; if another gateway recorded
    its end first, the save conflicts and the sweep goes on (its actor sees the end)."""
    clock = VirtualClock()
    agents = Held()
    gw = await Gateway.open(store="memory", clock=clock, runtime=agents)
    engine = internals(gw).run_engine
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "dig the logs"})
        assert spawned["status"] == "accepted", spawned
        run = await engine.load(UUID(spawned["runId"]))
        assert run is not None

        async def conflicting(*aggregates: Any, **options: Any) -> None:
            raise runs.StoreConflict("another gateway recorded the run's end first")

        monkeypatch.setattr(engine.store, "save", conflicting)
        await engine._time_out_overdue(run, clock.now())  # no StoreConflict escapes
    finally:
        monkeypatch.undo()
        agents.release.set()
        await gw.close()


async def _a_lender(
    *, taken: bool
) -> tuple[runs.Lane, runs.LaneSlot, asyncio.Future[None], asyncio.Task[None]]:
    """maxConcurrent 1: a run that lent its permit, waiting for a run (which took the
    permit, if ``taken``), and another run asking for a permit meanwhile."""
    from sessionwire.application.orchestration.in_flight import InFlight

    lane = runs.Lane(1, InFlight(VirtualClock()))
    lender = runs.LaneSlot(lane, uuid4())
    await lender.acquire()
    waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    lender.lend(waited)
    if taken:
        await lane.acquire()
    else:
        waited.set_result(None)  # ended without taking the permit (cancelled while queued)
    other = asyncio.ensure_future(lane.acquire())
    await asyncio.sleep(0)
    return lane, lender, waited, other


async def test_a_permit_freed_after_a_lenders_wait_ended_goes_back_to_the_lender() -> None:
    # The waited run ends and frees the permit before the lender's task has woken: the
    # permit is the lender's, the other run still waits.
    lane, lender, waited, other = await _a_lender(taken=True)
    waited.set_result(None)  # the waited run ends ...
    lane.release()  # ... and frees its permit, all before the lender wakes
    await asyncio.sleep(0)
    assert (lender.held, other.done()) == (True, False)
    await lender.take_back(waited)
    assert lender.held
    lender.close()  # the lender ends: now the permit is the other run's
    await other
    assert lane.free == 0


async def test_a_lender_whose_wait_timed_out_takes_the_next_permit_first() -> None:
    lane, lender, waited, other = await _a_lender(taken=True)
    back = asyncio.ensure_future(lender.take_back(waited))  # its wait timed out
    await asyncio.sleep(0)
    lane.release()  # the waited run ends later
    await back
    assert (lender.held, other.done()) == (True, False)
    other.cancel()


async def test_a_free_permit_goes_to_an_owed_lender_before_a_new_run() -> None:
    # The permit is free, and the run asking for one before the lender wakes waits.
    lane, lender, waited, other = await _a_lender(taken=False)
    assert (lender.held, other.done(), lane.free) == (True, False, 0)
    await lender.take_back(waited)
    lender.close()
    await other
