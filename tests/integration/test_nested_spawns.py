"""Nested spawns (decision 30): ``agents.defaults.subagents.maxSpawnDepth`` (1-5, default
1: a sub-agent spawns nothing) and ``maxChildrenPerAgent`` (default 5 children whose task
still runs). The depth is recorded on each spawn (``SubagentSpawned.depth``), so a child
session's key never decides what it may do. Memory, SQLite and PostgreSQL; virtual time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from reader_trips import count_reads_of
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.context import Requester, access_policy
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock


def spawn(task: str) -> dict[str, Any]:
    return {"tool": "sessions_spawn", "params": {"task": task}}


# "level N" spawns "level N+1" from inside its turn; "leaf" and "slow" only answer.
RULES: list[dict[str, Any]] = [
    {"step": "subagent_task", "match": "^level 1", "tools": [spawn("level 2")]},
    {"step": "subagent_task", "match": "^level 2", "tools": [spawn("level 3")]},
    {"step": "subagent_task", "match": "^level 3", "tools": [spawn("leaf")]},
    {"step": "subagent_task", "match": "^slow", "reply": "slow done", "delaySeconds": 60},
    {"step": "subagent_task", "reply": "done"},
    {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
]


@asynccontextmanager
async def gateway(
    store_url: str, clock: VirtualClock, subagents: dict[str, Any]
) -> AsyncIterator[tuple[Gateway, ScriptedRuntime]]:
    runtime = ScriptedRuntime.from_dict({"rules": RULES})
    gw = await Gateway.open(
        config=GatewayConfig.load(
            before_scopes({"agents": {"defaults": {"subagents": subagents}}})
        ),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )
    try:
        await gw.record_message("main", role="user", content="hi")
        yield gw, runtime
    finally:
        await gw.close()


def spawn_results(runtime: ScriptedRuntime) -> list[dict[str, Any]]:
    return [result for _, tool, result in runtime.tool_results if tool == "sessions_spawn"]


def depths(gw: Gateway) -> list[int]:
    return [
        event.depth
        for _, event in store_of(gw).events()
        if type(event).__name__ == "SubagentSpawned"
    ]


async def test_by_default_a_sub_agent_spawns_nothing(store_url: str, clock: VirtualClock) -> None:
    async with gateway(store_url, clock, {}) as (gw, runtime):
        await gw.call_tool("main", "sessions_spawn", {"task": "level 1"})
        await gw.wait_idle()
        (refused,) = spawn_results(runtime)
        assert refused["status"] == "forbidden"
        assert depths(gw) == [1]
        (task,) = [call for call in runtime.calls if call.step == "subagent_task"]
        assert "sessions_spawn" not in task.tools
        assert "sessions_yield" in task.tools


@pytest.mark.parametrize("max_depth", [2, 3])
async def test_children_nest_down_to_max_spawn_depth(
    store_url: str, clock: VirtualClock, max_depth: int
) -> None:
    async with gateway(store_url, clock, {"maxSpawnDepth": max_depth}) as (gw, runtime):
        await gw.call_tool("main", "sessions_spawn", {"task": "level 1"})
        await gw.wait_idle()
        assert depths(gw) == list(range(1, max_depth + 1))
        *accepted, refused = spawn_results(runtime)
        assert [result["status"] for result in accepted] == ["accepted"] * (max_depth - 1)
        # The leaf at the last level is refused like any sub-agent without the tool.
        assert refused["status"] == "forbidden"
        assert "sessions_spawn" in refused["error"]
        tasks = [call for call in runtime.calls if call.step == "subagent_task"]
        offered = ["sessions_spawn" in call.tools for call in tasks]
        assert offered == [True] * (max_depth - 1) + [False]


async def test_max_children_per_agent_caps_children_still_running(
    store_url: str, clock: VirtualClock
) -> None:
    async with gateway(store_url, clock, {"maxChildrenPerAgent": 2}) as (gw, _):
        first = await gw.call_tool("main", "sessions_spawn", {"task": "slow 1"})
        second = await gw.call_tool("main", "sessions_spawn", {"task": "slow 2"})
        third = await gw.call_tool("main", "sessions_spawn", {"task": "slow 3"})
        assert [first["status"], second["status"]] == ["accepted", "accepted"]
        assert third == {
            "status": "forbidden",
            "tool": "sessions_spawn",
            "error": "sessions_spawn has reached max active children for this session "
            "(2/2: agents.defaults.subagents.maxChildrenPerAgent)",
        }
        # Another session has its own children.
        other = await gw.call_tool("agent:main:cron:nightly", "sessions_spawn", {"task": "x"})
        assert other["status"] == "accepted"
        # Once the children's tasks end, the session may spawn again.
        await clock.advance(60)
        await gw.wait_idle()
        again = await gw.call_tool("main", "sessions_spawn", {"task": "slow 4"})
        assert again["status"] == "accepted"


async def test_default_max_children_is_five(store_url: str, clock: VirtualClock) -> None:
    async with gateway(store_url, clock, {}) as (gw, _):
        statuses = [
            (await gw.call_tool("main", "sessions_spawn", {"task": f"slow {n}"}))["status"]
            for n in range(6)
        ]
        assert statuses == ["accepted"] * 5 + ["forbidden"]


async def test_a_nested_child_is_in_every_spawners_tree(
    store_url: str, clock: VirtualClock
) -> None:
    # Visibility scopes (decision 28): each spawn records the spawner's own lineage, so
    # under the default `tree` a sub-agent reaches the children of its children.
    runtime = ScriptedRuntime.from_dict({"rules": RULES})
    gw = await Gateway.open(
        config=GatewayConfig.load({"agents": {"defaults": {"subagents": {"maxSpawnDepth": 3}}}}),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )
    try:
        await gw.record_message("main", role="user", content="hi")
        await gw.call_tool("main", "sessions_spawn", {"task": "level 1"})
        await gw.wait_idle()
        spawned = [
            (event.child_key, event.requester_key)
            for _, event in store_of(gw).events()
            if type(event).__name__ == "SubagentSpawned"
        ]
        (first, _), (second, _), (third, _) = spawned
        stored = store_of(gw).session(third)
        assert stored is not None
        assert stored.state.spawn_ancestors() == (second, first, "agent:main:main")
        # Sub-agents have no session tools by default: the policy they would be asked.
        config = GatewayConfig.load({})
        policy = access_policy(config, Requester.from_key(config.key_rules, first))
        assert policy.sees(stored.state.policy_target(config.key_rules))
        # Main reaches its agent anyway; a sibling tree would not.
        assert (await gw.call_tool("main", "sessions_history", {"sessionKey": third}))[
            "sessionKey"
        ] == third
    finally:
        await gw.close()


async def test_a_spawn_reads_as_much_after_many_children_as_the_first(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Finished children stay the requester's until archived (an hour): the cap counts
    # the spawns still running, not a read per child, so the eighth spawn (past the
    # default cap of 5 children, all finished) makes the reads the first made.
    async with gateway(store_url, clock, {}) as (gw, _):
        reads = count_reads_of("sessions_spawn", monkeypatch, gw)
        for n in range(8):
            assert (await gw.call_tool("main", "sessions_spawn", {"task": f"t{n}"}))[
                "status"
            ] == "accepted"
            await gw.wait_idle()
        assert len(reads) == 8
        assert reads[-1] == reads[0], reads
