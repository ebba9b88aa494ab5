"""Causality and the hop limit (contract §6 decision 17), provenance (decision 18).

Issue 12 situation 3: three agents forwarding each message round a cycle made 60 sends
with no refusal. Every run now records its chain (traceId, parentRunId, hops), and a send
or spawn from a run whose chain has ``maxHops`` hops is refused and recorded.
"""

from __future__ import annotations

from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.run import Run
from sessionwire.testing import CapturingDelivery, VirtualClock

OPERATOR = "agent:main:main"
A = "agent:main:discord:group:a"
B = "agent:main:discord:group:b"
C = "agent:main:discord:group:c"
NEXT = {A: B, B: C, C: A}
HOP_LIMIT_6 = {
    "status": "forbidden",
    "error": "agent-to-agent hop limit reached (6 hops in this chain)",
}
# Without a limit the cycle never ends; the test's agents stop after this many sends
# (one more than the limit lets through), so that the test fails instead of hanging.
SAFETY_CAP = 6


class CycleAgents(AgentRuntime):
    """Each agent forwards every message it gets to the next one round the cycle, from
    inside its turn (as an in-process runtime's tool call does), then answers."""

    def __init__(self, *, spawn: bool = False) -> None:
        self.gateway: Gateway | None = None
        self.results: list[dict[str, Any]] = []
        self.spawn = spawn

    async def run(self, request: RunRequest) -> RunReply:
        if request.step in {"announce", "subagent_announce"}:
            return RunReply(text="ANNOUNCE_SKIP")
        if request.step not in {"primary", "subagent_task"} or len(self.results) >= SAFETY_CAP:
            return RunReply(text="REPLY_SKIP")
        assert self.gateway is not None
        if self.spawn:
            result = await self.gateway.call_tool(
                request.session_key, "sessions_spawn", {"task": request.message}
            )
        else:
            result = await self.gateway.call_tool(
                request.session_key,
                "sessions_send",
                {
                    "sessionKey": NEXT[request.session_key],
                    "message": request.message,
                    "timeoutSeconds": 0,
                },
            )
        self.results.append(result)
        return RunReply(text="forwarded")


async def open_cycle(
    store_url: str, clock: VirtualClock, agents: CycleAgents, **session: Any
) -> Gateway:
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 0, **session}}}
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)),
        store=store_url,
        clock=clock,
        runtime=agents,
        delivery=CapturingDelivery(),
    )
    agents.gateway = gw
    for key in (OPERATOR, A, B, C):
        await gw.record_message(key, role="user", content="(opened)")
    return gw


def started_runs(gw: Gateway, step: str = "primary") -> list[Run.RunStarted]:
    return [
        event
        for _, event in store_of(gw).events()
        if isinstance(event, Run.RunStarted) and event.step == step
    ]


def refusals(gw: Gateway) -> list[AccessRefusal.AccessRefused]:
    return [e for _, e in store_of(gw).events() if isinstance(e, AccessRefusal.AccessRefused)]


async def test_a_forwarding_cycle_of_three_agents_ends_at_the_hop_limit(
    store_url: str, clock: VirtualClock
) -> None:
    agents = CycleAgents()
    gw = await open_cycle(store_url, clock, agents)
    try:
        first = await gw.call_tool(
            OPERATOR,
            "sessions_send",
            {"sessionKey": A, "message": "pass it on", "timeoutSeconds": 0},
        )
        assert first["status"] == "accepted"
        await gw.wait_idle()

        # Sends from hops 1..5 go through; the run at hop 6 is refused, exactly so.
        assert [r["status"] for r in agents.results] == ["accepted"] * 5 + ["forbidden"]
        assert agents.results[-1] == HOP_LIMIT_6
        runs = started_runs(gw)
        assert len(runs) == 6
        # One chain: its traceId is the first send's run; each run caused the next.
        assert {run.trace_id for run in runs} == {first["runId"]}
        assert [run.hops for run in runs] == [1, 2, 3, 4, 5, 6]
        assert runs[0].parent_run_id is None
        assert [run.parent_run_id for run in runs[1:]] == [
            str(run.originator_id) for run in runs[:-1]
        ]
        assert [run.session_key for run in runs] == [A, B, C, A, B, C]

        # The refusal is recorded, with the chain and the run that asked.
        (refused,) = refusals(gw)
        assert refused.check == "hop_limit"
        assert refused.rule == "session.agentToAgent.maxHops"
        assert refused.tool == "sessions_send"
        assert refused.requester_key == C
        assert refused.message == HOP_LIMIT_6["error"]
        assert refused.trace_id == first["runId"]
        assert refused.run_id == str(runs[-1].originator_id)
        assert refused.hops == 6
    finally:
        await gw.close()


