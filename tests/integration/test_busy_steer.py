"""The busy policy ``steer`` (issue 25, ADR 0022 amended): a ``sessions_send`` into a
session whose run is in flight is injected into that run (its ``RunSteered``, the message
in the session with the sender's provenance) and answered ``delivery.status: "steered"``
with the run it joined — read off the recorded busy decision. On every store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import httpx
import pytest
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.gateway import GatewayService
from sessionwire.application.tools import sessions_send as send_tool
from sessionwire.domain.busy_decision import BusyDecision
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.session import InvalidPatch
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"
WORKER = "agent:main:work"


class Worker:
    """A primary whose message says "slow" works 60 s on the gateway clock, then answers
    with every steer it finds in its session (the message it was started with aside)."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None
        self.self_sends: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP" if request.step == "announce" else "REPLY_SKIP")
        if request.message == "talk to yourself":
            assert self.gateway is not None
            params = {"sessionKey": request.session_key, "message": "note", "timeoutSeconds": 0}
            self.self_sends.append(
                await self.gateway.call_tool(request.session_key, "sessions_send", params)
            )
        if "slow" not in request.message:
            return RunReply(text=f"done: {request.message}")
        await request.clock.sleep(60)
        lines = await request.transcript(10)
        steers = [
            block["text"]
            for line in lines
            if line["role"] == "user" and line.get("provenance", {}).get("kind") == "a2a"
            for block in line["content"]
            if block["text"] != request.message
        ]
        return RunReply(text="done slowly; steered: " + " | ".join(steers))


def steering_config(visibility: str = "tree") -> GatewayConfig:
    return GatewayConfig.load(
        {
            "session": {"agentToAgent": {"maxPingPongTurns": 0, "busy": "steer"}},
            "tools": {"sessions": {"visibility": visibility}},
        }
    )


@pytest.fixture
def agent() -> Worker:
    return Worker()


@pytest.fixture
async def steering(store_url: str, clock: VirtualClock, agent: Worker) -> AsyncIterator[Gateway]:
    gw = await Gateway.open(config=steering_config(), store=store_url, clock=clock, runtime=agent)
    agent.gateway = gw
    await gw.record_message("main", role="user", content="hi")
    await gw.record_message(WORKER, role="user", content="(opened)")
    yield gw
    await gw.close()


async def send(gw: Gateway, message: str, timeout: float = 0) -> dict[str, Any]:
    params = {"sessionKey": WORKER, "message": message, "timeoutSeconds": timeout}
    return await gw.call_tool("main", "sessions_send", params)


async def keep_busy(gw: Gateway) -> str:
    slow = await send(gw, "a slow job")
    assert slow["delivery"] == {"status": "started", "mode": "announce"}
    await gw.wait_idle()
    assert status_of(gw, slow["runId"]) == "running"
    return str(slow["runId"])


def status_of(gw: Gateway, run_id: str) -> str:
    stored = store_of(gw).work(UUID(run_id))
    assert stored is not None
    return stored.to_aggregate(Run, RunState).state.status


def decisions(gw: Gateway) -> list[BusyDecision.BusyDecided]:
    return [e for _, e in store_of(gw).events() if isinstance(e, BusyDecision.BusyDecided)]


def reply_of(gw: Gateway, run_id: str) -> str:
    stored = store_of(gw).work(UUID(run_id))
    assert stored is not None
    state = stored.to_aggregate(Run, RunState).state
    assert state.status == "ok", state
    return state.reply or ""


def named(gw: Gateway, name: str) -> list[Any]:
    return [e for _, e in store_of(gw).events() if type(e).__name__ == name]


async def test_a_send_into_a_busy_session_joins_its_running_run(
    steering: Gateway, clock: VirtualClock
) -> None:
    gw = steering
    running = await keep_busy(gw)
    steered = await send(gw, "also check the logs")

    assert steered == {
        "runId": running,
        "status": "accepted",
        "sessionKey": WORKER,
        "delivery": {"status": "steered", "runId": running},
    }
    [decided] = decisions(gw)
    assert (decided.policy, decided.decision) == ("steer", "steered")
    assert (decided.in_flight_run_id, decided.steered_run_id) == (running, running)
    assert decided.run_id is None  # the send started no run of its own
    assert decided.rule == "session.agentToAgent.busy"
    [steer] = named(gw, "RunSteered")
    assert (str(steer.originator_id), steer.steered_by, steer.message) == (
        running,
        MAIN,
        "also check the logs",
    )
    # The message is in the session with the sender's provenance, as a subagents steer.
    history = await gw.call_tool("main", "sessions_history", {"sessionKey": WORKER})
    line = history["messages"][-1]
    assert line["content"][0]["text"] == "also check the logs"
    assert (line["provenance"]["kind"], line["provenance"]["sessionKey"]) == ("a2a", MAIN)
    # No run and no exchange for the steered send: one primary, one exchange in all.
    assert len(named(gw, "RunStarted")) == 1
    assert len([e for _, e in store_of(gw).events() if isinstance(e, Exchange.ExchangeOpened)]) == 1

    await clock.advance(61)
    await gw.wait_idle()
    assert reply_of(gw, running) == "done slowly; steered: also check the logs"
    summaries = [e.summary for e in (await gw.timeline(WORKER)).entries if e.kind == "busy"]
    assert summaries == [
        f"send from {MAIN} into busy {WORKER} steered (run {running} in flight; "
        f"session.agentToAgent.busy); joined run {running}"
    ]


