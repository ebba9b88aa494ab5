"""Budgets and hop limits on every path that starts or feeds a run (issue 43, issue 35
item 4, issue 36 item 9; ADR 0034): a yield's woken turn (also after a reopen), an A2A
message, steers (busy policy ``steer`` and the ``subagents`` tool, their hop and
``maxSteers``). On every store, on a VirtualClock; each test failed before its fix.

The expected counts are derived by hand from the scenario (which runs the trace starts,
in which order), never by asking the budget code that is under test."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import Task, TaskState
from a2a_calls import a2a_message, called_by, handler_for
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.testing import VirtualClock

A = "agent:main:work:a"
X = "agent:main:work:x"
Y = "agent:main:work:y"
OUTSIDE = "agent:main:work:outside"


def config(agent_to_agent: dict[str, Any], **more: Any) -> GatewayConfig:
    settings: dict[str, Any] = {
        "session": {"agentToAgent": {"maxPingPongTurns": 0, **agent_to_agent}},
        **more,
    }
    return GatewayConfig.load(before_scopes(settings))


def refused(gw: Gateway, check: str) -> list[AccessRefusal.AccessRefused]:
    return [
        event
        for _, event in store_of(gw).events()
        if isinstance(event, AccessRefusal.AccessRefused) and event.check == check
    ]


def events_named(gw: Gateway, name: str) -> list[Any]:
    return [event for _, event in store_of(gw).events() if type(event).__name__ == name]


# A yield's woken turn ---------------------------------------------------------------------


class SpawnThenYield(AgentRuntime):
    """A's primary turn spawns a child and yields; the child works 60 s on the clock."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self.woken: list[str] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            await request.clock.sleep(60)
            return RunReply(text="child done")
        if request.step == "yield_wake":
            self.woken.append(request.run_id)
            return RunReply(text="woken")
        if request.step != "primary" or request.session_key != A:
            return RunReply(text="ANNOUNCE_SKIP")
        assert request.call_tool is not None
        self.answers.append(await request.call_tool("sessions_spawn", {"task": "dig"}))
        self.answers.append(await request.call_tool("sessions_yield", {}))
        return RunReply(text="a yielded")


# The trace, in the order it happens: the send's run in A (1), the child's task (2), the
# send exchange's announce step once A's turn ends (3), the child's announce step (4).
# The woken turn would be the fifth.
RUNS_BEFORE_THE_WAKE = 4
WAKE_REFUSED = "trace budget exceeded: maxRuns 4 reached (4 runs in this trace)"