async def test_max_hops_is_configurable(store_url: str, clock: VirtualClock) -> None:
    agents = CycleAgents()
    gw = await open_cycle(store_url, clock, agents, maxHops=2)
    try:
        await gw.call_tool(
            OPERATOR, "sessions_send", {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        assert agents.results == [
            {"status": "accepted", "runId": agents.results[0]["runId"], "sessionKey": B}
            | {"delivery": {"status": "started", "mode": "announce"}},
            {
                "status": "forbidden",
                "error": "agent-to-agent hop limit reached (2 hops in this chain)",
            },
        ]
    finally:
        await gw.close()


async def test_a_spawn_from_a_run_at_the_hop_limit_is_refused_and_recorded(
    store_url: str, clock: VirtualClock
) -> None:
    # maxHops 1: the operator's send is hop 1, so the agent may neither send nor spawn.
    agents = CycleAgents(spawn=True)
    gw = await open_cycle(store_url, clock, agents, maxHops=1)
    try:
        await gw.call_tool(
            OPERATOR, "sessions_send", {"sessionKey": A, "message": "research", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        assert agents.results == [
            {
                "status": "forbidden",
                "error": "agent-to-agent hop limit reached (1 hops in this chain)",
            }
        ]
        (refused,) = refusals(gw)
        assert (refused.tool, refused.check, refused.requester_key) == (
            "sessions_spawn",
            "hop_limit",
            A,
        )
        assert started_runs(gw, "subagent_task") == []
    finally:
        await gw.close()


async def test_a_spawned_child_and_its_announce_carry_the_chain(
    store_url: str, clock: VirtualClock
) -> None:
    agents = CycleAgents(spawn=True)
    gw = await open_cycle(store_url, clock, agents, maxHops=2)
    try:
        sent = await gw.call_tool(
            OPERATOR, "sessions_send", {"sessionKey": A, "message": "dig", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        assert agents.results[0]["status"] == "accepted"
        # The child (hop 2) may not spawn again: sub-agents never may, whatever the hops.
        (primary,) = started_runs(gw)
        (task,) = started_runs(gw, "subagent_task")
        (announce,) = started_runs(gw, "subagent_announce")
        assert (task.trace_id, task.parent_run_id, task.hops) == (
            sent["runId"],
            str(primary.originator_id),
            2,
        )
        # The announce step stays on the child's hop; it answers the child's run.
        assert (announce.trace_id, announce.parent_run_id, announce.hops) == (
            sent["runId"],
            str(task.originator_id),
            2,
        )
    finally:
        await gw.close()


async def test_history_says_who_wrote_each_line(store_url: str, clock: VirtualClock) -> None:
    agents = CycleAgents()
    gw = await open_cycle(store_url, clock, agents, maxHops=1)
    try:
        sent = await gw.call_tool(
            OPERATOR, "sessions_send", {"sessionKey": A, "message": "hello", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        history = await gw.call_tool(OPERATOR, "sessions_history", {"sessionKey": A})
        provenance = [message["provenance"] for message in history["messages"]]
        run_id = sent["runId"]
        (announce,) = started_runs(gw, "announce")
        announce_id = str(announce.originator_id)
        first = {"runId": run_id, "traceId": run_id, "hops": 1}
        # The announce step answers the primary run: that run is its parent.
        announce = {"runId": announce_id, "traceId": run_id, "parentRunId": run_id, "hops": 1}
        assert provenance == [
            {"kind": "user"},  # recorded from outside: no run, no chain
            {"kind": "a2a", "sessionKey": OPERATOR, **first},
            {"kind": "agent", "sessionKey": A, **first},
            # The exchange's announce step: the gateway's prompt, then what is posted.
            {"kind": "system", **announce},
            {"kind": "announce", "sessionKey": A, **announce},
        ]
    finally:
        await gw.close()


async def test_the_audit_timeline_shows_the_chain_on_each_line(
    store_url: str, clock: VirtualClock
) -> None:
    agents = CycleAgents()
    gw = await open_cycle(store_url, clock, agents, maxHops=3)
    try:
        sent = await gw.call_tool(
            OPERATOR, "sessions_send", {"sessionKey": A, "message": "loop", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        timeline = await gw.timeline(B)
        chained = [entry for entry in timeline.entries if entry.kind != "session"]
        assert chained, "B took part in the chain"
        assert {entry.trace_id for entry in chained} == {sent["runId"]}
        run_b = next(e for e in chained if e.event == "RunStarted" and e.data["session_key"] == B)
        assert (run_b.parent_run_id, run_b.hops) == (sent["runId"], 2)
        # B's transcript lines carry it too: the line its run appended names that run.
        lines = [e for e in timeline.entries if e.event == "MessageAppended" and e.trace_id]
        assert {line.parent_run_id for line in lines} >= {run_b.aggregate_id}
        # The refusal at hop 3 (C's send) is not B's; C's timeline has it, with its chain.
        refused = [e for e in (await gw.timeline(C)).entries if e.kind == "refusal"]
        assert [(e.trace_id, e.hops) for e in refused] == [(sent["runId"], 3)]
    finally:
        await gw.close()


class SendThenWork(AgentRuntime):
    """A's agent sends to B, then works a minute before answering; B's just answers.

    It sends through its request, not through the gateway: a reopened gateway resumes A's
    run inside ``Gateway.open``, before the test could hand it the gateway."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.gateway: Gateway | None = None  # set by open_cycle; unused here
        self.results: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary" or request.session_key != A:
            return RunReply(text="REPLY_SKIP" if request.step == "reply_back" else "ok")
        assert request.call_tool is not None
        params = {"sessionKey": B, "message": "carry on", "timeoutSeconds": 0}
        self.results.append(await request.call_tool("sessions_send", params))
        await self.clock.sleep(60)
        return RunReply(text="sent")


async def test_a_run_dispatched_again_after_a_crash_does_not_repeat_its_sends(
    store_url: str, clock: VirtualClock
) -> None:
    # Simulator seed 200206: runs of a forwarding cycle in flight when the gateway stops
    # are dispatched again on reopen and forward again; each copy forked the chain with a
    # full hop budget of its own, so the work grew with every crash.
    if store_url == "memory":
        pytest.skip("a memory store cannot be reopened")
    first_agents = SendThenWork(clock)
    first = await open_cycle(store_url, clock, first_agents)  # type: ignore[arg-type]
    try:
        await first.call_tool(
            OPERATOR, "sessions_send", {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
        )
        await clock.advance(1)  # A sent to B and works on; the gateway stops
        assert len(first_agents.results) == 1
    finally:
        await first.close()

    agents = SendThenWork(clock)
    second = await open_cycle(store_url, clock, agents)  # type: ignore[arg-type]
    try:
        await clock.advance(120)
        await second.wait_idle()
        # A's run ran again and asked for the same send: it got the first one back.
        assert [r["runId"] for r in agents.results] == [first_agents.results[0]["runId"]]
        # And what became of its message, as recorded then (B was idle: started).
        started = {"status": "started", "mode": "announce"}
        assert [r["delivery"] for r in first_agents.results + agents.results] == [started] * 2
        assert [e.session_key for e in started_runs(second)].count(B) == 1
    finally:
        await second.close()
