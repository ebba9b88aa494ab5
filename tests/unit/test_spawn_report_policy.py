"""A sub-agent's report and its requester's send policy (decision 10), at unit speed:
found by mutation testing (docs/testing.md "What mutation testing left"), since no
simulated session has a policy that denies, so the check was never read there."""

from __future__ import annotations

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

RULES = [
    {"step": "subagent_task", "reply": "done"},
    {"step": "subagent_announce", "reply": "Result: all done"},
    {"reply": "ok"},
]


@pytest.mark.parametrize("denied", [True, False], ids=["denied", "allowed"])
async def test_a_report_goes_to_the_requesters_channel_unless_its_policy_denies(
    denied: bool,
) -> None:
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load({}),
        store="memory",
        clock=VirtualClock(),
        runtime=ScriptedRuntime.from_dict({"rules": RULES}),
        delivery=delivery,
    )
    try:
        await gw.record_message("main", role="user", content="hi", channel="whatsapp", to="+1555")
        if denied:
            await gw.patch_session("main", sendPolicy="deny")
        spawned = await gw.call_tool("main", "sessions_spawn", {"task": "work"})
        assert spawned["status"] == "accepted", spawned
        await gw.wait_idle()
    finally:
        await gw.close()

    sent = [(d["channel"], d["to"], "all done" in d["message"]) for d in delivery.sent]
    assert sent == ([] if denied else [("whatsapp", "+1555", True)])
