"""Orchestration: which run goes when, and what happens when a run goes wrong.

- Runs in one session run one at a time, in arrival order (one actor per session).
- Runs in different sessions run concurrently, at most ``agents.defaults.maxConcurrent``
  runtime calls at once (default 4), so a slow exchange between A and B never holds up
  C → D (contract §5 decision 6). OpenClaw queues every ``sessions_send`` run on one
  gateway-wide ``nested`` lane instead (openclaw-behaviour.md §12).
- A ``sessions_send`` whose wait times out still gets its ping-pong and announce when the
  target run finishes, and all of it is recorded (decision 5; OpenClaw drops them, §6.5).
- A runtime that raises, hangs past ``agents.defaults.timeoutSeconds`` or returns
  garbage ends the run with a recorded RunFailed or RunTimedOut; the session stays usable.
- Bad ``sessions_send`` input is an error envelope that writes nothing.
- ``ScriptedRuntime`` (contract §3): validation, files, substitution, first match wins.

Every gateway test runs on the memory, SQLite and PostgreSQL stores. Nothing sleeps in
real time: a VirtualClock drives every delay (``await clock.advance(seconds)``), and a
tool call that waits on the clock is started as a task.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import yaml
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.domain.exchange import exchange_id_for
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, ScriptError, VirtualClock

MAIN = "agent:main:main"
T = "agent:main:discord:group:t"
OPENER = "(session opened)"
ANNOUNCE_STEP = "Agent-to-agent announce step."
MAX_SEND_MESSAGE_CHARS = 1_000_000

Result = dict[str, Any]


# Gateways, calls and what they recorded -------------------------------------------------


async def no_transcript(limit: int) -> list[dict[str, Any]]:
    return []


@asynccontextmanager
async def open_gateway(
    store_url: str,
    clock: VirtualClock,
    runtime: AgentRuntime,
    *,
    config: dict[str, Any] | None = None,
    delivery: CapturingDelivery | None = None,
    sessions: tuple[str, ...] = (MAIN, T),
) -> AsyncIterator[Gateway]:
    """A gateway whose ``sessions`` exist (one opening message each); closed afterwards."""
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config or {})),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=delivery or CapturingDelivery(),
    )
    try:
        for key in sessions:
            await gw.record_message(key, role="user", content=OPENER)
        yield gw
    finally:
        await gw.close()


def send(
    gw: Gateway, target: str, message: str, timeout: Any, *, requester: str = MAIN
) -> Coroutine[Any, Any, Result]:
    params = {"sessionKey": target, "message": message, "timeoutSeconds": timeout}
    return gw.call_tool(requester, "sessions_send", params)


def start(call: Coroutine[Any, Any, Result]) -> asyncio.Task[Result]:
    """A tool call that may wait on the clock, running while the test moves time."""
    return asyncio.create_task(call)


async def settle(gw: Gateway) -> None:
    """Let every piece of work that does not wait on the clock finish; time stands still."""
    clock = internals(gw).clock
    assert isinstance(clock, VirtualClock)
    await clock.advance(0)
    await gw.wait_idle()


async def answer_now(gw: Gateway, call: Coroutine[Any, Any, Result]) -> Result:
    """The result of a tool call that must answer without the clock moving."""
    task = start(call)
    await settle(gw)
    assert task.done(), "the call is still waiting on the clock"
    return task.result()


async def cancel(*tasks: asyncio.Task[Result]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def since(start_at: datetime, clock: VirtualClock) -> float:
    return (clock.now() - start_at).total_seconds()


def events(gw: Gateway, *names: str) -> list[Any]:
    """Recorded events of the given types, in log order."""
    return [event for _, event in store_of(gw).events() if type(event).__name__ in names]


def history_of(gw: Gateway, aggregate_id: str | UUID) -> list[str]:
    """The names of one run's (or exchange's) events, in order."""
    wanted = UUID(str(aggregate_id))
    return [
        type(event).__name__ for _, event in store_of(gw).events() if event.originator_id == wanted
    ]


def event_count(gw: Gateway) -> int:
    return sum(1 for _ in store_of(gw).events())


async def transcript(gw: Gateway, key: str) -> list[tuple[str, str]]:
    """(role, text) of each message after the session's opening one."""
    result = await gw.call_tool(MAIN, "sessions_history", {"sessionKey": key})
    said = [
        (m["role"], "".join(block.get("text", "") for block in m["content"]))
        for m in result["messages"]
    ]
    return [line for line in said if line[1] != OPENER]


# Agents ---------------------------------------------------------------------------------


