"""Deadlines are facts (contract §6 decision 16, issue 12 situation 2).

A run's deadline is recorded when it starts. A gateway that reopens after it records the
run as timed out and never hands it to an agent, however long it was down; the exchange
or spawn then carries on as after any timeout. Archive timers fire once, late.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LATER = timedelta(days=30)
SLOW = {
    "rules": [
        {"step": "primary", "delaySeconds": 300, "reply": "deployed"},
        {"step": "subagent_task", "delaySeconds": 300, "reply": "deployed"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_announce", "reply": "Result: {message}"},
    ]
}
ROUTE = {"channel": "whatsapp", "to": "+1555", "chat_type": "direct"}


def names(gateway: Gateway, aggregate_id: Any) -> list[str]:
    return [
        type(event).__name__
        for _, event in store_of(gateway).events()
        if str(event.originator_id) == str(aggregate_id)
    ]


def events(gateway: Gateway, name: str) -> list[Any]:
    return [event for _, event in store_of(gateway).events() if type(event).__name__ == name]


async def _open(store_url: str, clock: VirtualClock, runtime: ScriptedRuntime) -> Gateway:
    return await Gateway.open(
        config=GatewayConfig(),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )


@pytest.fixture
def reopenable(store_url: str) -> str:
    if store_url == "memory":
        pytest.skip("a memory store cannot be reopened")
    return store_url


async def test_a_send_in_flight_reopened_30_days_later_is_timed_out_not_dispatched(
    reopenable: str,
) -> None:
    clock = VirtualClock(start=START)
    first = await _open(reopenable, clock, ScriptedRuntime.from_dict(SLOW))
    try:
        await first.record_message("main", role="user", content="hi")
        await first.record_message("agent:main:ops", role="user", content="hi")
        sent = await first.call_tool(
            "main",
            "sessions_send",
            {"sessionKey": "agent:main:ops", "message": "deploy prod now", "timeoutSeconds": 0},
        )
        await clock.advance(10)  # dispatched: the agent works on it (300 s) as we stop
        run_id = sent["runId"]
        assert names(first, run_id) == ["RunStarted", "RunDispatched"]
    finally:
        await first.close()

    later = VirtualClock(start=START + LATER)
    runtime = ScriptedRuntime.from_dict(SLOW)
    second = await _open(reopenable, later, runtime)
    try:
        await later.run_until_idle()
        await second.wait_idle()

        assert [call.message for call in runtime.calls if call.step == "primary"] == []
        assert names(second, run_id) == ["RunStarted", "RunDispatched", "RunTimedOut"]
        (timed_out,) = events(second, "RunTimedOut")
        assert timed_out.timestamp == START + LATER
        # The exchange proceeds as after any timeout: no reply, so it closes, saying why.
        closed = [e.reason for e in events(second, "ExchangeClosed")]
        assert closed == ["the target's run failed (run timed out after 600s)"]
        history = await second.call_tool(
            "main", "sessions_history", {"sessionKey": "agent:main:ops"}
        )
        texts = [m["content"][0]["text"] for m in history["messages"]]
        assert texts.count("deploy prod now") == 1  # appended at its one dispatch only
        # The fact it was decided on: the deadline recorded when the run started.
        (started,) = [e for e in events(second, "RunStarted") if str(e.originator_id) == run_id]
        assert started.deadline_at == int((START + timedelta(seconds=600)).timestamp() * 1000)
    finally:
        await second.close()


async def test_a_queued_run_past_its_deadline_is_never_dispatched(reopenable: str) -> None:
    clock = VirtualClock(start=START)
    first = await _open(reopenable, clock, ScriptedRuntime.from_dict(SLOW))
    try:
        await first.record_message("main", role="user", content="hi")
        await first.record_message("agent:main:ops", role="user", content="hi")
        ids = []
        for message in ("first", "second"):
            sent = await first.call_tool(
                "main",
                "sessions_send",
                {"sessionKey": "agent:main:ops", "message": message, "timeoutSeconds": 0},
            )
            ids.append(sent["runId"])
        await clock.advance(0)  # "first" runs, "second" waits in the session's mailbox
        assert names(first, ids[1]) == ["RunStarted"]
    finally:
        await first.close()

    later = VirtualClock(start=START + LATER)
    runtime = ScriptedRuntime.from_dict(SLOW)
    second = await _open(reopenable, later, runtime)
    try:
        await later.run_until_idle()
        await second.wait_idle()
        assert runtime.calls == []
        assert names(second, ids[1]) == ["RunStarted", "RunTimedOut"]
    finally:
        await second.close()


async def test_a_spawn_in_flight_reopened_30_days_later_reports_a_timeout(
    reopenable: str,
) -> None:
    clock = VirtualClock(start=START)
    first = await _open(reopenable, clock, ScriptedRuntime.from_dict(SLOW))
    try:
        await first.record_message("main", role="user", content="hi", **ROUTE)
        spawned = await first.call_tool("main", "sessions_spawn", {"task": "deploy prod now"})
        assert spawned["status"] == "accepted", spawned
        await clock.advance(10)
    finally:
        await first.close()

    later = VirtualClock(start=START + LATER)
    runtime = ScriptedRuntime.from_dict(SLOW)
    delivery = CapturingDelivery()
    second = await Gateway.open(
        config=GatewayConfig(),
        store=reopenable,
        clock=later,
        runtime=runtime,
        delivery=delivery,
    )
    try:
        await later.run_until_idle(within=timedelta(minutes=1))
        await second.wait_idle()
        assert [call.step for call in runtime.calls] == ["subagent_announce"]
        (report,) = delivery.sent
        assert "Status: timeout" in report["message"]
        assert len(events(second, "SubagentAnnounced")) == 1
    finally:
        await second.close()


async def test_an_archive_timer_due_during_downtime_fires_once_late(reopenable: str) -> None:
    quick = {"rules": [{"step": "subagent_task", "reply": "done"}]}
    clock = VirtualClock(start=START)
    first = await _open(reopenable, clock, ScriptedRuntime.from_dict(quick))
    try:
        await first.record_message("main", role="user", content="hi", **ROUTE)
        child = (await first.call_tool("main", "sessions_spawn", {"task": "t"}))["childSessionKey"]
        await clock.advance(0)
        await first.wait_idle()
    finally:
        await first.close()

    for reopen in (LATER, LATER + timedelta(days=1)):
        later = VirtualClock(start=START + reopen)
        gateway = await _open(reopenable, later, ScriptedRuntime.from_dict(quick))
        try:
            await later.run_until_idle()
            await gateway.wait_idle()
            archived = events(gateway, "SessionArchived")
            assert [e.timestamp for e in archived] == [START + LATER]
            assert [e.originator_id for e in archived] == [
                store_of(gateway).session(child).id  # type: ignore[union-attr]
            ]
        finally:
            await gateway.close()
