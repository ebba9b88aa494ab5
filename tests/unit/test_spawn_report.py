"""A sub-agent's report at unit speed: its requester's send policy (decision 10) and its
stats line. Found by mutation testing (docs/testing.md "What mutation testing left"):
no simulated session has a policy that denies, and no simulated agent reads a report."""

from __future__ import annotations

import pytest
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.application.ports.runtime import AgentRuntime
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
        history = await gw.call_tool("main", "sessions_history", {"sessionKey": "main"})
    finally:
        await gw.close()

    sent = [(d["channel"], d["to"], "all done" in d["message"]) for d in delivery.sent]
    assert sent == ([] if denied else [("whatsapp", "+1555", True)])
    # Delivered or not, the report is a line of the requester's own transcript.
    reports = [
        message["role"]
        for message in history["messages"]
        if any("all done" in block.get("text", "") for block in message["content"])
    ]
    assert reports == ["assistant"]


class Worker(AgentRuntime):
    """A sub-agent's task works 90 seconds on the gateway's clock."""

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            await request.clock.sleep(90)
            return RunReply(text="done")
        return RunReply(text="Result: all done" if "announce" in request.step else "ok")


async def test_a_reports_stats_give_the_time_the_task_ran() -> None:
    delivery = CapturingDelivery()
    clock = VirtualClock()
    gw = await Gateway.open(
        config=GatewayConfig.load({}),
        store="memory",
        clock=clock,
        runtime=Worker(),
        delivery=delivery,
    )
    try:
        await gw.record_message("main", role="user", content="hi", channel="whatsapp", to="+1555")
        spawned = await gw.call_tool("main", "sessions_spawn", {"task": "work"})
        assert spawned["status"] == "accepted", spawned
        await clock.advance(91)
        await gw.wait_idle()
    finally:
        await gw.close()

    [report] = delivery.sent
    assert "Stats: runtime 1m30s" in report["message"], report["message"]


async def test_reopening_archives_only_the_children_whose_archive_time_has_passed() -> None:
    # archive_overdue is what a reopen runs first; called here on a live gateway, an
    # hour before the child's archive time, it must leave the child alone.
    from sessionwire.adapters.testkit.internals import internals

    clock = VirtualClock()
    gw = await Gateway.open(
        config=GatewayConfig.load({}),
        store="memory",
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": RULES}),
        delivery=CapturingDelivery(),
    )
    try:
        await gw.record_message("main", role="user", content="hi")
        spawned = await gw.call_tool("main", "sessions_spawn", {"task": "work"})
        await gw.wait_idle()
        spawns = internals(gw).spawns
        assert await spawns.archive_overdue() == 0
        listed = await gw.call_tool("main", "sessions_list", {})
        assert spawned["childSessionKey"] in [row["key"] for row in listed["sessions"]]
    finally:
        await gw.close()