class QuietAgent(AgentRuntime):
    """Answers primary runs with ``answer``; skips the ping-pong and the announce."""

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "reply_back":
            return RunReply(text="REPLY_SKIP")
        if request.step == "announce":
            return RunReply(text="ANNOUNCE_SKIP")
        return await self.answer(request)

    async def answer(self, request: RunRequest) -> RunReply:
        return RunReply(text=f"done: {request.message}")


QUIET_SCRIPT_STEPS = [
    {"step": "reply_back", "reply": "REPLY_SKIP"},
    {"step": "announce", "reply": "ANNOUNCE_SKIP"},
]


# 1. One session: one run at a time, in arrival order ------------------------------------


class TimedAgent(QuietAgent):
    """Works ``seconds[message]`` on the gateway clock; notes every run's span."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.busy: set[str] = set()
        self.overlaps: list[str] = []
        self.spans: list[tuple[str, str, datetime, datetime]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.session_key in self.busy:
            self.overlaps.append(f"{request.step} {request.message!r} in {request.session_key}")
        self.busy.add(request.session_key)
        began = request.clock.now()
        try:
            return await super().run(request)
        finally:
            self.busy.discard(request.session_key)
            self.spans.append((request.session_key, request.message, began, request.clock.now()))

    async def answer(self, request: RunRequest) -> RunReply:
        await request.clock.sleep(self.seconds[request.message])
        return RunReply(text=f"done: {request.message}")


async def test_runs_in_one_session_never_overlap_and_keep_arrival_order(
    store_url: str, clock: VirtualClock
) -> None:
    work = {"task 1": 30, "task 2": 5, "task 3": 20, "task 4": 1, "task 5": 10}
    agent = TimedAgent(work)
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
    t0 = clock.now()
    async with open_gateway(store_url, clock, agent, config=config) as gw:
        # Five fire-and-forget sends into T, the short tasks after the long ones.
        run_ids = []
        for message in work:
            result = await send(gw, T, message, 0)
            assert result["status"] == "accepted"
            run_ids.append(result["runId"])

        await clock.advance(sum(work.values()))
        await gw.wait_idle()

        assert agent.overlaps == []
        spans = [
            (message, (began - t0).total_seconds(), (ended - t0).total_seconds())
            for _, message, began, ended in agent.spans
            if message in work
        ]
        # Never overtaken, never two at once: each task starts when the previous one ends.
        assert spans == [
            ("task 1", 0, 30),
            ("task 2", 30, 35),
            ("task 3", 35, 55),
            ("task 4", 55, 56),
            ("task 5", 56, 66),
        ]
        dispatched = [
            str(event.originator_id)
            for event in events(gw, "RunDispatched")
            if str(event.originator_id) in run_ids
        ]
        assert dispatched == run_ids
        assert [str(e.originator_id) for e in events(gw, "RunCompleted")][:5] == run_ids

        # The transcript pairs each task with its answer, in send order; the five
        # announce steps (queued behind the tasks) come after.
        pairs = [line for m in work for line in (("user", m), ("assistant", f"done: {m}"))]
        announces = [("user", ANNOUNCE_STEP), ("assistant", "ANNOUNCE_SKIP")] * 5
        assert await transcript(gw, T) == pairs + announces


# 2. Different sessions run concurrently --------------------------------------------------


async def test_two_sessions_work_at_the_same_time(store_url: str, clock: VirtualClock) -> None:
    x, y = "agent:main:work:x", "agent:main:work:y"
    agent = ScriptedRuntime.from_dict(
        {
            "rules": [
                {"step": "primary", "delaySeconds": 10, "reply": "done in {session}"},
                *QUIET_SCRIPT_STEPS,
            ]
        }
    )
    t0 = clock.now()
    async with open_gateway(store_url, clock, agent, sessions=(MAIN, x, y)) as gw:
        to_x = start(send(gw, x, "build it", 60))
        to_y = start(send(gw, y, "test it", 60))

        await clock.advance(9.5)
        assert not to_x.done()
        assert not to_y.done()

        await clock.advance(0.5)
        assert to_x.done()
        assert to_y.done()
        # 10 s for both, not 10 + 10.
        assert since(t0, clock) == 10
        assert to_x.result()["status"] == "ok"
        assert to_x.result()["reply"] == f"done in {x}"
        assert to_y.result()["reply"] == f"done in {y}"


# 3. At most maxConcurrent runtime calls at once ------------------------------------------


class CountingAgent(QuietAgent):
    """Works 10 s on each primary run; counts the runtime calls in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.finished: list[datetime] = []

    async def run(self, request: RunRequest) -> RunReply:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super().run(request)
        finally:
            self.in_flight -= 1

    async def answer(self, request: RunRequest) -> RunReply:
        await request.clock.sleep(10)
        self.finished.append(request.clock.now())
        return RunReply(text="done")


