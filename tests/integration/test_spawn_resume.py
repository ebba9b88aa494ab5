"""Finished spawns are not pending work: a reopened gateway resumes only unfinished ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.orchestration.spawns import SpawnDriver
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "Result: done\nNotes: none"},
    ]
}


async def status(gateway: Gateway, run_id: str) -> str | None:
    run = await internals(gateway).run_engine.load(UUID(run_id))
    return None if run is None else run.state.status


def archiving(minutes: float) -> GatewayConfig:
    return GatewayConfig.load(
        {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": minutes}}}}
    )


@pytest.mark.parametrize(
    ("config", "cleanup", "pending"),
    [
        (archiving(0), "keep", 0),  # kept for good: done once announced
        (archiving(60), "delete", 0),  # deleted once announced
        (archiving(60), "keep", 1),  # its archive timer is still to run
    ],
    ids=["keep-archiving-off", "delete", "keep-archive-later"],
)
async def test_only_unfinished_spawns_are_pending(
    store_url: str, clock: VirtualClock, config: GatewayConfig, cleanup: str, pending: int
) -> None:
    gateway = await Gateway.open(
        config=config,
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        delivery=CapturingDelivery(),
    )
    try:
        params: dict[str, Any] = {"task": "sum up", "cleanup": cleanup}
        assert (await gateway.call_tool("main", "sessions_spawn", params))["status"] == "accepted"
        await gateway.wait_idle()
        still = store_of(gateway).pending_work("spawn", SpawnDriver.pending_statuses)
        assert len(still) == pending
    finally:
        await gateway.close()


async def test_a_send_in_flight_in_a_child_archived_while_down_is_not_dispatched_again(
    store_url: str,
) -> None:
    # Simulator seed 101428: a send queued in a sub-agent's child, the gateway stops, and
    # reopens after the child's archive time. The late archive comes first: the run is
    # never handed to the agent of the (now archived) child.
    if store_url == "memory":
        pytest.skip("a memory store cannot be reopened")
    script = {
        "rules": [
            {"step": "primary", "delaySeconds": 30, "reply": "on it"},
            {"step": "reply_back", "reply": "REPLY_SKIP"},
            {"step": "announce", "reply": "ANNOUNCE_SKIP"},
            *SCRIPT["rules"],
        ]
    }
    start = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    clock = VirtualClock(start=start)
    first = await Gateway.open(
        config=archiving(1),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(script),
        delivery=CapturingDelivery(),
    )
    try:
        spawned = await first.call_tool("main", "sessions_spawn", {"task": "sum up"})
        await first.wait_idle()
        child = spawned["childSessionKey"]
        sent = await first.call_tool(
            "main", "sessions_send", {"sessionKey": child, "message": "more", "timeoutSeconds": 0}
        )
        await clock.advance(0)  # dispatched: the child's agent works on it as we stop
        run_id = sent["runId"]
        assert await status(first, run_id) == "running"
    finally:
        await first.close()

    later = VirtualClock(start=start + timedelta(minutes=2))  # past the archive time
    runtime = ScriptedRuntime.from_dict(script)
    second = await Gateway.open(
        config=archiving(1),
        store=store_url,
        clock=later,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )
    try:
        await later.run_until_idle()
        await second.wait_idle()
        assert [call for call in runtime.calls if call.session_key == child] == []
        assert await status(second, run_id) == "error"
        session = store_of(second).session(child)
        assert session is not None
        assert session.state.status == "archived"
    finally:
        await second.close()
