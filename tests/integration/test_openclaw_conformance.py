"""OpenClaw conformance cases where we disagreed (issue 12 situation 5), and the
decisions that settle them: the report route is captured at spawn and routed from the
key when ``to`` is missing (decision 14), threads are kept (decision 15), and reply
cleaning strips the blanks after a ``[Tool Call: …]`` marker as OpenClaw does.

Cases from ``openclaw-conformance.md`` §E (announce target), §G (origin accountId) and
§6.8 of the behaviour notes (reply cleaning); then the cases no other test file covered
(B.8, D4.4, H.8, I.3, K.13–K.15). ``docs/conformance.md`` names the test of every case.
"""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.gateway_methods import GatewayMethods, SessionsListMethodParams
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.domain.session import InvalidPatch
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"


async def open_gateway(
    store_url: str, clock: VirtualClock, script: dict[str, Any]
) -> tuple[Gateway, CapturingDelivery]:
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 0}}}),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(script),
        delivery=delivery,
    )
    return gw, delivery


REPORT = {
    "rules": [
        {"step": "subagent_task", "reply": "done", "delaySeconds": 30},
        {"step": "subagent_announce", "reply": "the findings"},
    ]
}


def sent(delivery: CapturingDelivery) -> list[dict[str, Any]]:
    return delivery.sent


async def test_a_report_to_a_group_requester_without_to_is_routed_from_its_key(
    store_url: str, clock: VirtualClock
) -> None:
    requester = "agent:main:discord:group:req"
    gw, delivery = await open_gateway(store_url, clock, REPORT)
    try:
        # Recorded with its channel but no `to`: OpenClaw's A2A announce routes such a
        # session from its key; the report now does too (it was never delivered).
        await gw.record_message(requester, role="user", content="go", channel="discord")
        await gw.call_tool(requester, "sessions_spawn", {"task": "research"})
        await gw.wait_idle()
        await clock.advance(30)
        await gw.wait_idle()
        (report,) = sent(delivery)
        assert (report["channel"], report["to"]) == ("discord", "channel:req")
        assert report["sessionKey"] == requester
        assert "the findings" in report["message"]
    finally:
        await gw.close()


async def test_a_report_goes_where_it_was_asked_from_not_where_the_requester_is_now(
    store_url: str, clock: VirtualClock
) -> None:
    gw, delivery = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(
            MAIN, role="user", content="go", channel="whatsapp", to="+1555", account_id="kev"
        )
        await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"})
        await gw.wait_idle()
        # While the child works, the user writes from another channel.
        await gw.record_message(MAIN, role="user", content="hi", channel="telegram", to="+999")
        await clock.advance(30)
        await gw.wait_idle()
        (report,) = sent(delivery)
        assert (report["channel"], report["to"], report["accountId"]) == (
            "whatsapp",
            "+1555",
            "kev",
        )
    finally:
        await gw.close()


async def test_a_report_to_a_topic_keeps_its_thread(store_url: str, clock: VirtualClock) -> None:
    requester = "agent:main:telegram:group:-100123:topic:42"
    gw, delivery = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(requester, role="user", content="go", channel="telegram")
        await gw.call_tool(requester, "sessions_spawn", {"task": "research"})
        await gw.wait_idle()
        await clock.advance(30)
        await gw.wait_idle()
        (report,) = sent(delivery)
        assert (report["channel"], report["to"], report["threadId"]) == (
            "telegram",
            "group:-100123",
            "42",
        )
    finally:
        await gw.close()


async def test_an_announce_to_a_topic_keeps_its_thread(store_url: str, clock: VirtualClock) -> None:
    target = "agent:main:telegram:group:-100123:topic:42"
    script = {
        "rules": [
            {"step": "primary", "reply": "ok"},
            {"step": "announce", "reply": "posted to the topic"},
        ]
    }
    gw, delivery = await open_gateway(store_url, clock, script)
    try:
        await gw.record_message(target, role="user", content="hi", channel="telegram")
        await gw.record_message(MAIN, role="user", content="hi")
        await gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": target, "message": "ping", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        (announce,) = sent(delivery)
        assert (announce["to"], announce["threadId"], announce["message"]) == (
            "group:-100123",
            "42",
            "posted to the topic",
        )
    finally:
        await gw.close()


# The cases no other test file covered (docs/conformance.md names every case's test) -----


async def open_configured(
    store_url: str, clock: VirtualClock, script: dict[str, Any], config: dict[str, Any]
) -> tuple[Gateway, CapturingDelivery]:
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load(config),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(script),
        delivery=delivery,
    )
    return gw, delivery


SANDBOXED = {
    "agents": {"defaults": {"sandbox": {"mode": "all", "sessionToolsVisibility": "spawned"}}}
}