async def test_max_concurrent_bounds_the_runtime_calls_in_flight(
    store_url: str, clock: VirtualClock
) -> None:
    targets = tuple(f"agent:main:job:{n}" for n in range(1, 6))
    agent = CountingAgent()
    config = {"agents": {"defaults": {"maxConcurrent": 2}}}
    t0 = clock.now()
    async with open_gateway(
        store_url, clock, agent, config=config, sessions=(MAIN, *targets)
    ) as gw:
        for target in targets:
            assert (await send(gw, target, "go", 0))["status"] == "accepted"

        done_after = []
        for _ in range(3):
            await clock.advance(10)
            done_after.append(len(agent.finished))
        await gw.wait_idle()

        # Five 10 s runs, two at a time: 2 done after 10 s, 4 after 20 s, all after 30 s.
        assert done_after == [2, 4, 5]
        assert [(at - t0).total_seconds() for at in agent.finished] == [10, 10, 20, 20, 30]
        assert agent.peak == 2
        assert agent.in_flight == 0


async def test_more_busy_sessions_than_database_connections_all_complete(
    store_url: str, clock: VirtualClock
) -> None:
    # 20 sessions with a run each: more than PostgreSQL's pool of 15 connections. Only
    # the runs holding one of the 4 lane slots may hold a session lock (a connection).
    targets = tuple(f"agent:main:job:{n}" for n in range(1, 21))
    agent = CountingAgent()
    t0 = clock.now()
    async with open_gateway(store_url, clock, agent, sessions=(MAIN, *targets)) as gw:
        for target in targets:
            assert (await send(gw, target, "go", 0))["status"] == "accepted"
        for _ in range(5):  # 20 runs of 10 s, 4 at a time
            await clock.advance(10)
        await gw.wait_idle()

        assert len(agent.finished) == 20
        assert max(agent.finished) - t0 == timedelta(seconds=50)
        assert agent.peak == 4
        assert len(events(gw, "RunCompleted")) == 3 * 20  # primary, ping-pong turn, announce
        assert events(gw, "RunFailed", "RunTimedOut") == []


# 4. A slow exchange never delays an unrelated one ----------------------------------------


async def test_a_slow_exchange_between_a_and_b_never_delays_c_to_d(
    store_url: str, clock: VirtualClock
) -> None:
    a, b, c, d = (f"agent:main:discord:group:{name}" for name in "abcd")
    agent = ScriptedRuntime.from_dict(
        {
            "rules": [
                # A and B are slow thinkers and keep the ping-pong going for all 5 turns.
                {"session": "*:group:b", "step": "primary", "delaySeconds": 100, "reply": "hm"},
                {
                    "session": "*:group:[ab]",
                    "step": "reply_back",
                    "delaySeconds": 100,
                    "reply": "turn {turn}: still talking",
                },
                # D answers at once; C does not prolong the exchange.
                {"session": d, "step": "primary", "reply": "pong"},
                *QUIET_SCRIPT_STEPS,
            ]
        }
    )
    t0 = clock.now()
    async with open_gateway(store_url, clock, agent, sessions=(a, b, c, d)) as gw:
        slow = await send(gw, b, "let's talk", 0, requester=a)
        assert slow["status"] == "accepted"

        # B is busy with its first answer ...
        await clock.advance(50)
        before = clock.now()
        result = await answer_now(gw, send(gw, d, "ping", 30, requester=c))
        assert result["status"] == "ok"
        assert result["reply"] == "pong"
        assert clock.now() == before

        # ... and later A is busy with its first ping-pong turn.
        await clock.advance(100)
        slow_exchange = exchange_id_for(UUID(slow["runId"]))
        assert history_of(gw, slow_exchange)[-1] == "RoundOneReplied"
        result = await answer_now(gw, send(gw, d, "ping again", 30, requester=c))
        assert result["status"] == "ok"
        assert result["reply"] == "pong"
        assert since(t0, clock) == 150

        # The slow exchange goes on undisturbed: B's answer and 5 turns of 100 s each.
        await clock.advance(450)
        await gw.wait_idle()
        slow_history = history_of(gw, slow_exchange)
        assert slow_history.count("PingPongTurn") == 5
        assert slow_history[-1] == "ExchangeClosed"
        assert await transcript(gw, d) == [
            ("user", "ping"),
            ("assistant", "pong"),
            ("user", ANNOUNCE_STEP),
            ("assistant", "ANNOUNCE_SKIP"),
            ("user", "ping again"),
            ("assistant", "pong"),
            ("user", ANNOUNCE_STEP),
            ("assistant", "ANNOUNCE_SKIP"),
        ]


# 5. A wait that times out still gets its ping-pong and announce (decision 5) -------------


