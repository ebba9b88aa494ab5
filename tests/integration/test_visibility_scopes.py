"""Visibility scopes through the tools on every store (decision 28): a spawn tree is
reached transitively, a spawn records the spawner's own lineage, refusals are recorded
with the rule that made them, and the list says its scope.

Nested spawns are not open to agents yet (sub-agents have no sessions_spawn), so the
deeper levels are opened here the way a spawn opens them: ``Session.open`` with
``spawned_by`` and ``lineage``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.domain.session import Session
from sessionwire.testing import ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MAIN = "agent:main:main"
DEV = "agent:main:discord:group:dev"
CRON = "agent:main:cron:job"
KID = "agent:main:cron:kid"  # spawned by dev (a session of any kind may be spawned)
GRANDKID = "agent:main:cron:grandkid"  # spawned by kid, so in dev's tree too
SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
        {"reply": "ok"},
    ]
}


@pytest.fixture
async def gw(store_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Gateway]:
    gateway = await Gateway.open(
        config=GatewayConfig.load(getattr(request, "param", {})),
        store=store_url,
        clock=VirtualClock(start=START),
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    for key in (MAIN, DEV, CRON):
        await gateway.record_message(key, role="user", content=f"line of {key}")
    store = store_of(gateway)
    for key, parent, lineage in ((KID, DEV, ()), (GRANDKID, KID, (DEV,))):
        store.save(
            Session.open(
                key=key,
                session_id=uuid4(),
                agent_id="main",
                at=START,
                spawned_by=parent,
                lineage=lineage,
            )
        )
        await gateway.record_message(key, role="user", content=f"line of {key}")
    yield gateway
    await gateway.close()


def keys(listed: dict[str, Any]) -> set[str]:
    return {row["key"] for row in listed["sessions"]}


async def test_tree_reaches_the_whole_spawn_tree_and_nothing_else(gw: Gateway) -> None:
    listed = await gw.call_tool(DEV, "sessions_list", {})
    assert keys(listed) == {DEV, KID, GRANDKID}
    assert listed["visibility"]["mode"] == "tree"
    deep = await gw.call_tool(DEV, "sessions_history", {"sessionKey": GRANDKID})
    assert deep["messages"][0]["content"][0]["text"] == f"line of {GRANDKID}"
    # From the middle of the tree: itself and below, not its parent.
    assert keys(await gw.call_tool(KID, "sessions_list", {})) == {KID, GRANDKID}
    up = await gw.call_tool(KID, "sessions_history", {"sessionKey": DEV})
    assert up["status"] == "forbidden"
    # Main reaches its whole agent.
    assert keys(await gw.call_tool(MAIN, "sessions_list", {})) == {
        "main",
        DEV,
        CRON,
        KID,
        GRANDKID,
    }


async def test_a_refusal_is_recorded_with_the_scope_rule(gw: Gateway) -> None:
    refused = await gw.call_tool(DEV, "sessions_history", {"sessionKey": CRON})
    assert refused["status"] == "forbidden"
    events = [e for _, e in store_of(gw).events() if type(e).__name__ == "AccessRefused"]
    assert [(e.check, e.rule, e.target_key) for e in events] == [
        ("visibility", "tools.sessions.visibility", CRON)
    ]


@pytest.mark.parametrize(
    "gw",
    [{"agents": {"list": [{"id": "main", "tools": {"sessions": {"visibility": "self"}}}]}}],
    indirect=True,
)
async def test_a_per_agent_scope_wins_and_is_the_recorded_rule(gw: Gateway) -> None:
    assert keys(await gw.call_tool(DEV, "sessions_list", {})) == {DEV}
    await gw.call_tool(MAIN, "sessions_history", {"sessionKey": DEV})
    events = [e for _, e in store_of(gw).events() if type(e).__name__ == "AccessRefused"]
    assert [(e.check, e.rule) for e in events] == [
        ("visibility", "agents.list[].tools.sessions.visibility")
    ]


async def test_a_spawn_records_the_spawners_lineage(gw: Gateway) -> None:
    spawned = await gw.call_tool(GRANDKID, "sessions_spawn", {"task": "go deeper"})
    assert spawned["status"] == "accepted", spawned
    child = store_of(gw).session(spawned["childSessionKey"])
    assert child is not None
    assert child.state.spawn_ancestors() == (GRANDKID, KID, DEV)
    await gw.wait_idle()
    assert spawned["childSessionKey"] in keys(await gw.call_tool(DEV, "sessions_list", {}))
