"""The delivery outbox (contract §6 decision 13): a failed delivery is retried with
back-off on the gateway clock, across restarts, until delivered or abandoned.

Issue 12 situation 4: a channel down for a moment lost the sub-agent's report for good
(recorded, never delivered, not even after a restart).
"""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire import ChannelDelivery, Delivery, DeliveryRejected, Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.spawn import Spawn
from sessionwire.testing import ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
OPS = "agent:main:discord:group:ops"
SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "found it"},
        {"step": "subagent_announce", "reply": "the report"},
        {"step": "primary", "reply": "on it"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ops: deploy done"},
    ]
}


class FlakyChannel(ChannelDelivery):
    """A chat connector that is down for its first ``failures`` calls."""

    def __init__(self, failures: int = 0, *, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ConnectionError("channel unreachable")
        self.calls: list[Delivery] = []
        self.delivered: list[Delivery] = []

    async def deliver(self, delivery: Delivery) -> None:
        self.calls.append(delivery)
        if len(self.calls) <= self.failures:
            raise self.error
        self.delivered.append(delivery)


async def open_gateway(
    store_url: str, clock: VirtualClock, channel: ChannelDelivery, **deliveries: Any
) -> Gateway:
    config: dict[str, Any] = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
    if deliveries:
        config["deliveries"] = deliveries
    return await Gateway.open(
        config=GatewayConfig.load(config),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        delivery=channel,
    )


async def spawn_with_route(gw: Gateway) -> None:
    await gw.record_message(MAIN, role="user", content="hi", channel="whatsapp", to="+1555")
    result = await gw.call_tool(MAIN, "sessions_spawn", {"task": "research"})
    assert result["status"] == "accepted"
    await gw.wait_idle()


def outbox_events(gw: Gateway) -> list[Any]:
    return [
        event
        for _, event in store_of(gw).events()
        if type(event).__qualname__.startswith("OutboundDelivery.")
    ]


def names(events: list[Any]) -> list[str]:
    return [type(event).__name__ for event in events]


async def test_a_report_whose_channel_is_down_for_a_moment_is_delivered_later(
    store_url: str, clock: VirtualClock
) -> None:
    channel = FlakyChannel(failures=2)
    gw = await open_gateway(store_url, clock, channel)
    try:
        await spawn_with_route(gw)
        assert channel.delivered == []
        (announced,) = [
            e for _, e in store_of(gw).events() if isinstance(e, Spawn.SubagentAnnounced)
        ]
        assert announced.delivery_error == "ConnectionError: channel unreachable"
        assert announced.retry_delivery_id is not None

        await clock.advance(10)  # first retry: 10 s after the failure; still down
        await gw.wait_idle()
        assert len(channel.calls) == 2
        assert channel.delivered == []
        await clock.advance(19)  # the next waits 20 s
        await gw.wait_idle()
        assert channel.delivered == []
        await clock.advance(1)
        await gw.wait_idle()

        (report,) = channel.delivered
        assert (report.channel, report.to) == ("whatsapp", "+1555")
        assert "the report" in report.message
        # One delivery: the same idempotency key on every attempt.
        assert len({call.idempotency_key for call in channel.calls}) == 1
        events = outbox_events(gw)
        assert names(events) == [
            "DeliveryQueued",
            "DeliveryAttemptFailed",
            "DeliveryAttemptFailed",
            "DeliverySucceeded",
        ]
        assert [getattr(e, "attempt", None) for e in events[1:]] == [1, 2, 3]
        assert str(events[0].originator_id) == announced.retry_delivery_id
        # The requester's audit timeline shows every attempt.
        lines = [e.summary for e in (await gw.timeline(MAIN)).entries if e.kind == "delivery"]
        assert lines[0].startswith("subagent_report to whatsapp +1555 queued for retry")
        assert lines[1:] == [
            "delivery attempt 1 failed: ConnectionError: channel unreachable; next attempt due",
            "delivery attempt 2 failed: ConnectionError: channel unreachable; next attempt due",
            "delivered at attempt 3",
        ]
    finally:
        await gw.close()


async def test_a_failed_report_is_delivered_after_a_restart(
    store_url: str, clock: VirtualClock
) -> None:
    if store_url == "memory":
        pytest.skip("a memory store does not survive its gateway")
    down = FlakyChannel(failures=1_000)
    gw = await open_gateway(store_url, clock, down)
    try:
        await spawn_with_route(gw)
    finally:
        await gw.close()
    assert down.delivered == []
    assert len(down.calls) == 1

    await clock.advance(3600)  # the gateway was down for an hour; the retry is overdue
    up = FlakyChannel()
    gw = await open_gateway(store_url, clock, up)
    try:
        await gw.wait_idle()
        (report,) = up.delivered
        assert report.idempotency_key == down.calls[0].idempotency_key
        assert names(outbox_events(gw))[-1] == "DeliverySucceeded"
    finally:
        await gw.close()


async def test_an_a2a_announce_that_fails_is_retried(store_url: str, clock: VirtualClock) -> None:
    channel = FlakyChannel(failures=1)
    gw = await open_gateway(store_url, clock, channel)
    try:
        await gw.record_message(OPS, role="user", content="standup", channel="discord")
        await gw.record_message(MAIN, role="user", content="hi")
        sent = await gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": OPS, "message": "deploy", "timeoutSeconds": 0}
        )
        assert sent["status"] == "accepted"
        await gw.wait_idle()
        failed = [e for _, e in store_of(gw).events() if isinstance(e, Exchange.AnnounceFailed)]
        assert [e.retry_delivery_id is not None for e in failed] == [True]
        await clock.advance(10)
        await gw.wait_idle()
        (announce,) = channel.delivered
        assert (announce.channel, announce.to, announce.message) == (
            "discord",
            "channel:ops",
            "ops: deploy done",
        )
        assert channel.calls[0].idempotency_key == announce.idempotency_key
    finally:
        await gw.close()


async def test_a_delivery_that_never_succeeds_is_abandoned_after_the_limit(
    store_url: str, clock: VirtualClock
) -> None:
    channel = FlakyChannel(failures=1_000)
    gw = await open_gateway(
        store_url, clock, channel, firstRetrySeconds=10, maxRetrySeconds=40, abandonAfterSeconds=100
    )
    try:
        await spawn_with_route(gw)
        for _ in range(12):
            await clock.advance(10)
            await gw.wait_idle()
        events = outbox_events(gw)
        # Attempts at 0, 10, 30, 70 s; the next (110 s) would be past 100 s: abandoned.
        assert names(events) == ["DeliveryQueued"] + ["DeliveryAttemptFailed"] * 3 + [
            "DeliveryAbandoned"
        ]
        assert len(channel.calls) == 4
        abandoned = events[-1]
        assert abandoned.attempt == 4
        assert "100s" in abandoned.reason
    finally:
        await gw.close()


async def test_a_permanent_rejection_is_abandoned_at_once(
    store_url: str, clock: VirtualClock
) -> None:
    channel = FlakyChannel(failures=1, error=DeliveryRejected("chat deleted"))
    gw = await open_gateway(store_url, clock, channel)
    try:
        await spawn_with_route(gw)
        assert names(outbox_events(gw)) == ["DeliveryQueued", "DeliveryAbandoned"]
        await clock.advance(3600)
        await gw.wait_idle()
        assert len(channel.calls) == 1
    finally:
        await gw.close()
