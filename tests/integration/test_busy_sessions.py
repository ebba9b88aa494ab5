"""The busy policy (issue 13 item 4, ADR 0022): what a ``sessions_send`` into a session
with a run in flight does — queue behind it (``enqueue``, the default), be refused
(``reject``) or cancel it and take the new message (``interrupt``) — set by
``session.agentToAgent.busy`` and per session by ``sessions.patch {busy}``; each decision
recorded as a ``BusyDecided`` event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import httpx
import pytest
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.config.gateway_config import ConfigError
from sessionwire.domain.busy_decision import BusyDecision
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.session import InvalidPatch
from sessionwire.testing import ScriptedRuntime, VirtualClock

WORKER = "agent:main:work"
STARTED = {"status": "started", "mode": "announce"}
SCRIPT = {
    "rules": [
        {"step": "primary", "match": "slow", "reply": "done slowly", "delaySeconds": 60},
        {"step": "primary", "reply": "done: {message}"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


def config_with(busy: str | None = None) -> GatewayConfig:
    a2a: dict[str, Any] = {"maxPingPongTurns": 0}
    if busy is not None:
        a2a["busy"] = busy
    return GatewayConfig.load({"session": {"agentToAgent": a2a}})


async def open_gateway(store_url: str, clock: VirtualClock, busy: str | None = None) -> Gateway:
    gw = await Gateway.open(
        config=config_with(busy),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    await gw.record_message("main", role="user", content="hi")
    await gw.record_message(WORKER, role="user", content="(opened)")
    return gw


@pytest.fixture
async def enqueueing(store_url: str, clock: VirtualClock) -> AsyncIterator[Gateway]:
    gw = await open_gateway(store_url, clock)
    yield gw
    await gw.close()


@pytest.fixture
async def rejecting(store_url: str, clock: VirtualClock) -> AsyncIterator[Gateway]:
    gw = await open_gateway(store_url, clock, busy="reject")
    yield gw
    await gw.close()


async def send(gw: Gateway, message: str) -> dict[str, Any]:
    params = {"sessionKey": WORKER, "message": message, "timeoutSeconds": 0}
    return await gw.call_tool("main", "sessions_send", params)


async def keep_busy(gw: Gateway) -> str:
    """A run in flight in the worker: dispatched, its agent working for 60 s."""
    slow = await send(gw, "a slow job")
    assert slow["status"] == "accepted"
    assert slow["delivery"] == STARTED
    await gw.wait_idle()
    assert status_of(gw, slow["runId"]) == "running"
    return str(slow["runId"])


def status_of(gw: Gateway, run_id: str) -> str:
    stored = store_of(gw).work(UUID(run_id))
    assert stored is not None
    return stored.to_aggregate(Run, RunState).state.status


def decisions(gw: Gateway) -> list[BusyDecision.BusyDecided]:
    return [e for _, e in store_of(gw).events() if isinstance(e, BusyDecision.BusyDecided)]


def primaries(gw: Gateway) -> list[str]:
    return [
        event.message
        for _, event in store_of(gw).events()
        if type(event).__name__ == "RunStarted" and event.step == "primary"
    ]


def replies(gw: Gateway) -> list[str]:
    history = store_of(gw).session(WORKER)
    assert history is not None
    lines = store_of(gw).transcript(history.id, limit=100, include_tools=False)
    messages = [json.loads(line) for line in lines]
    texts = [m["content"][0]["text"] for m in messages if m["role"] == "assistant"]
    return [text for text in texts if text != "ANNOUNCE_SKIP"]  # the announce steps' replies


# enqueue: today's behaviour, the default ------------------------------------------------


async def test_by_default_a_send_into_a_busy_session_queues_behind_its_run(
    enqueueing: Gateway, clock: VirtualClock
) -> None:
    gw = enqueueing
    in_flight = await keep_busy(gw)
    queued = await send(gw, "next job")
    assert queued["status"] == "accepted"
    assert queued["delivery"] == {"status": "queued", "position": 1, "mode": "announce"}

    [decided] = decisions(gw)
    assert decided.session_key == WORKER
    assert decided.requester_key == "agent:main:main"
    assert (decided.policy, decided.decision) == ("enqueue", "enqueued")
    assert decided.rule == "session.agentToAgent.busy"
    assert decided.in_flight_run_id == in_flight
    assert decided.run_id == queued["runId"]
    assert decided.runs_ahead == 1

    await clock.advance(61)
    await gw.wait_idle()
    # Run one after the other, in arrival order.
    assert replies(gw) == ["done slowly", "done: next job"]


async def test_a_queued_sends_position_counts_every_run_ahead_of_it(
    enqueueing: Gateway, clock: VirtualClock
) -> None:
    gw = enqueueing
    await keep_busy(gw)
    second = await send(gw, "second job")
    third = await send(gw, "third job")
    assert [r["delivery"] for r in (second, third)] == [
        {"status": "queued", "position": 1, "mode": "announce"},
        {"status": "queued", "position": 2, "mode": "announce"},
    ]
    assert [d.runs_ahead for d in decisions(gw)] == [1, 2]
    await clock.advance(61)
    await gw.wait_idle()
    # Once the session has caught up, a send starts again.
    assert (await send(gw, "fourth job"))["delivery"] == STARTED


async def test_a_send_into_an_idle_session_decides_nothing(enqueueing: Gateway) -> None:
    rejecting_too = await enqueueing.patch_session(WORKER, busy="reject")
    assert rejecting_too["entry"]["busy_policy"] == "reject"
    first = await send(enqueueing, "quick job")
    await enqueueing.wait_idle()
    assert first["status"] == "accepted"
    assert first["delivery"] == STARTED
    assert decisions(enqueueing) == []
    assert replies(enqueueing) == ["done: quick job"]


# reject ---------------------------------------------------------------------------------


async def test_reject_refuses_a_send_into_a_busy_session_and_starts_nothing(
    rejecting: Gateway, clock: VirtualClock
) -> None:
    gw = rejecting
    in_flight = await keep_busy(gw)
    before = len(list(store_of(gw).events()))

    refused = await send(gw, "next job")
    assert refused["status"] == "error"
    assert refused["tool"] == "sessions_send"
    assert refused["sessionKey"] == WORKER
    assert refused["delivery"] == {"status": "refused"}
    assert refused["error"] == (
        f"session {WORKER} is busy (run {in_flight} in flight) and refuses sends while it is "
        "(session.agentToAgent.busy: reject); try again once that run has ended"
    )
    new = [type(e).__name__ for _, e in list(store_of(gw).events())[before:]]
    assert new == ["BusyDecided"]  # no run, no exchange: only the decision
    [decided] = decisions(gw)
    assert (decided.policy, decided.decision) == ("reject", "rejected")
    assert decided.in_flight_run_id == in_flight
    assert decided.run_id is None
    assert decided.trace_id == refused["runId"]  # the chain the send would have started

    # Once the run (and its exchange's announce step) has ended, the session takes sends.
    await clock.advance(61)
    await gw.wait_idle()
    later = await send(gw, "later job")
    assert later["status"] == "accepted"
    await gw.wait_idle()
    assert len(decisions(gw)) == 1
    assert replies(gw) == ["done slowly", "done: later job"]
    assert primaries(gw) == ["a slow job", "later job"]


async def test_a_waiting_send_into_a_busy_session_is_refused_at_once(
    rejecting: Gateway,
) -> None:
    await keep_busy(rejecting)
    params = {"sessionKey": WORKER, "message": "next job", "timeoutSeconds": 30}
    refused = await rejecting.call_tool("main", "sessions_send", params)
    assert refused["status"] == "error"
    assert "is busy" in refused["error"]


async def test_the_decision_is_in_both_sessions_timelines_and_its_trace(
    rejecting: Gateway,
) -> None:
    await keep_busy(rejecting)
    refused = await send(rejecting, "next job")
    [node] = (await rejecting.trace(refused["runId"])).nodes
    assert (node.kind, node.session_key) == ("busy", WORKER)
    for key in (WORKER, "main"):
        busy = [e for e in (await rejecting.timeline(key)).entries if e.kind == "busy"]
        assert [e.event for e in busy] == ["BusyDecided"]
        assert "send from agent:main:main into busy agent:main:work rejected" in busy[0].summary


# interrupt --------------------------------------------------------------------------------


@pytest.fixture
async def interrupting(store_url: str, clock: VirtualClock) -> AsyncIterator[Gateway]:
    gw = await open_gateway(store_url, clock, busy="interrupt")
    yield gw
    await gw.close()


def events_of(gw: Gateway, run_id: str) -> list[str]:
    return [type(e).__name__ for _, e in store_of(gw).events() if str(e.originator_id) == run_id]


async def test_interrupt_cancels_the_run_in_flight_and_takes_the_new_message(
    interrupting: Gateway, clock: VirtualClock
) -> None:
    gw = interrupting
    waiting = asyncio.ensure_future(
        gw.call_tool(
            "main",
            "sessions_send",
            {"sessionKey": WORKER, "message": "a slow job", "timeoutSeconds": 300},
        )
    )
    await clock.settle()  # the send's task takes its first step, and its run starts
    [slow] = [r for r in (await gw.runs(session_key=WORKER))["runs"] if r["status"] == "running"]

    urgent = await send(gw, "urgent job")
    assert urgent["status"] == "accepted"
    assert urgent["delivery"] == STARTED  # nothing is left ahead of it
    await gw.wait_idle()  # no time passes: the worker took the new message at once

    assert replies(gw) == ["done: urgent job"]
    assert status_of(gw, slow["runId"]) == "cancelled"
    assert status_of(gw, urgent["runId"]) == "ok"
    first = await waiting
    assert (first["runId"], first["status"]) == (slow["runId"], "cancelled")
    assert "interrupted by a send from agent:main:main" in first["error"]
    [decided] = decisions(gw)
    assert (decided.policy, decided.decision) == ("interrupt", "interrupted")
    assert decided.in_flight_run_id == slow["runId"]
    assert decided.cancelled_run_ids == (slow["runId"],)
    assert decided.run_id == urgent["runId"]
    assert decided.runs_ahead == 0
    assert events_of(gw, slow["runId"])[-1] == "RunCancelled"


async def test_interrupt_cancels_the_queued_runs_too(enqueueing: Gateway) -> None:
    gw = enqueueing
    running = await keep_busy(gw)
    queued = await send(gw, "queued job")
    await gw.patch_session(WORKER, busy="interrupt")

    urgent = await send(gw, "urgent job")
    assert queued["delivery"] == {"status": "queued", "position": 1, "mode": "announce"}
    assert urgent["delivery"] == STARTED
    await gw.wait_idle()

    last = decisions(gw)[-1]
    assert (last.decision, last.rule) == ("interrupted", "session override (busy=interrupt)")
    assert last.cancelled_run_ids == (running, queued["runId"])
    assert [status_of(gw, r) for r in (running, queued["runId"], urgent["runId"])] == [
        "cancelled",
        "cancelled",
        "ok",
    ]
    assert replies(gw) == ["done: urgent job"]
    assert primaries(gw) == ["a slow job", "queued job", "urgent job"]


class SelfSender:
    """An agent whose turn sends into its own session (in process), then answers."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None
        self.results: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP" if request.step == "announce" else "REPLY_SKIP")
        if request.message == "talk to yourself":
            assert self.gateway is not None
            params = {"sessionKey": request.session_key, "message": "note", "timeoutSeconds": 0}
            self.results.append(
                await self.gateway.call_tool(request.session_key, "sessions_send", params)
            )
        return RunReply(text=f"done: {request.message}")


