"""Cancelling runs (issue 13, item 2; ADR 0017): ``gw.cancel_run`` records
``RunCancelled``, stops the runtime's call, answers the waiting ``sessions_send`` with
``cancelled``, lets the exchange or spawn carry on as after a failed run, and cascades to
the runs the cancelled run caused. On every store, on a VirtualClock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID, uuid4

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import CapturingDelivery, VirtualClock

MAIN = "agent:main:main"
A = "agent:main:work:a"
B = "agent:main:work:b"
C = "agent:main:work:c"
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
FORWARD = {A: B, B: C}


class Agents(AgentRuntime):
    """Primary runs work a minute (on the gateway clock) before answering; with
    ``forward``, A's and B's runs first send on down the chain A -> B -> C (or spawn a
    sub-agent). Records what each run was asked and whether its call was cancelled."""

    def __init__(self, *, forward: bool = False, spawn: bool = False) -> None:
        self.gateway: Gateway | None = None
        self.forward = forward
        self.spawn = spawn
        self.asked: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.started = asyncio.Event()

    async def run(self, request: RunRequest) -> RunReply:
        self.asked.append((request.step, request.message))
        self.started.set()
        if request.step in {"announce", "subagent_announce"}:
            return RunReply(text="Result: stopped early" if request.step != "announce" else "ok")
        assert self.gateway is not None
        if self.forward and request.session_key in FORWARD:
            params = {
                "sessionKey": FORWARD[request.session_key],
                "message": "on",
                "timeoutSeconds": 0,
            }
            await self.gateway.call_tool(request.session_key, "sessions_send", params)
        if self.spawn and request.step == "primary":
            await self.gateway.call_tool(request.session_key, "sessions_spawn", {"task": "dig"})
        try:
            await request.clock.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.append(request.run_id)
            raise
        self.finished.append(request.run_id)
        return RunReply(text=f"done: {request.message}")


@asynccontextmanager
async def open_gateway(
    store: str, clock: VirtualClock, agents: Agents, config: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Gateway, CapturingDelivery]]:
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config or QUIET)),
        store=store,
        clock=clock,
        runtime=agents,
        delivery=delivery,
    )
    agents.gateway = gw
    try:
        await gw.record_message(MAIN, role="user", content="hi", channel="whatsapp", to="+1555")
        for key in (A, B, C):
            await gw.record_message(key, role="user", content="(opened)")
        yield gw, delivery
    finally:
        await gw.close()


async def fire(gw: Gateway, target: str, message: str) -> str:
    result = await gw.call_tool(
        MAIN, "sessions_send", {"sessionKey": target, "message": message, "timeoutSeconds": 0}
    )
    assert result["status"] == "accepted", result
    return str(result["runId"])


async def status(gw: Gateway, run_id: str) -> str:
    run = await gw.run(run_id)
    assert run is not None
    return str(run["status"])


def gist_of_cancel(gw: Gateway, run_id: str) -> str:
    """How the CLI's event lines show the run's RunCancelled."""
    from sessionwire.adapters.cli.event_lines import gist

    (event,) = [e for e in store_of(gw).stream(UUID(run_id)) if type(e).__name__ == "RunCancelled"]
    return gist(event, lambda key: key)


def outcomes(gw: Gateway, run_id: str) -> list[str]:
    """The outcome events the run's stream holds (a run ends exactly once)."""
    ends = {"RunCompleted", "RunFailed", "RunTimedOut", "RunCancelled"}
    names = [type(event).__name__ for event in store_of(gw).stream(UUID(run_id))]
    return [name for name in names if name in ends]


