"""Finished spawns are not pending work: a reopened gateway resumes only unfinished ones."""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.application.orchestration.spawns import SpawnDriver
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "Result: done\nNotes: none"},
    ]
}


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
        still = gateway.store.pending_work("spawn", SpawnDriver.pending_statuses)
        assert len(still) == pending
    finally:
        await gateway.close()