async def test_b8_a_sandboxed_requester_lists_only_what_it_spawned(
    store_url: str, clock: VirtualClock
) -> None:
    """B.8: a sandboxed requester's list is filtered to the sessions it spawned."""
    gw, _ = await open_configured(store_url, clock, REPORT, SANDBOXED)
    try:
        await gw.record_message(MAIN, role="user", content="go")
        await gw.record_message("discord:group:dev", role="user", content="hi", channel="discord")
        await gw.record_message("cron:job-1", role="user", content="tick")
        child = (await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"}))[
            "childSessionKey"
        ]
        await gw.wait_idle()
        listed = await gw.call_tool(MAIN, "sessions_list", {})
        assert [row["key"] for row in listed["sessions"]] == [child]
    finally:
        await gw.close()


class SilentFailure(AgentRuntime):
    """A runtime whose primary run raises an exception without a message."""

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "primary":
            raise RuntimeError()
        return RunReply(text="ANNOUNCE_SKIP")


async def test_d4_4_a_run_error_without_a_message_is_agent_error(
    store_url: str, clock: VirtualClock
) -> None:
    """D4.4: OpenClaw answers ``agent error`` when the wait reports an error without a
    message; so does a send whose runtime raised without one (its type is logged)."""
    gw = await Gateway.open(store=store_url, clock=clock, runtime=SilentFailure())
    try:
        await gw.record_message("cron:job-1", role="user", content="tick")
        result = await gw.call_tool(
            MAIN,
            "sessions_send",
            {"sessionKey": "cron:job-1", "message": "go", "timeoutSeconds": 5},
        )
        assert (result["status"], result["error"]) == ("error", "agent error")
    finally:
        await gw.close()


async def test_h8_the_report_route_is_trimmed(store_url: str, clock: VirtualClock) -> None:
    """H.8 and I.1: the requester's channel and account id are trimmed when the route is
    recorded, and the report goes to the trimmed route (captured at spawn, decision 14)."""
    gw, delivery = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(
            MAIN,
            role="user",
            content="go",
            channel=" whatsapp ",
            to="+1555",
            account_id=" acct-987 ",
        )
        await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"})
        await gw.wait_idle()
        await clock.advance(30)
        await gw.wait_idle()
        (report,) = sent(delivery)
        assert (report["channel"], report["to"], report["accountId"]) == (
            "whatsapp",
            "+1555",
            "acct-987",
        )
    finally:
        await gw.close()


async def test_i3_a_handled_report_is_not_announced_again_after_a_restart(
    store_url: str, clock: VirtualClock
) -> None:
    """I.3: a child whose report was delivered is not announced again when the gateway
    reopens (the spawn's end is an event in the log, not a flag in a registry file)."""
    if store_url == "memory":
        pytest.skip("a memory store does not survive its gateway")
    gw, delivery = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(MAIN, role="user", content="go", channel="whatsapp", to="+1555")
        await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"})
        await gw.wait_idle()
        await clock.advance(30)
        await gw.wait_idle()
        assert len(sent(delivery)) == 1
    finally:
        await gw.close()

    await clock.advance(3600)
    gw, again = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.wait_idle()
        await clock.advance(3600)
        await gw.wait_idle()
        assert sent(again) == []
        history = await gw.call_tool(MAIN, "sessions_history", {"sessionKey": "main"})
        reports = [m for m in history["messages"] if "the findings" in str(m["content"])]
        assert len(reports) == 1
    finally:
        await gw.close()


async def test_k13_sessions_list_by_spawned_by_lists_the_children(
    store_url: str, clock: VirtualClock
) -> None:
    """K.13: ``sessions.list {spawnedBy}`` lists the sessions that requester spawned,
    whichever way the requester is named."""
    gw, _ = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(MAIN, role="user", content="go")
        await gw.record_message("cron:job-1", role="user", content="tick")
        child = (await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"}))[
            "childSessionKey"
        ]
        await gw.wait_idle()
        methods = GatewayMethods(internals(gw))
        for spawner in ("agent:main:main", "main"):
            listed = await methods.sessions_list(
                SessionsListMethodParams(spawnedBy=spawner, includeGlobal=True, includeUnknown=True)
            )
            assert [row.key for row in listed.sessions] == [child]
        nobody = await methods.sessions_list(SessionsListMethodParams(spawnedBy="cron:job-1"))
        assert nobody.sessions == []
    finally:
        await gw.close()