async def test_interrupt_never_cancels_the_senders_own_run(
    store_url: str, clock: VirtualClock
) -> None:
    agent = SelfSender()
    gw = await Gateway.open(
        config=config_with("interrupt"), store=store_url, clock=clock, runtime=agent
    )
    agent.gateway = gw
    try:
        await gw.record_message("main", role="user", content="hi")
        await gw.record_message(WORKER, role="user", content="(opened)")
        first = await send(gw, "talk to yourself")
        await gw.wait_idle()

        [noted] = agent.results
        assert noted["status"] == "accepted"
        # Its own run, left alone, is ahead of the note.
        assert noted["delivery"] == {"status": "queued", "position": 1, "mode": "announce"}
        [decided] = decisions(gw)
        assert (decided.policy, decided.decision) == ("interrupt", "enqueued")
        assert decided.in_flight_run_id == first["runId"]
        assert decided.cancelled_run_ids == ()
        assert replies(gw) == ["done: talk to yourself", "done: note"]
    finally:
        await gw.close()


async def test_a_subscriber_of_either_session_sees_the_decision(rejecting: Gateway) -> None:
    await keep_busy(rejecting)
    await send(rejecting, "next job")
    store_of(rejecting).seal()
    for key in (WORKER, "agent:main:main"):
        seen = [event async for event in rejecting.subscribe(session_key=key).recorded()]
        [busy] = [event for event in seen if event["type"] == "BusyDecided"]
        assert busy["sessionKey"] == WORKER
        assert "rejected" in busy["summary"]