@pytest.mark.parametrize(
    ("wait_seconds", "agent_seconds", "status"),
    [(5, 20, "timeout"), (0, 120, "accepted")],
    ids=["wait-times-out", "fire-and-forget-longer-than-openclaw-waits"],
)
async def test_a_late_reply_still_gets_its_ping_pong_and_announce(
    store_url: str, clock: VirtualClock, wait_seconds: int, agent_seconds: int, status: str
) -> None:
    agent = ScriptedRuntime.from_dict(
        {
            "rules": [
                {
                    "session": T,
                    "step": "primary",
                    "delaySeconds": agent_seconds,
                    "reply": "late answer to {message}",
                },
                {"session": MAIN, "step": "reply_back", "reply": "thanks, noted"},
                {"step": "reply_back", "reply": "REPLY_SKIP"},
                {"step": "announce", "reply": "T answered late, but it answered."},
            ]
        }
    )
    delivery = CapturingDelivery()
    async with open_gateway(store_url, clock, agent, delivery=delivery) as gw:
        call = start(send(gw, T, "what is 6 x 7?", wait_seconds))
        await clock.advance(wait_seconds)
        assert call.done()
        result = call.result()
        assert result["status"] == status
        assert result["sessionKey"] == T
        assert result["delivery"] == {"status": "started", "mode": "announce"}
        run_id = result["runId"]
        assert UUID(run_id)
        assert history_of(gw, run_id) == ["RunStarted", "RunDispatched"]  # still working

        await clock.advance(agent_seconds - wait_seconds)
        await gw.wait_idle()

        assert history_of(gw, run_id)[-1] == "RunCompleted"
        assert history_of(gw, exchange_id_for(UUID(run_id))) == [
            "ExchangeOpened",
            "RoundOneReplied",
            "PingPongTurn",  # the requester answers T's reply
            "ReplySkipped",  # T says REPLY_SKIP
            "AnnounceRequested",
            "AnnounceReplied",
            "AnnounceDelivered",
            "ExchangeClosed",
        ]
        assert [(s["channel"], s["to"], s["message"], s["sessionKey"]) for s in delivery.sent] == [
            ("discord", "channel:t", "T answered late, but it answered.", T)
        ]
        assert await transcript(gw, T) == [
            ("user", "what is 6 x 7?"),
            ("assistant", "late answer to what is 6 x 7?"),
            ("user", "thanks, noted"),
            ("assistant", "REPLY_SKIP"),
            ("user", ANNOUNCE_STEP),
            ("assistant", "T answered late, but it answered."),
        ]
        assert await transcript(gw, MAIN) == [
            ("user", "late answer to what is 6 x 7?"),
            ("assistant", "thanks, noted"),
        ]


# 6. Runtime failures end the run with a recorded outcome ---------------------------------


class FlakyAgent(QuietAgent):
    async def answer(self, request: RunRequest) -> RunReply:
        if "explode" in request.message:
            raise RuntimeError("model overloaded")
        return RunReply(text=f"fine: {request.message}")


async def test_a_runtime_that_raises_fails_the_run_and_the_session_carries_on(
    store_url: str, clock: VirtualClock
) -> None:
    async with open_gateway(store_url, clock, FlakyAgent()) as gw:
        result = await answer_now(gw, send(gw, T, "explode now", 30))
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "model overloaded",
            "sessionKey": T,
        }
        assert history_of(gw, result["runId"]) == ["RunStarted", "RunDispatched", "RunFailed"]
        assert events(gw, "RunFailed")[0].error == "model overloaded"
        # No reply, so no ping-pong and no announce; the exchange says why.
        assert history_of(gw, exchange_id_for(UUID(result["runId"])))[-1] == "ExchangeClosed"
        reason = "the target's run failed (error: model overloaded)"
        assert events(gw, "ExchangeClosed")[0].reason == reason

        later = await answer_now(gw, send(gw, T, "try again", 30))
        assert later["status"] == "ok"
        assert later["reply"] == "fine: try again"
        assert await transcript(gw, T) == [
            ("user", "explode now"),  # and no assistant message for it
            ("user", "try again"),
            ("assistant", "fine: try again"),
            ("user", ANNOUNCE_STEP),
            ("assistant", "ANNOUNCE_SKIP"),
        ]


async def test_a_scripted_fail_is_the_runs_error(store_url: str, clock: VirtualClock) -> None:
    agent = ScriptedRuntime.from_dict(
        {"rules": [{"step": "primary", "delaySeconds": 3, "fail": "tool crashed"}]}
    )
    async with open_gateway(store_url, clock, agent) as gw:
        call = start(send(gw, T, "use the tool", 30))
        await clock.advance(3)
        assert call.done()
        result = call.result()
        assert result["status"] == "error"
        assert result["error"] == "tool crashed"
        assert [e.error for e in events(gw, "RunFailed")] == ["tool crashed"]
        assert await transcript(gw, T) == [("user", "use the tool")]


