"""OpenClaw conformance cases where we disagreed (issue 12 situation 5), and the
decisions that settle them: the report route is captured at spawn and routed from the
key when ``to`` is missing (decision 14), threads are kept (decision 15), and reply
cleaning strips the blanks after a ``[Tool Call: …]`` marker as OpenClaw does.

Cases from ``openclaw-conformance.md`` §E (announce target), §G (origin accountId) and
§6.8 of the behaviour notes (reply cleaning).
"""

from __future__ import annotations

from typing import Any

from sessionwire import Gateway, GatewayConfig
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
