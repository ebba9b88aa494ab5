"""sessions_yield (decision 26, ADR 0031): a turn ends and its session is woken by a new
turn when its sub-agents have reported (all, or any), or at the deadline — exactly once,
with each finished child's report, and the status of those still running.

Every example runs on the memory, SQLite and PostgreSQL stores, with scripted agents that
spawn and yield from inside their turn (ScriptedRuntime ``tools``) and virtual time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"


def spawn(task: str, **params: Any) -> dict[str, Any]:
    return {"tool": "sessions_spawn", "params": {"task": task, **params}}


def yield_(**params: Any) -> dict[str, Any]:
    return {"tool": "sessions_yield", "params": params}


# Children: "fast" answers at once, "slow" after 60 s, "hang" never (its run times out),
# "boom" fails; each announce step reports in sections.
CHILDREN: list[dict[str, Any]] = [
    {"step": "subagent_task", "match": "^fast", "reply": "fast done"},
    {"step": "subagent_task", "match": "^slow", "reply": "slow done", "delaySeconds": 60},
    {"step": "subagent_task", "match": "^hang", "reply": "never", "delaySeconds": 1e9},
    {"step": "subagent_task", "match": "^boom", "fail": "tool crashed"},
    {"step": "subagent_announce", "reply": "Result: {session} reported\nNotes: none"},
    {"step": "yield_wake", "reply": "woken and done"},
]


@dataclass
class Rig:
    gw: Gateway
    runtime: ScriptedRuntime
    clock: VirtualClock

    def events(self, name: str) -> list[Any]:
        return [e for _, e in store_of(self.gw).events() if type(e).__name__ == name]

    def wakes(self) -> list[Any]:
        return [call for call in self.runtime.calls if call.step == "yield_wake"]

    def results(self, tool: str) -> list[dict[str, Any]]:
        return [result for _, name, result in self.runtime.tool_results if name == tool]

    async def settle(self, seconds: float = 0) -> None:
        if seconds:
            await self.clock.advance(seconds)
        await self.gw.wait_idle()


@asynccontextmanager
async def rig(
    store_url: str,
    clock: VirtualClock,
    primary: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    children: list[dict[str, Any]] | None = None,
) -> AsyncIterator[Rig]:
    rules = [{"step": "primary", "session": MAIN, **rule} for rule in primary]
    runtime = ScriptedRuntime.from_dict({"rules": [*rules, *(children or CHILDREN)]})
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config or {})),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )
    try:
        yield Rig(gw=gw, runtime=runtime, clock=clock)
    finally:
        await gw.close()


async def ask(r: Rig, message: str = "go") -> dict[str, Any]:
    """A send into main from another agent (the turn that spawns and yields)."""
    await r.gw.record_message(MAIN, role="user", content="hi")
    return await r.gw.call_tool(
        "agent:other:main",
        "sessions_send",
        {"sessionKey": MAIN, "message": message, "timeoutSeconds": 0},
    )


A2A = {"tools": {"agentToAgent": {"enabled": True, "allow": ["*"]}}}


async def test_yield_wakes_once_when_all_children_reported(
    store_url: str, clock: VirtualClock
) -> None:
    primary = [{"tools": [spawn("fast one"), spawn("slow two", label="two"), yield_()]}]
    async with rig(store_url, clock, primary, A2A) as r:
        await ask(r)
        await r.settle()
        (yielded,) = r.results("sessions_yield")
        assert yielded["status"] == "yielded"
        assert yielded["waitFor"] == "all"
        assert sorted(str(c.get("label")) for c in yielded["children"]) == ["None", "two"]
        assert r.wakes() == []  # the fast child reported; the slow one still runs
        await r.settle(60)
        (wake,) = r.wakes()
        assert wake.session_key == MAIN
        assert "every sub-agent you waited for has finished" in wake.message
        assert wake.message.count("Status: ok") == 2
        assert "Still running" not in wake.message
        (woken,) = r.events("YieldWoken")
        assert woken.reason == "all"
        assert [report.status for report in woken.reports] == ["ok", "ok"]
        await r.settle(3600)
        assert len(r.wakes()) == 1  # exactly once
        run = await r.gw.run(str(woken.wake_run_id))
        assert run is not None
        assert run["status"] == "ok"
        assert run["step"] == "yield_wake"


async def test_wait_for_any_wakes_at_the_first_report_and_lists_the_rest(
    store_url: str, clock: VirtualClock
) -> None:
    primary = [{"tools": [spawn("slow a"), spawn("hang b"), yield_(waitFor="any")]}]
    async with rig(store_url, clock, primary, A2A) as r:
        await ask(r)
        await r.settle()
        assert r.wakes() == []
        await r.settle(60)
        (wake,) = r.wakes()
        assert "a sub-agent you waited for has finished" in wake.message
        assert wake.message.count("Status: ok") == 1
        assert "Still running:" in wake.message
        assert ": running" in wake.message
        (woken,) = r.events("YieldWoken")
        assert woken.reason == "any"
        assert len(woken.still_running) == 1


async def test_the_deadline_wakes_a_yield_whose_child_never_ends(
    store_url: str, clock: VirtualClock
) -> None:
    primary = [{"tools": [spawn("hang"), yield_(timeoutSeconds=120)]}]
    async with rig(store_url, clock, primary, A2A) as r:
        await ask(r)
        await r.settle(119)
        assert r.wakes() == []
        await r.settle(1)
        (wake,) = r.wakes()
        assert "timed out" in wake.message
        assert "running" in wake.message
        (woken,) = r.events("YieldWoken")
        assert woken.reason == "timeout"
        assert woken.reports == ()


async def test_the_runs_own_deadline_is_the_default_timeout(
    store_url: str, clock: VirtualClock
) -> None:
    primary = [{"tools": [spawn("hang", runTimeoutSeconds=10_000), yield_()]}]
    config = {**A2A, "agents": {"defaults": {"timeoutSeconds": 300}}}
    async with rig(store_url, clock, primary, config) as r:
        await ask(r)
        await r.settle(299)
        assert r.wakes() == []
        await r.settle(1)
        (woken,) = r.events("YieldWoken")
        assert woken.reason == "timeout"
        (yielded,) = r.events("RunYielded")
        (started,) = [e for e in r.events("RunStarted") if str(e.originator_id) == yielded.run_id]
        assert yielded.due_at == started.deadline_at


async def test_failed_and_timed_out_children_still_wake_with_their_status(
    store_url: str, clock: VirtualClock
) -> None:
    primary = [
        {"tools": [spawn("boom"), spawn("hang", runTimeoutSeconds=30), yield_(timeoutSeconds=900)]}
    ]
    async with rig(store_url, clock, primary, A2A) as r:
        await ask(r)
        await r.settle(30)
        (wake,) = r.wakes()
        assert "Status: error" in wake.message
        assert "tool crashed" in wake.message
        assert "Status: timeout" in wake.message
        (woken,) = r.events("YieldWoken")
        assert woken.reason == "all"


async def test_a_cancelled_child_still_wakes_the_yield(store_url: str, clock: VirtualClock) -> None:
    primary = [{"tools": [spawn("hang"), yield_()]}]
    async with rig(store_url, clock, primary, A2A) as r:
        await ask(r)
        await r.settle()
        (spawned,) = r.results("sessions_spawn")
        cancelled = await r.gw.cancel_run(spawned["runId"], "not needed")
        assert cancelled is not None
        assert cancelled["cancelled"] is True
        await r.settle()
        (wake,) = r.wakes()
        assert "Status: cancelled" in wake.message


async def test_each_report_reaches_one_wake_only(store_url: str, clock: VirtualClock) -> None:
    """Wake 1 (any) hands over the fast child's report; the slow child, listed as still
    running, finishes before the next yield: wake 2 carries its report, not the first."""
    primary = [{"tools": [spawn("fast a"), spawn("slow b"), yield_(waitFor="any")]}]
    rules = [
        {"step": "yield_wake", "match": "Still running", "tools": [spawn("slow c"), yield_()]},
        *CHILDREN,
    ]
    async with rig(store_url, clock, primary, A2A, children=rules) as r:
        await ask(r)
        await r.settle()
        await r.settle(60)
        await r.settle(60)
        first, _second = r.wakes()
        assert "fast a" not in first.message  # reports name sessions, not tasks
        first_woken, second_woken = r.events("YieldWoken")
        handed = [report.spawn_id for w in (first_woken, second_woken) for report in w.reports]
        assert len(handed) == len(set(handed)) == 3


async def test_yield_with_no_child_in_flight_is_an_error(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, []) as r:
        await r.gw.record_message(MAIN, role="user", content="hi")
        answer = await r.gw.call_tool("main", "sessions_yield", {})
        assert answer["status"] == "error"
        assert "no sub-agent of this session is in flight" in answer["error"]
        assert r.events("RunYielded") == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"waitFor": "some"}, 'waitFor must be "all" or "any"'),
        ({"waitFor": 3}, "waitFor must be a string"),
        ({"timeoutSeconds": "soon"}, "timeoutSeconds must be a number"),
        ({"acknowledgment": "ok"}, "unknown parameter 'acknowledgment'"),
    ],
)
async def test_bad_parameters_are_clear_errors(
    store_url: str, clock: VirtualClock, params: dict[str, Any], message: str
) -> None:
    async with rig(store_url, clock, []) as r:
        answer = await r.gw.call_tool("main", "sessions_yield", params)
        assert answer["status"] == "error"
        assert message in answer["error"]


async def test_an_announce_step_cannot_yield(store_url: str, clock: VirtualClock) -> None:
    children = [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "tools": [yield_()], "reply": "Result: done"},
    ]
    async with rig(store_url, clock, [{"tools": [spawn("x")]}], A2A, children=children) as r:
        await ask(r)
        await r.settle()
        (refused,) = r.results("sessions_yield")
        assert refused["status"] == "error"
        assert "a subagent_announce step cannot yield" in refused["error"]
        assert r.events("RunYielded") == []


async def test_a_second_yield_while_one_waits_is_an_error(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, []) as r:
        await r.gw.record_message(MAIN, role="user", content="hi")
        await r.gw.call_tool("main", "sessions_spawn", {"task": "hang"})
        first = await r.gw.call_tool("main", "sessions_yield", {"timeoutSeconds": 60})
        assert first["status"] == "yielded"
        second = await r.gw.call_tool("main", "sessions_yield", {})
        assert second["status"] == "error"
        assert "already waits" in second["error"]
        await r.settle(60)
        assert len(r.wakes()) == 1


async def test_a_yielding_sub_agent_pauses_and_reports_after_its_woken_turn(
    store_url: str, clock: VirtualClock
) -> None:
    config = {**A2A, "agents": {"defaults": {"subagents": {"maxSpawnDepth": 2}}}}
    children = [
        {"step": "subagent_task", "match": "^orchestrate", "tools": [spawn("slow w"), yield_()]},
        {"step": "yield_wake", "session": "agent:main:subagent:*", "reply": "synthesised"},
        *CHILDREN,
    ]
    primary = [{"tools": [spawn("orchestrate"), yield_()]}]
    async with rig(store_url, clock, primary, config, children=children) as r:
        await ask(r)
        await r.settle()
        assert r.wakes() == []
        await r.settle(60)
        child_wake, main_wake = r.wakes()
        assert child_wake.session_key.startswith("agent:main:subagent:")
        assert main_wake.session_key == MAIN
        # The orchestrator's report comes from its woken turn, after its worker's.
        (paused,) = r.events("SubagentRunYielded")
        assert paused.wake_run_id == child_wake.run_id
        assert "Status: ok" in main_wake.message


async def test_a_yield_survives_a_restart(tmp_path: Path, clock: VirtualClock) -> None:
    store = f"sqlite:///{tmp_path / 'yield.db'}"
    primary = [{"tools": [spawn("hang", runTimeoutSeconds=600), yield_(timeoutSeconds=300)]}]
    async with rig(store, clock, primary, A2A) as r:
        await ask(r)
        await r.settle(100)
        assert r.events("RunYielded")
        assert not r.wakes()
    # Closed with the yield waiting; reopened before its deadline, it waits for the rest.
    async with rig(store, clock, primary, A2A) as r:
        await r.settle(199)
        assert r.wakes() == []
        await r.settle(1)
        (wake,) = r.wakes()
        assert "timed out" in wake.message
    # Reopened once more: it woke already, so nothing wakes again.
    async with rig(store, clock, primary, A2A) as r:
        await r.settle(3600)
        assert r.wakes() == []
        assert len(r.events("YieldWoken")) == 1


async def test_a_yield_whose_deadline_passed_while_closed_wakes_at_reopen(
    tmp_path: Path, clock: VirtualClock
) -> None:
    store = f"sqlite:///{tmp_path / 'yield.db'}"
    primary = [{"tools": [spawn("hang", runTimeoutSeconds=6000), yield_(timeoutSeconds=300)]}]
    async with rig(store, clock, primary, A2A) as r:
        await ask(r)
        await r.settle()
    await clock.advance(1000)
    async with rig(store, clock, primary, A2A) as r:
        await r.settle()
        (wake,) = r.wakes()
        assert "timed out" in wake.message


async def test_the_yield_is_in_the_trace_and_the_timeline(
    store_url: str, clock: VirtualClock
) -> None:
    primary = [{"tools": [spawn("fast"), yield_()]}]
    async with rig(store_url, clock, primary, A2A) as r:
        await ask(r)
        await r.settle()
        (yielded,) = r.events("RunYielded")
        (woken,) = r.events("YieldWoken")
        assert yielded.trace_id is not None
        trace = await r.gw.trace(yielded.trace_id)
        nodes = {node.id: node for node in trace.nodes}
        node = nodes[str(yielded.originator_id)]
        assert node.kind == "yield"
        assert node.parent_id == yielded.run_id
        assert node.session_key == MAIN
        wake = nodes[str(woken.wake_run_id)]
        assert wake.kind == "run"
        assert wake.parent_id == yielded.run_id
        timeline = await r.gw.timeline(MAIN)
        lines = [entry.summary for entry in timeline.entries if entry.kind == "yield"]
        assert lines[0].startswith(f"run {yielded.run_id} yielded, waiting for all of: ")
        assert lines[1].startswith("yield woken (all): 1 report(s), 0 still running")