async def test_a_waiting_steered_send_answers_with_the_joined_runs_reply(
    steering: Gateway, clock: VirtualClock
) -> None:
    gw = steering
    running = await keep_busy(gw)
    waiting = asyncio.create_task(send(gw, "mind the cache", timeout=120))
    await gw.wait_idle()
    assert not waiting.done()
    await clock.advance(61)
    answered = await waiting
    assert answered == {
        "runId": running,
        "status": "ok",
        "reply": "done slowly; steered: mind the cache",
        "sessionKey": WORKER,
        "delivery": {"status": "steered", "runId": running},
    }


async def test_a_steered_send_that_times_out_says_the_joined_run_goes_on(
    steering: Gateway, clock: VirtualClock
) -> None:
    gw = steering
    running = await keep_busy(gw)
    waiting = asyncio.create_task(send(gw, "hurry", timeout=10))
    await gw.wait_idle()
    await clock.advance(11)
    answered = await waiting
    assert answered["status"] == "timeout"
    assert answered["runId"] == running
    assert answered["error"] == (
        "no reply within 10s; the run the message joined goes on, and its reply is recorded "
        "when it finishes (read it with sessions_history)"
    )
    assert answered["delivery"] == {"status": "steered", "runId": running}


async def test_a_steer_whose_run_ended_meanwhile_is_queued_instead(
    steering: Gateway, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision read the run in flight; by the steer it had ended (here: the read is
    made stale on purpose). The send falls back to a queued run, recorded as enqueued."""
    gw = steering
    running = await keep_busy(gw)
    stored = store_of(gw).work(UUID(running))
    assert stored is not None
    stale = stored.to_aggregate(Run, RunState).state
    await clock.advance(61)
    await gw.wait_idle()
    assert status_of(gw, running) == "ok"

    real = send_tool._runs_in_flight
    reads: list[int] = []

    def first_read_stale(store: Any, session_key: str) -> list[RunState]:
        # On a reader thread, as the send's reads of the session's runs in flight are.
        reads.append(1)
        return [stale] if len(reads) == 1 else real(store, session_key)

    monkeypatch.setattr(send_tool, "_runs_in_flight", first_read_stale)
    sent = await send(gw, "too late to steer")
    assert sent["status"] == "accepted"
    assert sent["runId"] != running
    assert sent["delivery"] == {"status": "started", "mode": "announce"}
    [decided] = decisions(gw)
    assert (decided.policy, decided.decision) == ("steer", "enqueued")
    assert (decided.steered_run_id, decided.run_id, decided.runs_ahead) == (
        None,
        sent["runId"],
        0,
    )
    assert named(gw, "RunSteered") == []
    await gw.wait_idle()
    assert reply_of(gw, sent["runId"]) == "done: too late to steer"


async def test_a_steer_never_joins_the_senders_own_run(steering: Gateway, agent: Worker) -> None:
    gw = steering
    first = await send(gw, "talk to yourself")
    await gw.wait_idle()
    [noted] = agent.self_sends
    # Joining its own run would have it wait for itself: the note queues behind it.
    assert noted["delivery"] == {"status": "queued", "position": 1, "mode": "announce"}
    [decided] = decisions(gw)
    assert (decided.policy, decided.decision) == ("steer", "enqueued")
    assert decided.in_flight_run_id == first["runId"]
    assert named(gw, "RunSteered") == []


async def test_steer_is_a_per_session_override_too(store_url: str, clock: VirtualClock) -> None:
    agent = Worker()
    gw = await Gateway.open(
        config=GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 0}}}),
        store=store_url,
        clock=clock,
        runtime=agent,
    )
    try:
        await gw.record_message("main", role="user", content="hi")
        await gw.record_message(WORKER, role="user", content="(opened)")
        patched = await gw.patch_session(WORKER, busy="STEER")
        assert patched["entry"]["busy_policy"] == "steer"
        running = await keep_busy(gw)
        steered = await send(gw, "by override")
        assert steered["delivery"] == {"status": "steered", "runId": running}
        assert decisions(gw)[-1].rule == "session override (busy=steer)"
        with pytest.raises(
            InvalidPatch, match=r"invalid busy \(use enqueue\|reject\|interrupt\|steer\)"
        ):
            await gw.patch_session(WORKER, busy="inject")
    finally:
        await gw.close()


# Over HTTP (the send tool's result, unchanged routing) ------------------------------------

OPERATOR_TOKEN = "operator-secret-steer"


async def test_a_send_over_http_is_steered_into_the_busy_run(clock: VirtualClock) -> None:
    agent = Worker()
    gw = await Gateway.open(config=steering_config(), store="memory", clock=clock, runtime=agent)
    transport = httpx.ASGITransport(app=create_app(gw, OPERATOR_TOKEN))
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "X-Sessionwire-Session": "main"}
    try:
        await gw.record_message("main", role="user", content="hi")
        await gw.record_message(WORKER, role="user", content="(opened)")
        async with httpx.AsyncClient(
            transport=transport, base_url="http://gateway", headers=headers
        ) as http:
            body = {"sessionKey": "work", "message": "a slow job", "timeoutSeconds": 0}
            first = (await http.post("/v1/tools/sessions_send", json=body)).json()
            await gw.wait_idle()
            body["message"] = "and the tests"
            response = await http.post("/v1/tools/sessions_send", json=body)
        assert response.status_code == 200, response.text
        assert first["status"] == "accepted", first
        assert response.json()["delivery"] == {"status": "steered", "runId": first["runId"]}
        assert response.json()["runId"] == first["runId"]
        await clock.advance(61)
        await gw.wait_idle()
        assert reply_of(gw, first["runId"]) == "done slowly; steered: and the tests"
    finally:
        await gw.close()


class SendsThenWorks:
    """The worker's "slow" primary works 600 s; the asker's "go" primary sends into the
    worker, notes the answer, then works 300 s (so a stop finds both runs in flight).

    It sends through its request, not through the gateway: a reopened gateway resumes the
    asker's run inside ``Gateway.open``, before the test could hand it the gateway."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP" if request.step == "announce" else "REPLY_SKIP")
        if request.message == "go":
            assert request.call_tool is not None
            params = {"sessionKey": WORKER, "message": "steer me", "timeoutSeconds": 0}
            self.results.append(await request.call_tool("sessions_send", params))
            await request.clock.sleep(300)
        else:
            await request.clock.sleep(600)
        return RunReply(text=f"done: {request.message}")


async def open_with(store_url: str, clock: VirtualClock, agent: SendsThenWorks) -> Gateway:
    # The asker (not main) sends into a session of its agent outside its tree.
    config = steering_config("agent")
    return await Gateway.open(config=config, store=store_url, clock=clock, runtime=agent)


async def test_a_run_dispatched_again_does_not_steer_its_send_twice(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store_url == "memory":
        pytest.skip("a memory store cannot be reopened")
    asker = "agent:main:asker"
    first_agents = SendsThenWorks()
    first = await open_with(store_url, clock, first_agents)
    try:
        for key in ("main", WORKER, asker):
            await first.record_message(key, role="user", content="hi")
        await send(first, "slow work")
        await first.wait_idle()
        params = {"sessionKey": asker, "message": "go", "timeoutSeconds": 0}
        await first.call_tool("main", "sessions_send", params)
        await first.wait_idle()
        await clock.advance(1)  # the asker steered the worker and works on; the gateway stops
        [steered] = first_agents.results
        assert steered.get("delivery", {}).get("status") == "steered", steered
    finally:
        await first.close()

    # The resumed runs reach their agents before the reopen returns: the order a loaded
    # machine's store threads could give (the test once failed that way), pinned here.
    resume = GatewayService.resume

    async def resume_and_settle(service: GatewayService) -> None:
        await resume(service)
        await service.in_flight.wait_idle()

    monkeypatch.setattr(GatewayService, "resume", resume_and_settle)
    agents = SendsThenWorks()
    second = await open_with(store_url, clock, agents)
    try:
        await clock.advance(1)
        await second.wait_idle()
        # The asker's run ran again and made the same send: answered from the record.
        assert agents.results == [steered]
        assert len(named(second, "RunSteered")) == 1
        assert [d.decision for d in decisions(second)] == ["steered"]
    finally:
        await second.close()