class HangingAgent(QuietAgent):
    """Hangs on "hang" (an hour on the gateway clock); answers anything else at once."""

    def __init__(self) -> None:
        self.cancelled = False

    async def answer(self, request: RunRequest) -> RunReply:
        if request.message == "hang":
            try:
                await request.clock.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        return RunReply(text="quick answer")


async def test_a_run_past_the_run_timeout_is_timed_out_and_cancelled(
    store_url: str, clock: VirtualClock
) -> None:
    agent = HangingAgent()
    config = {"agents": {"defaults": {"timeoutSeconds": 30}}}
    async with open_gateway(store_url, clock, agent, config=config) as gw:
        call = start(send(gw, T, "hang", 60))
        await clock.advance(29)
        assert not call.done()

        await clock.advance(1)
        assert call.done()
        result = call.result()
        assert result["status"] == "error"
        assert "timed out" in result["error"]
        assert history_of(gw, result["runId"]) == ["RunStarted", "RunDispatched", "RunTimedOut"]
        assert events(gw, "RunTimedOut")[0].timeout_seconds == 30
        assert agent.cancelled

        later = await answer_now(gw, send(gw, T, "still there?", 60))
        assert later["status"] == "ok"
        assert later["reply"] == "quick answer"
        assert await transcript(gw, T) == [
            ("user", "hang"),  # and no assistant message for it
            ("user", "still there?"),
            ("assistant", "quick answer"),
            ("user", ANNOUNCE_STEP),
            ("assistant", "ANNOUNCE_SKIP"),
        ]


class GarbageAgent(QuietAgent):
    def __init__(self, garbage: object) -> None:
        self.garbage = garbage

    async def answer(self, request: RunRequest) -> Any:
        return self.garbage


@pytest.mark.parametrize(
    "garbage",
    [
        {"text": "hi"},
        RunReply(text=123),  # type: ignore[arg-type]
        "a bare string",
        None,
    ],
    ids=["dict", "reply-text-int", "str", "none"],
)
async def test_a_runtime_returning_garbage_fails_the_run(
    store_url: str, clock: VirtualClock, garbage: object
) -> None:
    async with open_gateway(store_url, clock, GarbageAgent(garbage)) as gw:
        result = await answer_now(gw, send(gw, T, "hello", 30))
        assert result["status"] == "error"
        assert result["error"].startswith("the agent runtime returned ")
        assert history_of(gw, result["runId"])[-1] == "RunFailed"
        assert await transcript(gw, T) == [("user", "hello")]


class SilentAgent(QuietAgent):
    async def answer(self, request: RunRequest) -> RunReply:
        return RunReply(text=None)


async def test_a_reply_without_text_is_no_reply(store_url: str, clock: VirtualClock) -> None:
    # Decision 37: OpenClaw's terminal no_reply, not ok without a reply.
    async with open_gateway(store_url, clock, SilentAgent()) as gw:
        result = await answer_now(gw, send(gw, T, "hello", 30))
        assert result["status"] == "no_reply"
        assert "reply" not in result
        assert history_of(gw, result["runId"])[-1] == "RunCompleted"
        assert events(gw, "RunCompleted")[0].reply is None
        assert await transcript(gw, T) == [("user", "hello")]


class RaisesBeforeAwaiting(AgentRuntime):
    """A runtime whose ``run`` is a plain function: it raises as soon as it is called."""

    def run(self, request: RunRequest) -> Any:  # type: ignore[override]
        raise RuntimeError("runtime not ready")


class AnswersWithoutAwaiting(AgentRuntime):
    """A runtime whose ``run`` is a plain function returning a reply, not a coroutine."""

    def run(self, request: RunRequest) -> Any:  # type: ignore[override]
        return RunReply(text="instant")


@pytest.mark.parametrize(
    ("runtime", "status", "last_event"),
    [
        (RaisesBeforeAwaiting(), "error", "RunFailed"),
        # Not the port's shape, but a reply is a reply: taken, not refused.
        (AnswersWithoutAwaiting(), "ok", "RunCompleted"),
    ],
    ids=["raises", "returns-reply"],
)
async def test_a_runtime_whose_run_is_not_async_still_ends_the_run(
    store_url: str, clock: VirtualClock, runtime: AgentRuntime, status: str, last_event: str
) -> None:
    async with open_gateway(store_url, clock, runtime) as gw:
        call = start(send(gw, T, "hello", 30))
        try:
            await settle(gw)
            assert call.done(), "sessions_send still waits for a run that will never end"
            assert call.result()["status"] == status
            assert history_of(gw, call.result()["runId"])[-1] == last_event
        finally:
            await cancel(call)