async def test_a_running_run_is_cancelled_and_its_waiting_caller_hears_cancelled(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        send = asyncio.create_task(
            gw.call_tool(MAIN, "sessions_send", {"sessionKey": A, "message": "long job"})
        )
        await agents.started.wait()
        await gw.wait_idle()
        (running,) = (await gw.runs(session_key=A, status="running"))["runs"]
        run_id = running["runId"]

        answer = await gw.cancel_run(run_id, "no longer needed")
        assert answer is not None
        assert answer["status"] == "cancelled"
        assert answer["cancelled"] is True
        assert answer["cascaded"] == []
        assert answer["error"] == "run cancelled: no longer needed"
        assert answer["endedAt"] is not None

        result = await send
        assert result["status"] == "cancelled"
        assert result["runId"] == run_id
        assert result["error"] == "run cancelled: no longer needed"
        await gw.wait_idle()
        assert agents.cancelled == [run_id]  # the runtime's call was stopped
        assert agents.finished == []
        assert outcomes(gw, run_id) == ["RunCancelled"]
        summaries = [entry.summary for entry in (await gw.timeline(A)).entries]
        assert "run cancelled: no longer needed" in summaries
        assert gist_of_cancel(gw, run_id) == "cancelled: no longer needed"
        assert await gw.run(run_id) == {
            key: value for key, value in answer.items() if key not in {"cancelled", "cascaded"}
        }
        # The exchange carries on as after a failed primary run: it closes, no reply to
        # loop on and nothing to announce.
        steps = [run["step"] for run in (await gw.runs(trace_id=run_id))["runs"]]
        assert steps == ["primary"]
        exchange = store_of(gw).work(UUID(answer["exchangeId"]))
        assert exchange is not None
        assert json.loads(exchange.state_json)["status"] == "closed"


async def test_a_queued_run_is_cancelled_without_ever_reaching_its_agent(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        first = await fire(gw, A, "first")
        second = await fire(gw, A, "second")  # queued behind the first
        await gw.wait_idle()
        assert await status(gw, second) == "queued"
        answer = await gw.cancel_run(second)
        assert answer is not None
        assert (answer["status"], answer["cancelled"], answer["startedAt"]) == (
            "cancelled",
            True,
            None,
        )
        assert answer["error"] == "run cancelled"
        await clock.advance(60)
        await gw.wait_idle()
        assert await status(gw, first) == "ok"
        assert ("primary", "second") not in agents.asked
        assert await status(gw, second) == "cancelled"
        assert outcomes(gw, second) == ["RunCancelled"]
        history = await gw.call_tool(MAIN, "sessions_history", {"sessionKey": A})
        texts = [str(message["content"]) for message in history["messages"]]
        assert not any("second" in text for text in texts)


async def test_cancelling_an_ended_run_is_a_clear_no_op(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        run_id = await fire(gw, A, "quick")
        await clock.advance(60)
        await gw.wait_idle()
        before = await gw.run(run_id)
        assert before is not None
        assert before["status"] == "ok"
        answer = await gw.cancel_run(run_id, "too late")
        assert answer == {
            **before,
            "cancelled": False,
            "reason": "the run had already ended (ok)",
        }
        assert await gw.run(run_id) == before
        assert outcomes(gw, run_id) == ["RunCompleted"]


async def test_unknown_malformed_and_hidden_runs_are_not_found_and_untouched(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        run_id = await fire(gw, A, "mine")
        await gw.wait_idle()
        assert await gw.cancel_run(str(uuid4())) is None
        assert await gw.cancel_run("not-a-uuid") is None
        # Another agent may not read main's sessions (agent-to-agent is off): not found.
        assert await gw.cancel_run(run_id, requester="agent:ops:main") is None
        assert await status(gw, run_id) == "running"
        with pytest.raises(ValueError, match="reason"):
            await gw.cancel_run(run_id, "x" * 1001)
        with pytest.raises(ValueError, match="reason"):
            await gw.cancel_run(run_id, 7)  # type: ignore[arg-type]
        answer = await gw.cancel_run(run_id, requester=MAIN)
        assert answer is not None
        assert answer["cancelled"] is True


class CancelsItself(AgentRuntime):
    """The run is cancelled while its agent is answering; the answer comes anyway."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "primary":
            assert self.gateway is not None
            answer = await self.gateway.cancel_run(request.run_id, "changed my mind")
            assert answer is not None
            assert answer["cancelled"] is True
        return RunReply(text="the reply that lost the race")


async def test_a_reply_arriving_after_the_cancel_is_not_recorded(
    store_url: str, clock: VirtualClock
) -> None:
    agents = CancelsItself()
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(QUIET)),
        store=store_url,
        clock=clock,
        runtime=agents,
    )
    agents.gateway = gw
    try:
        await gw.record_message(A, role="user", content="(opened)")
        result = await gw.call_tool(MAIN, "sessions_send", {"sessionKey": A, "message": "go"})
        assert result["status"] == "cancelled"
        await gw.wait_idle()
        run_id = result["runId"]
        assert outcomes(gw, run_id) == ["RunCancelled"]
        history = await gw.call_tool(MAIN, "sessions_history", {"sessionKey": A})
        assert "the reply that lost the race" not in str(history["messages"])
    finally:
        await gw.close()


async def test_a_cancel_racing_the_runs_own_end_records_exactly_one_outcome(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        run_id = await fire(gw, A, "photo finish")
        await gw.wait_idle()
        # The clock reaching the run's end and the cancel, at once.
        _, answer = await asyncio.gather(clock.advance(60), gw.cancel_run(run_id, "race"))
        await gw.wait_idle()
        assert answer is not None
        final = await status(gw, run_id)
        assert outcomes(gw, run_id) == ["RunCancelled" if answer["cancelled"] else "RunCompleted"]
        assert final == ("cancelled" if answer["cancelled"] else "ok")
        assert answer["status"] == final


async def test_a_cancel_that_loses_a_store_conflict_to_the_runs_end_is_a_no_op(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run's end is saved between the cancel's read and its save: the save conflicts,
    # the retry reads the ended run, and the domain refuses the second outcome.
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        run_id = await fire(gw, A, "photo finish")
        await gw.wait_idle()
        engine = internals(gw).run_engine
        real_load = engine.load
        ended_first = False

        async def load_then_end(run: UUID) -> Any:
            nonlocal ended_first
            found = await real_load(run)
            if not ended_first and found is not None:
                ended_first = True
                done = await real_load(run)
                assert done is not None
                done.complete(reply="first", usage=None, model=None, at=clock.now())
                await internals(gw).store.save(done)
            return found

        monkeypatch.setattr(engine, "load", load_then_end)
        answer = await gw.cancel_run(run_id)
        assert answer is not None
        assert (answer["cancelled"], answer["status"]) == (False, "ok")
        assert outcomes(gw, run_id) == ["RunCompleted"]


async def test_a_spawned_child_cancelled_reports_status_cancelled(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, delivery):
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "slow research"})
        assert spawned["status"] == "accepted", spawned
        await gw.wait_idle()
        answer = await gw.cancel_run(spawned["runId"], "out of budget")
        assert answer is not None
        assert answer["cancelled"] is True
        await gw.wait_idle()
        (report,) = [sent for sent in delivery.sent if sent["sessionKey"] == MAIN]
        assert report["message"].startswith("Status: cancelled")
        assert "run cancelled: out of budget" in report["message"]


async def test_a_cancel_cascades_to_the_runs_it_caused_transitively(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Agents(forward=True)
    async with open_gateway(store_url, clock, agents) as (gw, _):
        root = await fire(gw, A, "start the chain")  # A sends to B, B sends to C
        await gw.wait_idle()
        chain = (await gw.runs(trace_id=root))["runs"]
        by_session = {run["sessionKey"]: run for run in chain if run["step"] == "primary"}
        assert {key: run["status"] for key, run in by_session.items()} == {
            A: "running",
            B: "running",
            C: "running",
        }
        b_run, c_run = by_session[B]["runId"], by_session[C]["runId"]
        assert by_session[B]["parentRunId"] == root
        assert by_session[C]["parentRunId"] == b_run

        answer = await gw.cancel_run(root, "stop everything")
        assert answer is not None
        assert answer["cascaded"] == [b_run, c_run]
        await gw.wait_idle()
        assert sorted(agents.cancelled) == sorted([root, b_run, c_run])
        for run_id in (b_run, c_run):
            cascaded = await gw.run(run_id)
            assert cascaded is not None
            assert cascaded["status"] == "cancelled"
            assert cascaded["error"] == f"run cancelled: caused by cancelled run {root}"


async def test_a_cancel_cascades_through_a_run_that_already_ended(
    store_url: str, clock: VirtualClock
) -> None:
    # A's turn spawned a sub-agent and ended; the child still runs: caused by A's run.
    agents = Agents(spawn=True)
    async with open_gateway(store_url, clock, agents) as (gw, _):
        outer = await fire(gw, B, "spawn and go")
        await gw.wait_idle()
        (turn,) = [
            run for run in (await gw.runs(trace_id=outer))["runs"] if run["step"] == "subagent_task"
        ]
        assert turn["parentRunId"] == outer
        answer = await gw.cancel_run(outer)
        assert answer is not None
        assert answer["cascaded"] == [turn["runId"]]
        assert await status(gw, turn["runId"]) == "cancelled"


def test_the_sync_gateway_cancels_too(tmp_path: Any) -> None:
    from sessionwire import SyncGateway

    with SyncGateway.open(config=before_scopes(QUIET), store=f"sqlite:///{tmp_path}/sync.db") as gw:
        gw.record_message(A, role="user", content="(opened)")
        assert gw.cancel_run(str(uuid4())) is None
        sent = gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": A, "message": "hi", "timeoutSeconds": 0}
        )
        gw.wait_idle()
        answer = gw.cancel_run(sent["runId"])
        assert answer is not None
        assert answer["cancelled"] is False  # no runtime: it failed at once
        assert answer["reason"].startswith("the run had already ended")


async def test_a_cancel_between_dispatch_and_the_runtime_call_stops_the_call_before_it_starts(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = Agents()
    async with open_gateway(store_url, clock, agents) as (gw, _):
        engine = internals(gw).run_engine
        real_dispatch = engine._record_dispatch

        async def dispatch_then_cancel(run: Any) -> Any:
            dispatched = await real_dispatch(run)
            answer = await gw.cancel_run(str(run.id), "just in time")
            assert answer is not None
            assert answer["cancelled"] is True
            return dispatched

        monkeypatch.setattr(engine, "_record_dispatch", dispatch_then_cancel)
        run_id = await fire(gw, A, "never asked")
        await gw.wait_idle()
        assert ("primary", "never asked") not in agents.asked
        assert await status(gw, run_id) == "cancelled"
        assert outcomes(gw, run_id) == ["RunCancelled"]