async def _send_into_a(gw: Gateway) -> dict[str, Any]:
    for key in (A, OUTSIDE):
        await gw.record_message(key, role="user", content="hi")
    return await gw.call_tool(
        OUTSIDE, "sessions_send", {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
    )


async def _check_wake_refused(gw: Gateway, trace: str, agents: SpawnThenYield) -> None:
    runs = (await gw.runs(trace_id=trace))["runs"]
    assert len(runs) == RUNS_BEFORE_THE_WAKE, runs
    assert "yield_wake" not in {run["step"] for run in runs}
    assert agents.woken == []
    assert [(r.tool, r.message, r.rule) for r in refused(gw, "trace_budget")] == [
        ("sessions_yield", WAKE_REFUSED, "session.agentToAgent.budget.maxRuns")
    ]
    (woken,) = events_named(gw, "YieldWoken")
    assert woken.refused == WAKE_REFUSED
    assert woken.reason == "all"


async def test_a_yields_woken_turn_asks_the_trace_budget(
    store_url: str, clock: VirtualClock
) -> None:
    """maxRuns 4: the yield is admitted (2 runs then), but by the time its child has
    reported the trace has 4: the woken turn would be a fifth, so it is refused and
    recorded, and the yield still wakes once (without a turn)."""
    agents = SpawnThenYield()
    gw = await Gateway.open(
        config=config({"budget": {"maxRuns": 4}}), store=store_url, clock=clock, runtime=agents
    )
    try:
        sent = await _send_into_a(gw)
        await gw.wait_idle()
        spawned, yielded = agents.answers
        assert spawned["status"] == "accepted", spawned
        assert yielded["status"] == "yielded", yielded
        await clock.advance(60)
        await gw.wait_idle()
        await _check_wake_refused(gw, sent["runId"], agents)
    finally:
        await gw.close()


async def test_a_yield_resumed_after_a_reopen_asks_the_trace_budget(
    store_url: str, clock: VirtualClock
) -> None:
    """The same trace, with the gateway closed while the child works: the gateway that
    reopens resumes the child and the yield, and the woken turn is still refused."""
    if store_url == "memory":
        pytest.skip("a memory store does not outlive its gateway")
    agents = SpawnThenYield()
    settings = config({"budget": {"maxRuns": 4}})
    gw = await Gateway.open(config=settings, store=store_url, clock=clock, runtime=agents)
    try:
        sent = await _send_into_a(gw)
        await gw.wait_idle()
        assert agents.answers[1]["status"] == "yielded"
    finally:
        await gw.close()
    gw = await Gateway.open(config=settings, store=store_url, clock=clock, runtime=agents)
    try:
        await gw.wait_idle()
        await clock.advance(60)
        await gw.wait_idle()
        await _check_wake_refused(gw, sent["runId"], agents)
    finally:
        await gw.close()


class NestedYield(AgentRuntime):
    """A spawns a child; the child spawns a grandchild and yields; the grandchild works
    60 s. Every announce step is skipped."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        assert request.call_tool is not None
        if request.step == "subagent_task" and "grandchild" in request.message:
            await request.clock.sleep(60)
            return RunReply(text="grandchild done")
        if request.step == "subagent_task":
            self.answers.append(await request.call_tool("sessions_spawn", {"task": "grandchild"}))
            self.answers.append(await request.call_tool("sessions_yield", {}))
            return RunReply(text="child yielded")
        if request.step == "yield_wake":
            return RunReply(text="child woken")
        if request.step == "primary" and request.session_key == A:
            self.answers.append(await request.call_tool("sessions_spawn", {"task": "child"}))
            return RunReply(text="a done")
        return RunReply(text="ANNOUNCE_SKIP")


async def test_a_child_whose_woken_turn_is_refused_still_reports(
    store_url: str, clock: VirtualClock
) -> None:
    """The refused wake is a sub-agent's: its task ends there, failed with the refusal,
    and its report still reaches the session that spawned it (nothing waits forever).
    Runs: A (1), the child's task (2), the send's announce (3), the grandchild (4), the
    grandchild's announce (5); the child's woken turn would be the sixth."""
    agents = NestedYield()
    settings = config(
        {"budget": {"maxRuns": 5}},
        agents={"defaults": {"subagents": {"maxSpawnDepth": 2}}},
    )
    gw = await Gateway.open(config=settings, store=store_url, clock=clock, runtime=agents)
    try:
        sent = await _send_into_a(gw)
        await gw.wait_idle()
        await clock.advance(60)
        await gw.wait_idle()
        runs = (await gw.runs(trace_id=sent["runId"]))["runs"]
        message = "trace budget exceeded: maxRuns 5 reached (5 runs in this trace)"
        # The child's report to A is a delivery, not a run: the spawn has reported.
        reported = events_named(gw, "SubagentAnnounced")
        outcomes = [event.outcome for event in events_named(gw, "SubagentRunEnded")]
        recorded = refused(gw, "trace_budget")
    finally:
        await gw.close()
    assert [answer["status"] for answer in agents.answers] == ["accepted", "accepted", "yielded"]
    assert len(runs) == 5, runs
    assert "yield_wake" not in {run["step"] for run in runs}
    assert "error" in outcomes
    # The grandchild's announce step skipped its report; the child's is the refusal.
    (report,) = reported
    assert report.message.startswith("Status: error")
    assert message in report.message
    # The woken turn, then the child's own announce step: both refused, both recorded.
    assert [(r.tool, r.message) for r in recorded] == [
        ("sessions_yield", message),
        ("subagent_announce", message),
    ]


# A2A ------------------------------------------------------------------------------------


class Pong(AgentRuntime):
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def run(self, request: RunRequest) -> RunReply:
        self.asked.append(request.session_key)
        return RunReply(text="pong")


async def test_an_a2a_message_asks_the_trace_budget(store_url: str, clock: VirtualClock) -> None:
    """maxRuns 0 refuses every run: an A2A message too (it started and finished one)."""
    agents = Pong()
    gw = await Gateway.open(
        config=config({"budget": {"maxRuns": 0}}), store=store_url, clock=clock, runtime=agents
    )
    try:
        handler = handler_for(gw)
        answer = await handler.on_message_send(
            a2a_message("hi"), called_by(Grant(None, "operator#1"))
        )
        await gw.wait_idle()
        runs = (await gw.runs())["runs"]
        recorded = refused(gw, "trace_budget")
    finally:
        await gw.close()
    message = "trace budget exceeded: maxRuns 0 reached (0 runs in this trace)"
    assert isinstance(answer, Task)
    assert answer.status.state == TaskState.TASK_STATE_REJECTED
    assert message in answer.status.message.parts[0].text
    assert runs == []
    assert agents.asked == []
    assert [(r.tool, r.message) for r in recorded] == [("a2a", message)]


# Steers -----------------------------------------------------------------------------------


class SteerEachOther(AgentRuntime):
    """X's and Y's runs (each started by its own outside message, so in two traces) each
    send the other one message at once, then one more for each message steered into
    them, for as long as the clock runs (polled each second); ``answers`` keeps what each
    send answered. After a forbidden answer the run sends nothing more but stays in
    flight to the end (so the other's sends still find it busy)."""

    def __init__(self, seconds: int = 40) -> None:
        self.seconds = seconds
        self.inbox: dict[str, int] = {X: 0, Y: 0}
        self.answers: dict[str, list[dict[str, Any]]] = {X: [], Y: []}

    async def run(self, request: RunRequest) -> RunReply:
        me = request.session_key
        if request.step != "primary" or me not in self.inbox or request.message != "go":
            return RunReply(text="ANNOUNCE_SKIP")
        other = Y if me == X else X
        assert request.call_tool is not None
        # A second first: both outside messages are recorded by then (both runs busy).
        await request.clock.sleep(1)
        owed, handled, refused = 1, 0, False
        for _ in range(self.seconds):
            owed += self.inbox[me] - handled
            handled = self.inbox[me]
            while owed and not refused:
                owed -= 1
                answer = await request.call_tool(
                    "sessions_send", {"sessionKey": other, "message": "ping", "timeoutSeconds": 0}
                )
                self.answers[me].append(answer)
                refused = answer["status"] == "forbidden"
                if answer.get("delivery", {}).get("status") == "steered":
                    self.inbox[other] += 1
            await request.clock.sleep(1)
        return RunReply(text="stopped" if refused else "out of time")


async def _steer_loop(
    store_url: str, clock: VirtualClock, agent_to_agent: dict[str, Any]
) -> tuple[Gateway, SteerEachOther]:
    agents = SteerEachOther()
    gw = await Gateway.open(
        config=config({"busy": "steer", **agent_to_agent}),
        store=store_url,
        clock=clock,
        runtime=agents,
    )
    for key in (X, Y, OUTSIDE):
        await gw.record_message(key, role="user", content="hi")
    # The two outside messages reach X and Y at once: both runs are in flight.
    for key in (X, Y):
        sent = await gw.call_tool(
            OUTSIDE, "sessions_send", {"sessionKey": key, "message": "go", "timeoutSeconds": 0}
        )
        assert sent["status"] == "accepted", sent
    await clock.advance(agents.seconds + 1)
    await gw.wait_idle()
    return gw, agents


def _steers(agents: SteerEachOther) -> int:
    return sum(
        1
        for answers in agents.answers.values()
        for answer in answers
        if answer.get("delivery", {}).get("status") == "steered"
    )


async def test_two_runs_steering_each_other_stop_at_the_hop_limit(
    store_url: str, clock: VirtualClock
) -> None:
    """maxHops 3, no budget: each steer is a hop on its sender's chain and the steered
    run goes on at the steer's hop. X and Y (hop 1 each) steer each other at once (each
    now at hop 2), each answers the other's steer (hop 3), and each one's next send is
    refused: hop limit, recorded. Before, the loop went on until the runs ran out of
    time (two steers a second)."""
    gw, agents = await _steer_loop(store_url, clock, {"maxHops": 3})
    try:
        hop_refusals = refused(gw, "hop_limit")
        steered = events_named(gw, "RunSteered")
    finally:
        await gw.close()
    message = "agent-to-agent hop limit reached (3 hops in this chain)"
    assert agents.answers[X][-1] == {"status": "forbidden", "error": message}
    assert agents.answers[Y][-1] == {"status": "forbidden", "error": message}
    assert _steers(agents) == 4
    assert sorted(event.hops for event in steered) == [2, 2, 3, 3]
    assert [r.message for r in hop_refusals] == [message, message]


async def test_steers_count_against_max_steers_of_the_senders_trace(
    store_url: str, clock: VirtualClock
) -> None:
    """maxSteers 2 (hops left high): each trace may send two steers; the third is
    refused by the sender's trace budget, recorded with the rule."""
    gw, agents = await _steer_loop(store_url, clock, {"maxHops": 50, "budget": {"maxSteers": 2}})
    try:
        recorded = refused(gw, "trace_budget")
    finally:
        await gw.close()
    message = "trace budget exceeded: maxSteers 2 reached (2 steers in this trace)"
    assert agents.answers[X][-1] == {"status": "forbidden", "error": message}
    assert agents.answers[Y][-1] == {"status": "forbidden", "error": message}
    assert _steers(agents) == 4
    assert (
        sorted((r.tool, r.message, r.rule) for r in recorded)
        == [("sessions_send", message, "session.agentToAgent.budget.maxSteers")] * 2
    )


class SteerTheChild(AgentRuntime):
    """A child labelled ``dig`` works 600 s; A's primary turn steers it ``steers`` times
    (after spawning it itself, when ``spawns``)."""

    def __init__(self, *, steers: int, spawns: bool) -> None:
        self.steers = steers
        self.spawns = spawns
        self.answers: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {}

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            await request.clock.sleep(600)
            return RunReply(text="child done")
        if request.step != "primary" or request.session_key != A:
            return RunReply(text="ANNOUNCE_SKIP")
        assert request.call_tool is not None
        if self.spawns:
            spawned = await request.call_tool("sessions_spawn", {"task": "dig", "label": "dig"})
            self.answers.append(spawned)
        for n in range(self.steers):
            self.answers.append(
                await request.call_tool(
                    "subagents", {"action": "steer", "target": "dig", "message": f"turn {n}"}
                )
            )
        self.status = await request.call_tool("session_status", {})
        return RunReply(text="a done")


async def test_the_subagents_steer_counts_against_max_steers(
    store_url: str, clock: VirtualClock
) -> None:
    """maxSteers 2: A steers its child twice; the third steer is refused, recorded, and
    each steer recorded the sender's chain (A's hop + 1)."""
    agents = SteerTheChild(steers=3, spawns=True)
    gw = await Gateway.open(
        config=config({"budget": {"maxSteers": 2}}), store=store_url, clock=clock, runtime=agents
    )
    try:
        sent = await _send_into_a(gw)
        await gw.wait_idle()
        steered = events_named(gw, "RunSteered")
        sent_steers = events_named(gw, "RunSteerSent")
        recorded = refused(gw, "trace_budget")
        a_run = await gw.run(sent["runId"])
        await clock.advance(600)
        await gw.wait_idle()
    finally:
        await gw.close()
    message = "trace budget exceeded: maxSteers 2 reached (2 steers in this trace)"
    assert [answer["status"] for answer in agents.answers] == ["accepted", "ok", "ok", "forbidden"]
    assert agents.answers[-1] == {"status": "forbidden", "tool": "subagents", "error": message}
    assert a_run is not None
    assert [(e.trace_id, e.parent_run_id, e.hops) for e in steered] == [
        (sent["runId"], sent["runId"], a_run["hop"] + 1)
    ] * 2
    assert len(sent_steers) == 2
    assert agents.status["budget"]["limits"]["maxSteers"] == 2
    assert agents.status["budget"]["used"]["steers"] == 2
    assert [(r.tool, r.rule) for r in recorded] == [
        ("subagents", "session.agentToAgent.budget.maxSteers")
    ]


def test_max_steers_is_validated_like_the_other_limits() -> None:
    assert config({"budget": {"maxSteers": 0}}).trace_budget.max_steers == 0
    for wrong in (-1, 1.5, "two"):
        with pytest.raises(Exception, match="maxSteers"):
            config({"budget": {"maxSteers": wrong}})


async def test_the_subagents_steer_is_refused_at_the_hop_limit(
    store_url: str, clock: VirtualClock
) -> None:
    """maxHops 1: A's turn (hop 1, a send from outside) may send nothing further, and so
    may steer nothing either: the same refusal as a send, recorded."""
    agents = SteerTheChild(steers=1, spawns=False)
    gw = await Gateway.open(
        config=config({"maxHops": 1}), store=store_url, clock=clock, runtime=agents
    )
    try:
        for key in (A, OUTSIDE):
            await gw.record_message(key, role="user", content="hi")
        spawned = await gw.call_tool(A, "sessions_spawn", {"task": "dig", "label": "dig"})
        assert spawned["status"] == "accepted", spawned
        await gw.call_tool(
            OUTSIDE, "sessions_send", {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        recorded = refused(gw, "hop_limit")
        steered = events_named(gw, "RunSteered")
        await clock.advance(600)
        await gw.wait_idle()
    finally:
        await gw.close()
    message = "agent-to-agent hop limit reached (1 hops in this chain)"
    assert agents.answers == [{"status": "forbidden", "tool": "subagents", "error": message}]
    assert steered == []
    assert [(r.tool, r.message) for r in recorded] == [("subagents", message)]