class SlowToCancelAgent(QuietAgent):
    """Hangs; once cancelled it takes 1000 s (gateway clock) to wind down."""

    async def answer(self, request: RunRequest) -> RunReply:
        try:
            await request.clock.sleep(3600)
        except asyncio.CancelledError:
            await request.clock.sleep(1000)
            raise
        return RunReply(text="never")


async def test_a_runtime_slow_to_cancel_is_timed_out_on_time(
    store_url: str, clock: VirtualClock
) -> None:
    config = {"agents": {"defaults": {"timeoutSeconds": 30}}}
    async with open_gateway(store_url, clock, SlowToCancelAgent(), config=config) as gw:
        call = start(send(gw, T, "hang", 60))
        try:
            await clock.advance(30)
            await settle(gw)
            assert call.done(), "sessions_send is still waiting at 30 s"
            assert call.result()["status"] == "error"
            assert history_of(gw, call.result()["runId"])[-1] == "RunTimedOut"
        finally:
            await clock.advance(1000)
            await cancel(call)


class NestingAgent(QuietAgent):
    """MAIN's agent asks T (sessions_send, wait mode) before it answers; T answers at once."""

    def __init__(self) -> None:
        self.gw: Gateway | None = None

    async def answer(self, request: RunRequest) -> RunReply:
        if request.session_key != MAIN:
            return RunReply(text="inner answer")
        assert self.gw is not None
        asked = await send(self.gw, T, "inner question", 30)
        return RunReply(text=f"T said {asked['status']}: {asked.get('reply')}")


@pytest.mark.parametrize(
    "max_concurrent",
    [
        4,
        1,
    ],
    ids=["default-4", "max-1"],
)
async def test_an_agent_may_send_and_wait_from_inside_its_run(
    store_url: str, clock: VirtualClock, max_concurrent: int
) -> None:
    ops = "agent:main:discord:group:ops"
    agent = NestingAgent()
    config = {"agents": {"defaults": {"maxConcurrent": max_concurrent}}}
    async with open_gateway(store_url, clock, agent, config=config, sessions=(MAIN, T, ops)) as gw:
        agent.gw = gw
        call = start(send(gw, MAIN, "ask T for me", 60, requester=ops))
        try:
            await settle(gw)
            assert call.done(), "the outer send is still waiting on the clock"
            assert call.result()["reply"] == "T said ok: inner answer"
        finally:
            await clock.advance(60)
            await cancel(call)


# 7. Bad sessions_send input -------------------------------------------------------------


@pytest.mark.parametrize("timeout", [-5, -0.5, 0.9, -math.inf], ids=str)
async def test_a_timeout_under_one_second_means_fire_and_forget(
    store_url: str, clock: VirtualClock, timeout: float
) -> None:
    # max(0, floor(x)): anything below 1 s does not wait.
    async with open_gateway(store_url, clock, QuietAgent()) as gw:
        result = await answer_now(gw, send(gw, T, "hello", timeout))
        assert result["status"] == "accepted"
        assert result["sessionKey"] == T


@pytest.mark.parametrize("timeout", [1e12, 10**30, math.inf], ids=["1e12", "10**30", "inf"])
async def test_a_huge_timeout_waits_at_most_a_day(
    store_url: str, clock: VirtualClock, timeout: float
) -> None:
    agent = ScriptedRuntime.from_dict(
        {
            "rules": [
                {"step": "primary", "match": "quick", "reply": "quick answer"},
                {"step": "primary", "delaySeconds": 100_000, "reply": "too late"},
                *QUIET_SCRIPT_STEPS,
            ]
        }
    )
    config = {"agents": {"defaults": {"timeoutSeconds": 200_000}}}
    async with open_gateway(store_url, clock, agent, config=config) as gw:
        quick = await answer_now(gw, send(gw, T, "quick", timeout))
        assert quick["status"] == "ok"
        assert quick["reply"] == "quick answer"

        call = start(send(gw, T, "take your time", timeout))
        await clock.advance(86_399)
        assert not call.done()
        await clock.advance(1)
        assert call.done()
        assert call.result()["status"] == "timeout"
        assert "86400s" in call.result()["error"]
        await clock.advance(100_000 - 86_400)


TOO_LONG = "x" * 5_000_000