# Per-session overrides ------------------------------------------------------------------


async def test_a_session_override_wins_over_the_config_and_clears(
    enqueueing: Gateway, clock: VirtualClock
) -> None:
    gw = enqueueing
    patched = await gw.patch_session(WORKER, busy="REJECT")
    assert patched["entry"]["busy_policy"] == "reject"
    in_flight = await keep_busy(gw)
    refused = await send(gw, "next job")
    assert refused["status"] == "error"
    assert decisions(gw)[-1].rule == "session override (busy=reject)"

    cleared = await gw.patch_session(WORKER, busy=None)
    assert cleared["entry"]["busy_policy"] is None
    queued = await send(gw, "next job")
    assert queued["status"] == "accepted"
    last = decisions(gw)[-1]
    assert (last.decision, last.rule, last.in_flight_run_id) == (
        "enqueued",
        "session.agentToAgent.busy",
        in_flight,
    )


async def test_an_enqueue_override_lets_sends_queue_where_the_config_rejects(
    rejecting: Gateway,
) -> None:
    await rejecting.patch_session(WORKER, busy="enqueue")
    await keep_busy(rejecting)
    queued = await send(rejecting, "next job")
    assert queued["status"] == "accepted"
    assert decisions(rejecting)[-1].rule == "session override (busy=enqueue)"