async def test_k15_a_patched_model_is_the_sessions_model(
    store_url: str, clock: VirtualClock
) -> None:
    """K.15: ``sessions.patch {model}`` sets the session's model override; the row shows
    it and ``null`` clears it (OpenClaw splits it into model and provider overrides)."""
    gw, _ = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        patched = await gw.patch_session("main", model="anthropic/claude-haiku-4-5")
        assert patched["entry"]["model"] == "anthropic/claude-haiku-4-5"
        (row,) = (await gw.call_tool(MAIN, "sessions_list", {}))["sessions"]
        assert row["model"] == "anthropic/claude-haiku-4-5"
        await gw.patch_session("main", model=None)
        (row,) = (await gw.call_tool(MAIN, "sessions_list", {}))["sessions"]
        assert row.get("model") is None
    finally:
        await gw.close()


async def test_k14_spawned_by_is_recorded_by_spawns_only(
    store_url: str, clock: VirtualClock
) -> None:
    """K.14: OpenClaw lets ``sessions.patch`` set ``spawnedBy`` on sub-agent keys only.
    Here ``spawnedBy`` is recorded by ``sessions_spawn`` alone: patching it is refused on
    any key, and nothing is written."""
    gw, _ = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(MAIN, role="user", content="go")
        child = (await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"}))[
            "childSessionKey"
        ]
        await gw.wait_idle()
        before = store_of(gw).read_model_snapshot()
        for key in (child, MAIN):
            with pytest.raises(InvalidPatch, match="unknown session field 'spawnedBy'"):
                await gw.patch_session(key, spawnedBy="agent:main:main")
        assert store_of(gw).read_model_snapshot() == before
        spawned = await GatewayMethods(internals(gw)).sessions_list(
            SessionsListMethodParams(spawnedBy=MAIN)
        )
        assert [row.key for row in spawned.sessions] == [child]
    finally:
        await gw.close()


async def test_k5_sessions_list_includes_global_only_when_asked(
    store_url: str, clock: VirtualClock
) -> None:
    """K.3 and K.5: ``sessions.list`` leaves ``global`` out by default; with
    ``includeGlobal`` and ``limit: 1`` it is the newest row and the only one."""
    gw, _ = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        await clock.advance(5)
        await gw.record_message("global", role="user", content="hi")
        methods = GatewayMethods(internals(gw))
        default = await methods.sessions_list(SessionsListMethodParams())
        assert [row.key for row in default.sessions] == [MAIN]
        newest = await methods.sessions_list(SessionsListMethodParams(includeGlobal=True, limit=1))
        assert [row.key for row in newest.sessions] == ["global"]
    finally:
        await gw.close()


async def test_h5_reports_with_different_origins_are_separate_deliveries(
    store_url: str, clock: VirtualClock
) -> None:
    """H.5 and H.6: OpenClaw's collect queue must split a batch whose origins differ. Here
    every report is its own delivery (decision 13) on the route captured at its spawn
    (decision 14), so reports finishing together keep their own account ids."""
    gw, delivery = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(
            MAIN, role="user", content="a", channel="whatsapp", to="+1555", account_id="acct-a"
        )
        await gw.call_tool(MAIN, "sessions_spawn", {"task": "first"})
        await gw.record_message(
            MAIN, role="user", content="b", channel="whatsapp", to="+1555", account_id="acct-b"
        )
        await gw.call_tool(MAIN, "sessions_spawn", {"task": "second"})
        await gw.wait_idle()
        await clock.advance(30)  # both children end at the same moment
        await gw.wait_idle()
        assert sorted(report["accountId"] for report in sent(delivery)) == ["acct-a", "acct-b"]
    finally:
        await gw.close()


async def test_i2_a_spawn_in_flight_at_a_restart_reports_once_to_its_origin(
    store_url: str, clock: VirtualClock
) -> None:
    """I.2: after a restart the unfinished spawn still reports, once, to the requester's
    route recorded at spawn (OpenClaw reloads it from ``runs.json``; here it is in the log)."""
    if store_url == "memory":
        pytest.skip("a memory store does not survive its gateway")
    gw, before = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.record_message(
            MAIN, role="user", content="go", channel=" whatsapp ", to="+1555", account_id="kev"
        )
        await gw.call_tool(MAIN, "sessions_spawn", {"task": "research", "runTimeoutSeconds": 600})
        await gw.wait_idle()
        await clock.advance(10)  # the child is still working when the gateway stops
    finally:
        await gw.close()
    assert sent(before) == []

    await clock.advance(20)
    gw, after = await open_gateway(store_url, clock, REPORT)
    try:
        await gw.wait_idle()
        await clock.advance(60)
        await gw.wait_idle()
        (report,) = sent(after)
        assert (report["channel"], report["to"], report["accountId"]) == (
            "whatsapp",
            "+1555",
            "kev",
        )
        assert "the findings" in report["message"]
    finally:
        await gw.close()