@pytest.mark.parametrize(
    ("params", "error"),
    [
        (
            {"sessionKey": T, "message": "hi", "timeoutSeconds": math.nan},
            "timeoutSeconds must be a number, not NaN",
        ),
        (
            {"sessionKey": T, "message": "hi", "timeoutSeconds": "10"},
            "timeoutSeconds must be a number",
        ),
        (
            {"sessionKey": T, "message": "hi", "timeoutSeconds": True},
            "timeoutSeconds must be a number",
        ),
        (
            {"sessionKey": T, "message": TOO_LONG},
            "message is too long (5000000 characters, max 1000000)",
        ),
        ({"sessionKey": T, "message": "   "}, "message required"),
        ({"sessionKey": T}, "message required"),
        (
            {"sessionKey": "agent:main:discord:group:nobody", "message": "hi"},
            "Session not found: agent:main:discord:group:nobody",
        ),
        (
            {"sessionKey": "nobody", "message": "hi"},
            "Session not found: nobody (use the full sessionKey from sessions_list)",
        ),
        (["not", "an", "object"], "parameters must be a JSON object"),
    ],
    ids=[
        "timeout-nan",
        "timeout-str",
        "timeout-bool",
        "message-5MB",
        "message-blank",
        "message-missing",
        "unknown-key",
        "unknown-name",
        "not-an-object",
    ],
)
async def test_bad_send_input_is_an_error_that_writes_nothing(
    store_url: str, clock: VirtualClock, params: Any, error: str
) -> None:
    agent = ScriptedRuntime.from_dict({"rules": [{"reply": "should never run"}]})
    async with open_gateway(store_url, clock, agent) as gw:
        before = (store_of(gw).read_model_snapshot(), event_count(gw))

        result = await answer_now(gw, gw.call_tool(MAIN, "sessions_send", params))

        assert result["status"] == "error"
        assert result["tool"] == "sessions_send"
        assert result["error"] == error
        assert (store_of(gw).read_model_snapshot(), event_count(gw)) == before
        assert agent.calls == []


async def test_a_message_of_exactly_the_limit_is_sent(store_url: str, clock: VirtualClock) -> None:
    message = "x" * MAX_SEND_MESSAGE_CHARS
    agent = ScriptedRuntime.from_dict({"rules": [{"step": "primary", "reply": "got it"}]})
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
    async with open_gateway(store_url, clock, agent, config=config) as gw:
        result = await answer_now(gw, send(gw, T, message, 30))
        assert result["status"] == "ok"
        assert result["reply"] == "got it"
        assert len(agent.calls[0].message) == MAX_SEND_MESSAGE_CHARS


# 8. ScriptedRuntime --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "named"),
    [
        ({"rules": [{"step": "reply"}]}, ["rules[0].step", "unknown step 'reply'"]),
        ({"rules": [{"match": "(unclosed"}]}, ["rules[0].match", "not a valid regular expression"]),
        (
            {"rules": [{"reply": "ok"}, {"delaySeconds": -1}]},
            ["rules[1].delaySeconds", "greater than or equal to 0"],
        ),
        ({"rules": [{"delaySeconds": math.nan}]}, ["rules[0].delaySeconds", "finite"]),
        ({"rules": [{"replay": "typo"}]}, ["rules[0].replay", "Extra inputs"]),
        ({"rules": [{"fail": 3}]}, ["rules[0].fail", "string"]),
        ({"rules": "reply pong"}, ["rules", "list"]),
    ],
    ids=[
        "unknown-step",
        "bad-regex",
        "negative-delay",
        "nan-delay",
        "unknown-field",
        "fail-int",
        "rules-str",
    ],
)
def test_an_invalid_script_is_a_script_error_naming_the_rule_field(
    script: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(ScriptError) as raised:
        ScriptedRuntime.from_dict(script)
    message = str(raised.value)
    assert message.startswith("invalid script: ")
    for text in named:
        assert text in message


SCRIPT: dict[str, Any] = {
    "rules": [
        {"step": "primary", "match": "(?i)^ping", "reply": "pong to {session}"},
        {"step": "primary", "match": "boom", "fail": "tool crashed"},
        {"step": "reply_back", "reply": "turn {turn}: {message}"},
        {"agent": "main", "step": "announce", "reply": "ANNOUNCE_SKIP", "usage": {"input": 10}},
    ]
}
SCRIPT_YAML = """\
rules:
  - step: primary
    match: "(?i)^ping"
    reply: "pong to {session}"
  - step: primary
    match: boom
    fail: tool crashed
  - step: reply_back
    reply: "turn {turn}: {message}"
  - agent: main
    step: announce
    reply: ANNOUNCE_SKIP
    usage: {input: 10}
"""


async def outcomes(runtime: ScriptedRuntime) -> list[tuple[Any, ...]]:
    """What the runtime does with a few runs: its reply and usage, or its error."""
    cases = [
        ("primary", "PING?", None),
        ("primary", "boom", None),
        ("primary", "hello", None),
        ("reply_back", "pong to you", 3),
        ("announce", ANNOUNCE_STEP, None),
    ]
    seen: list[tuple[Any, ...]] = []
    for step, message, turn in cases:
        request = RunRequest(
            run_id="run-1",
            session_key=T,
            agent_id="main",
            step=step,
            message=message,
            context=None,
            clock=VirtualClock(),
            transcript=no_transcript,
            turn=turn,
        )
        try:
            reply = await runtime.run(request)
        except RuntimeError as error:
            seen.append(("failed", str(error)))
        else:
            seen.append((reply.text, reply.usage))
    return seen


async def test_a_script_file_in_json_or_yaml_behaves_like_the_dict(tmp_path: Path) -> None:
    (tmp_path / "agents.json").write_text(json.dumps(SCRIPT))
    (tmp_path / "agents.yaml").write_text(SCRIPT_YAML)
    assert yaml.safe_load(SCRIPT_YAML) == SCRIPT

    expected = [
        (f"pong to {T}", None),
        ("failed", "tool crashed"),
        ("", None),  # no rule matches
        ("turn 3: pong to you", None),
        ("ANNOUNCE_SKIP", {"input": 10}),
    ]
    assert await outcomes(ScriptedRuntime.from_dict(SCRIPT)) == expected
    assert await outcomes(ScriptedRuntime.from_file(tmp_path / "agents.json")) == expected
    assert await outcomes(ScriptedRuntime.from_file(tmp_path / "agents.yaml")) == expected


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("missing.json", None, "cannot read script"),
        ("broken.json", "{rules: [", "cannot be parsed"),
        ("broken.yaml", "rules: [unclosed", "cannot be parsed"),
        ("list.yaml", "- step: primary", "must hold an object with 'rules'"),
        ("bad-step.yml", "rules:\n  - step: nope", "rules[0].step"),
    ],
)
def test_an_unusable_script_file_is_a_script_error(
    tmp_path: Path, name: str, text: str | None, error: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ScriptError, match=re.escape(error)):
        ScriptedRuntime.from_file(path)