async def test_a_busy_override_that_is_no_policy_is_refused(enqueueing: Gateway) -> None:
    assert (await enqueueing.patch_session(WORKER, busy="interrupt"))["entry"]["busy_policy"] == (
        "interrupt"
    )
    with pytest.raises(
        InvalidPatch, match=r"invalid busy \(use enqueue\|reject\|interrupt\|steer\)"
    ):
        await enqueueing.patch_session(WORKER, busy="queue")
    with pytest.raises(InvalidPatch, match="must be a string or null"):
        await enqueueing.patch_session(WORKER, busy=True)


def test_an_unknown_busy_policy_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"session\.agentToAgent\.busy: Input should be"):
        GatewayConfig.load({"session": {"agentToAgent": {"busy": "queue"}}})
    assert GatewayConfig().session.agentToAgent.busy == "enqueue"


# Over HTTP ------------------------------------------------------------------------------

OPERATOR_TOKEN = "operator-secret-busy"


async def test_a_busy_override_set_over_http_refuses_a_send_over_http(
    clock: VirtualClock,
) -> None:
    gw = await open_gateway("memory", clock)
    transport = httpx.ASGITransport(app=create_app(gw, OPERATOR_TOKEN))
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "X-Sessionwire-Session": "main"}
    try:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://gateway", headers=headers
        ) as http:
            patched = await http.post(
                "/v1/methods/sessions.patch", json={"key": "work", "busy": "reject"}
            )
            assert patched.status_code == 200
            assert patched.json()["entry"]["busy_policy"] == "reject"
            bad = await http.post("/v1/methods/sessions.patch", json={"key": "work", "busy": "x"})
            assert bad.status_code == 400
            assert bad.json()["error"]["message"] == (
                "invalid busy (use enqueue|reject|interrupt|steer)"
            )

            body = {"sessionKey": "work", "message": "a slow job", "timeoutSeconds": 0}
            first = await http.post("/v1/tools/sessions_send", json=body)
            assert first.json()["status"] == "accepted"
            await gw.wait_idle()
            body["message"] = "next job"
            refused = await http.post("/v1/tools/sessions_send", json=body)
            assert refused.status_code == 200
            assert refused.json()["status"] == "error"
            assert "is busy" in refused.json()["error"]
        [decided] = decisions(gw)
        assert (decided.decision, decided.in_flight_run_id) == ("rejected", first.json()["runId"])
    finally:
        await gw.close()


async def test_busy_decisions_and_overrides_rebuild_to_the_live_read_models(
    rejecting: Gateway, clock: VirtualClock
) -> None:
    gw = rejecting
    await keep_busy(gw)
    assert (await send(gw, "refused"))["status"] == "error"
    await gw.patch_session(WORKER, busy="enqueue")
    assert (await send(gw, "queued"))["status"] == "accepted"
    await clock.advance(61)
    await gw.wait_idle()

    live = store_of(gw).read_model_snapshot()
    store_of(gw).rebuild_read_models()
    assert store_of(gw).read_model_snapshot() == live
    assert [d.decision for d in decisions(gw)] == ["rejected", "enqueued"]
