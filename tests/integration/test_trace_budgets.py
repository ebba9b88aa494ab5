"""Budgets per trace (issue 25 item 7, decision 31, ADR 0034): runs, spawns, tokens and
cost counted per traceId from the recorded runs, carried across sends, spawns and hops;
an exceeded budget refuses with a recorded reason, and ``onExceeded: "cancel"`` stops
the trace's work in flight. On every store, on a VirtualClock."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.config.gateway_config import ConfigError
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.testing import CapturingDelivery, VirtualClock

A = "agent:main:work:a"
B = "agent:main:work:b"
C = "agent:main:work:c"
D = "agent:main:work:d"


def config(budget: dict[str, Any], *, turns: int = 0) -> GatewayConfig:
    return GatewayConfig.load(
        before_scopes({"session": {"agentToAgent": {"maxPingPongTurns": turns, "budget": budget}}})
    )


class Chain(AgentRuntime):
    """A's primary run sends to B and waits, then sends to C; B's primary run sends on
    to D (a hop further). B's primary run reports ``tokens`` tokens, the others none. A
    sub-agent's task works ``child_work[n]`` seconds on the clock (n: the order A spawned
    it in; a child A did not spawn works none), reporting ``child_tokens``."""

    def __init__(self, *, tokens: int = 10, child_tokens: int = 10) -> None:
        self.gateway: Gateway | None = None
        self.tokens = tokens
        self.child_tokens = child_tokens
        self.child_work: list[float] = []
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.spawns = 0
        self.b_work = 0.0

    async def run(self, request: RunRequest) -> RunReply:
        gw = self.gateway
        assert gw is not None
        if request.step == "subagent_task":
            spawned = re.search(r"dig (\d+)", request.message)
            work = self.child_work[int(spawned.group(1))] if spawned and self.child_work else 0
            try:
                await request.clock.sleep(work)
            except asyncio.CancelledError:
                self.cancelled.append(request.run_id)
                raise
            self.finished.append(request.run_id)
            return RunReply(text="child done", usage={"totalTokens": self.child_tokens})
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP" if "announce" in request.step else "REPLY_SKIP")
        answers = self.answers.setdefault(request.session_key, [])
        if request.session_key == A:
            answers.append(
                await gw.call_tool(A, "sessions_send", {"sessionKey": B, "message": "b?"})
            )
            answers.append(
                await gw.call_tool(
                    A, "sessions_send", {"sessionKey": C, "message": "c?", "timeoutSeconds": 0}
                )
            )
            for n in range(self.spawns):
                answers.append(await gw.call_tool(A, "sessions_spawn", {"task": f"dig {n}"}))
            answers.append(await gw.call_tool(A, "session_status", {}))
        elif request.session_key == B:
            answers.append(
                await gw.call_tool(
                    B, "sessions_send", {"sessionKey": D, "message": "d?", "timeoutSeconds": 0}
                )
            )
            await request.clock.sleep(self.b_work)
        tokens = self.tokens if request.session_key == B else 0
        return RunReply(text=f"{request.session_key} done", usage={"totalTokens": tokens})


@asynccontextmanager
async def opened(
    store_url: str, clock: VirtualClock, settings: GatewayConfig, agents: Chain
) -> AsyncIterator[Gateway]:
    gw = await Gateway.open(config=settings, store=store_url, clock=clock, runtime=agents)
    agents.gateway = gw
    try:
        for key in (A, B, C, D):
            await gw.record_message(key, role="user", content="hi")
        yield gw
    finally:
        await gw.close()


def refusals(gw: Gateway) -> list[AccessRefusal.AccessRefused]:
    return [
        event
        for _, event in store_of(gw).events()
        if isinstance(event, AccessRefusal.AccessRefused) and event.check == "trace_budget"
    ]


async def start(gw: Gateway) -> dict[str, Any]:
    """A send from outside into A: the trace's first run."""
    return await gw.call_tool(
        D, "sessions_send", {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
    )


async def test_no_budget_by_default_counts_nothing(store_url: str, clock: VirtualClock) -> None:
    agents = Chain()
    async with opened(store_url, clock, GatewayConfig.load(before_scopes()), agents) as gw:
        assert (await start(gw))["status"] == "accepted"
        await gw.wait_idle()
        assert [answer["status"] for answer in agents.answers[A][:2]] == ["ok", "accepted"]
        assert "budget" not in agents.answers[A][-1]
        assert refusals(gw) == []


@pytest.mark.parametrize(
    ("budget", "reason", "limit"),
    [
        ({"maxRuns": 0}, "maxRuns 0 reached (0 runs in this trace)", "maxRuns"),
        ({"maxTokens": 0}, "maxTokens 0 reached (0 tokens in this trace)", "maxTokens"),
        ({"maxCost": 0}, "maxCost $0 reached ($0 USD in this trace)", "maxCost"),
    ],
)
async def test_budgets_of_zero_refuse_every_send_and_spawn(
    store_url: str, clock: VirtualClock, budget: dict[str, Any], reason: str, limit: str
) -> None:
    agents = Chain()
    async with opened(store_url, clock, config(budget), agents) as gw:
        sent = await start(gw)
        spawned = await gw.call_tool(A, "sessions_spawn", {"task": "dig"})
        await gw.wait_idle()
        runs = await gw.runs()
        recorded = refusals(gw)

    message = f"trace budget exceeded: {reason}"
    assert sent == {"status": "forbidden", "error": message}
    assert spawned == {"status": "forbidden", "error": message}
    assert runs == {"runs": []}
    rule = f"session.agentToAgent.budget.{limit}"
    assert [(r.tool, r.message, r.rule) for r in recorded] == [
        ("sessions_send", message, rule),
        ("sessions_spawn", message, rule),
    ]


async def test_two_spawns_at_once_in_one_trace_do_not_both_pass_max_spawns(
    store_url: str, clock: VirtualClock
) -> None:
    """A's turn makes two spawns concurrently with maxSpawns 1: the count and the start
    are one step under the trace's lock, so exactly one is accepted."""

    class Twice(Chain):
        async def run(self, request: RunRequest) -> RunReply:
            if (request.session_key, request.step) != (A, "primary"):
                return await super().run(request)
            gw = self.gateway
            assert gw is not None
            both = await asyncio.gather(
                gw.call_tool(A, "sessions_spawn", {"task": "one"}),
                gw.call_tool(A, "sessions_spawn", {"task": "two"}),
            )
            self.answers[A] = list(both)
            return RunReply(text="spawned")

    agents = Twice()
    async with opened(store_url, clock, config({"maxSpawns": 1}), agents) as gw:
        await start(gw)
        await gw.wait_idle()

    assert sorted(answer["status"] for answer in agents.answers[A]) == ["accepted", "forbidden"]


async def test_max_spawns_zero_refuses_spawns_and_lets_sends_through(
    store_url: str, clock: VirtualClock
) -> None:
    agents = Chain()
    async with opened(store_url, clock, config({"maxSpawns": 0}), agents) as gw:
        spawned = await gw.call_tool(A, "sessions_spawn", {"task": "dig"})
        sent = await start(gw)
        await gw.wait_idle()

    assert spawned == {
        "status": "forbidden",
        "error": "trace budget exceeded: maxSpawns 0 reached (0 spawns in this trace)",
    }
    assert sent["status"] == "accepted"


async def test_runs_are_counted_across_sends_and_hops_of_one_trace(
    store_url: str, clock: VirtualClock
) -> None:
    """go -> A (run 1); A -> B (run 2); B -> D (run 3, a hop further); A -> C: refused."""
    agents = Chain()
    async with opened(store_url, clock, config({"maxRuns": 3}), agents) as gw:
        first = await start(gw)
        await gw.wait_idle()
        trace = (await gw.run(first["runId"]) or {})["traceId"]
        in_trace = (await gw.runs(trace_id=trace))["runs"]
        # Another trace has its own budget.
        recorded = refusals(gw)
        again = await gw.call_tool(
            D, "sessions_send", {"sessionKey": C, "message": "x", "timeoutSeconds": 0}
        )
        await gw.wait_idle()

    assert agents.answers[B][0]["status"] == "accepted"  # B -> D, run 3
    assert agents.answers[A][0]["status"] == "ok"  # A -> B waited for B
    assert agents.answers[A][1] == {
        "status": "forbidden",
        "error": "trace budget exceeded: maxRuns 3 reached (3 runs in this trace)",
    }
    assert sorted((run["sessionKey"], run["step"]) for run in in_trace) == [
        (A, "primary"),
        (B, "primary"),
        (D, "primary"),
    ]
    assert again["status"] == "accepted"
    # The exchanges' announce steps were refused too (no run started for them), recorded.
    tools = sorted(refusal.tool for refusal in recorded)
    assert tools.count("sessions_send") == 1
    assert "announce" in tools
    assert all(refusal.trace_id == trace for refusal in recorded)


async def test_tokens_from_recorded_usage_refuse_further_work(
    store_url: str, clock: VirtualClock
) -> None:
    """B's run (waited for by A) reports 200 tokens: A's next send is over maxTokens."""
    agents = Chain(tokens=200)
    async with opened(store_url, clock, config({"maxTokens": 150}), agents) as gw:
        await start(gw)
        await gw.wait_idle()

    assert agents.answers[A][0]["status"] == "ok"
    assert agents.answers[A][1] == {
        "status": "forbidden",
        "error": "trace budget exceeded: maxTokens 150 reached (200 tokens in this trace)",
    }
    status = agents.answers[A][-1]
    assert status["budget"]["limits"] == {"onExceeded": "refuse", "maxTokens": 150}
    assert status["budget"]["used"]["tokens"] == 200
    assert status["budget"]["exceeded"] == "maxTokens 150 reached (200 tokens in this trace)"
    assert status["currentRun"]["status"] == "running"


async def test_cost_reported_by_the_runtime_counts(store_url: str, clock: VirtualClock) -> None:
    class Costly(Chain):
        async def run(self, request: RunRequest) -> RunReply:
            reply = await super().run(request)
            cost = 0.5 if (request.session_key, request.step) == (B, "primary") else 0
            usage = {"input": 1, "output": 1, "cost": {"total": cost}}
            return RunReply(text=reply.text, usage=usage)

    agents = Costly()
    async with opened(store_url, clock, config({"maxCost": 0.5}), agents) as gw:
        await start(gw)
        await gw.wait_idle()

    assert agents.answers[A][1] == {
        "status": "forbidden",
        "error": "trace budget exceeded: maxCost $0.5 reached ($0.5 USD in this trace)",
    }


async def test_on_exceeded_cancel_stops_the_traces_work_in_flight(
    store_url: str, clock: VirtualClock
) -> None:
    """A spawns two children: the first ends after a second with 500 tokens, the second
    works an hour; once the first's usage spends maxTokens, the second is cancelled.

    The first works a second, not none: ending at once it could spend the budget before A
    asked for the second (then refused), as the children run beside A's run."""
    agents = Chain(tokens=0, child_tokens=500)
    agents.spawns = 2
    agents.child_work = [1, 3600]
    settings = config({"maxTokens": 400, "onExceeded": "cancel"})
    async with opened(store_url, clock, settings, agents) as gw:
        await start(gw)
        await gw.wait_idle()
        await clock.advance(1)
        await gw.wait_idle()
        spawned = [answer for answer in agents.answers[A] if answer.get("childSessionKey")]
        states = [await gw.run(answer["runId"]) for answer in spawned]

    assert [state["status"] if state else None for state in states] == ["ok", "cancelled"]
    slow = states[1]
    assert slow is not None
    assert slow["error"] == (
        "run cancelled: trace budget exceeded: maxTokens 400 reached (500 tokens in this trace)"
    )
    # Stopped in its work, or cancelled before it was dispatched: never finished.
    assert slow["runId"] not in agents.finished
    assert agents.cancelled in ([], [slow["runId"]])


async def test_on_exceeded_cancel_at_a_refusal_cancels_what_is_in_flight(
    store_url: str, clock: VirtualClock
) -> None:
    """maxRuns 2: go -> A, A -> B (waited); B's own send to D is refused (its trace has
    2 runs), and every run of the trace still in flight is cancelled: A's and B's (B
    works on a minute after its refused send)."""
    agents = Chain()
    agents.b_work = 60
    async with opened(
        store_url, clock, config({"maxRuns": 2, "onExceeded": "cancel"}), agents
    ) as gw:
        first = await start(gw)
        await gw.wait_idle()
        trace = (await gw.run(first["runId"]) or {})["traceId"]
        runs = (await gw.runs(trace_id=trace))["runs"]
        recorded = refusals(gw)

    reason = "trace budget exceeded: maxRuns 2 reached (2 runs in this trace)"
    assert sorted((run["sessionKey"], run["status"], run["error"]) for run in runs) == [
        (A, "cancelled", f"run cancelled: {reason}"),
        (B, "cancelled", f"run cancelled: {reason}"),
    ]
    # B's refused send; A, once its wait for B hears B cancelled, may try C before its
    # own cancel lands: refused too, for the same reason.
    refused = [(r.requester_key, r.tool, r.message) for r in recorded]
    assert (B, "sessions_send", reason) in refused
    assert set(refused) <= {(B, "sessions_send", reason), (A, "sessions_send", reason)}


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"maxRuns": -1}, "session.agentToAgent.budget.maxRuns"),
        ({"maxSpawns": -3}, "session.agentToAgent.budget.maxSpawns"),
        ({"maxTokens": -10}, "session.agentToAgent.budget.maxTokens"),
        ({"maxCost": -0.01}, "session.agentToAgent.budget.maxCost"),
        ({"maxCost": float("inf")}, "session.agentToAgent.budget.maxCost"),
        ({"maxRuns": 1.5}, "session.agentToAgent.budget.maxRuns"),
        ({"onExceeded": "stop"}, "session.agentToAgent.budget.onExceeded"),
    ],
)
def test_negative_or_wrong_budgets_are_config_errors(budget: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        config(budget)


def test_zero_budgets_are_valid() -> None:
    budget = config({"maxRuns": 0, "maxSpawns": 0, "maxTokens": 0, "maxCost": 0}).trace_budget
    assert budget.configured
    assert budget.max_runs == 0
    assert budget.max_cost == 0


async def test_a_spent_trace_skips_the_announce_step_and_still_reports(
    store_url: str, clock: VirtualClock
) -> None:
    """maxRuns 1: the spawn's task is the trace's one run; its announce step is refused
    (recorded), and the report still reaches the requester's chat with the status."""
    delivery = CapturingDelivery()
    agents = Chain()
    gw = await Gateway.open(
        config=config({"maxRuns": 1}),
        store=store_url,
        clock=clock,
        runtime=agents,
        delivery=delivery,
    )
    agents.gateway = gw
    try:
        ops = "agent:main:discord:group:ops"
        await gw.record_message(
            ops, role="user", content="hi", channel="discord", chat_type="group"
        )
        spawned = await gw.call_tool(ops, "sessions_spawn", {"task": "dig"})
        await gw.wait_idle()
        runs = (await gw.runs(trace_id=(await gw.run(spawned["runId"]) or {})["traceId"]))["runs"]
        recorded = refusals(gw)
    finally:
        await gw.close()

    assert [run["step"] for run in runs] == ["subagent_task"]
    assert [(r.tool, r.rule) for r in recorded] == [
        ("subagent_announce", "session.agentToAgent.budget.maxRuns")
    ]
    (report,) = delivery.sent
    assert report["to"] == "channel:ops"
    assert report["message"].startswith("Status: ok")
    assert "child done" in report["message"]


async def test_a_ping_pong_turn_past_the_budget_ends_the_loop_with_the_rule(
    store_url: str, clock: VirtualClock
) -> None:
    """maxRuns 2, up to 5 ping-pong turns: the send's run and turn 1 are the trace's two
    runs; turn 2 is blocked by the budget (TurnBlocked names it), the announce too."""

    class Talkative(AgentRuntime):
        async def run(self, request: RunRequest) -> RunReply:
            return RunReply(text=f"{request.step} {request.turn}")

    gw = await Gateway.open(
        config=config({"maxRuns": 2}, turns=5), store=store_url, clock=clock, runtime=Talkative()
    )
    try:
        for key in (A, B):
            await gw.record_message(key, role="user", content="hi")
        sent = await gw.call_tool(A, "sessions_send", {"sessionKey": B, "message": "go"})
        await gw.wait_idle()
        trace = (await gw.run(sent["runId"]) or {})["traceId"]
        runs = (await gw.runs(trace_id=trace))["runs"]
        blocked = [
            event
            for _, event in store_of(gw).events()
            if type(event).__name__ in ("TurnBlocked", "AnnounceSuppressed")
        ]
        recorded = refusals(gw)
    finally:
        await gw.close()

    assert sent["status"] == "ok"
    assert sorted(run["step"] for run in runs) == ["primary", "reply_back"]
    rule = "session.agentToAgent.budget.maxRuns"
    assert [(type(event).__name__, event.rule) for event in blocked] == [
        ("TurnBlocked", rule),
        ("AnnounceSuppressed", rule),
    ]
    assert [r.tool for r in recorded] == ["reply_back", "announce"]


async def test_a_yield_past_the_budget_is_refused_and_recorded(
    store_url: str, clock: VirtualClock
) -> None:
    """maxRuns 2: the send into A and A's sub-agent are the trace's two runs; the turn a
    yield would wake is a third, so the yield is refused (decision 31: sends, spawns and
    yields), recorded, and A's turn ends without waiting."""

    class SpawnThenYield(AgentRuntime):
        def __init__(self) -> None:
            self.answers: list[dict[str, Any]] = []

        async def run(self, request: RunRequest) -> RunReply:
            if request.step == "subagent_task":
                await request.clock.sleep(60)
                return RunReply(text="child done")
            if request.step != "primary" or request.session_key != A:
                return RunReply(text="ANNOUNCE_SKIP")
            assert request.call_tool is not None
            self.answers.append(await request.call_tool("sessions_spawn", {"task": "dig"}))
            self.answers.append(await request.call_tool("sessions_yield", {}))
            return RunReply(text="a done")

    agents = SpawnThenYield()
    gw = await Gateway.open(
        config=config({"maxRuns": 2}), store=store_url, clock=clock, runtime=agents
    )
    try:
        for key in (A, D):
            await gw.record_message(key, role="user", content="hi")
        await start(gw)
        await gw.wait_idle()
        spawned, yielded = agents.answers
        assert spawned["status"] == "accepted", spawned
        message = "trace budget exceeded: maxRuns 2 reached (2 runs in this trace)"
        assert yielded == {"status": "forbidden", "tool": "sessions_yield", "error": message}
        # The yield is refused, and the exchange's announce step after A's turn too.
        assert [(r.tool, r.message) for r in refusals(gw)] == [
            ("sessions_yield", message),
            ("announce", message),
        ]
        await clock.advance(60)
        await gw.wait_idle()
        assert not [e for _, e in store_of(gw).events() if type(e).__name__ == "YieldWoken"]
    finally:
        await gw.close()