async def test_scripted_replies_fill_in_message_session_and_turn(
    store_url: str, clock: VirtualClock
) -> None:
    agent = ScriptedRuntime.from_dict(
        {
            "rules": [
                {"step": "primary", "reply": "echo '{message}' in {session}, turn '{turn}'"},
                {"step": "reply_back", "reply": "turn {turn} from {session}"},
                {"step": "announce", "reply": "ANNOUNCE_SKIP"},
            ]
        }
    )
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 2}}}
    async with open_gateway(store_url, clock, agent, config=config) as gw:
        result = await answer_now(gw, send(gw, T, "hi there", 30))
        assert result["reply"] == f"echo 'hi there' in {T}, turn ''"  # a primary run has no turn

        await gw.wait_idle()
        assert [e.reply for e in events(gw, "PingPongTurn")] == [
            f"turn 1 from {MAIN}",
            f"turn 2 from {T}",
        ]


async def test_the_first_matching_rule_wins(store_url: str, clock: VirtualClock) -> None:
    agent = ScriptedRuntime.from_dict(
        {
            "rules": [
                *QUIET_SCRIPT_STEPS,
                {"agent": "ops", "reply": "not this one: agent ops never runs here"},
                {"session": "*:group:other", "reply": "not this one: another session"},
                {"match": "(?i)ping", "reply": "pong"},
                {"match": "ping", "reply": "not this one: the rule above matched first"},
                {"session": "agent:main:*", "reply": "anything else"},
            ]
        }
    )
    async with open_gateway(store_url, clock, agent) as gw:
        replies = [
            (await answer_now(gw, send(gw, T, message, 30)))["reply"]
            for message in ["PING", "ping", "hello"]
        ]
        assert replies == ["pong", "pong", "anything else"]


async def test_no_matching_rule_gives_an_empty_reply(store_url: str, clock: VirtualClock) -> None:
    agent = ScriptedRuntime.from_dict({"rules": [{"match": "ping", "reply": "pong"}]})
    async with open_gateway(store_url, clock, agent) as gw:
        result = await answer_now(gw, send(gw, T, "hello", 30))
        await gw.wait_idle()

        # The run succeeds with an empty reply: the send answers no_reply (decision 37),
        # no assistant message, and (nothing to answer) no ping-pong and no announce.
        assert result["status"] == "no_reply"
        assert "reply" not in result
        assert [e.reply for e in events(gw, "RunCompleted")] == [""]
        assert await transcript(gw, T) == [("user", "hello")]
        assert [call.step for call in agent.calls] == ["primary"]
        assert [e.reason for e in events(gw, "ExchangeClosed")] == ["the target gave no reply"]
