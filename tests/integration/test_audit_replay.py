"""Auditing a session: its timeline, and its state at a past version or instant.

Every example runs on the memory, SQLite and PostgreSQL stores. Past states are rebuilt
from the events alone, and the answers must match what the gateway showed at the time;
an audit never calls the agent runtime, delivers anything or writes an event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, SyncGateway
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.audit.state import SessionNotRecorded
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
A = "discord:group:a"
A_KEY = "agent:main:discord:group:a"
B = "discord:group:b"
B_KEY = "agent:main:discord:group:b"
SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "pong"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "all done"},
        {"step": "subagent_task", "reply": "found it"},
        {"step": "subagent_announce", "reply": "Found it."},
    ]
}


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime.from_dict(SCRIPT)


@pytest.fixture
def delivery() -> CapturingDelivery:
    return CapturingDelivery()


@pytest.fixture
async def gw(
    store_url: str, clock: VirtualClock, runtime: ScriptedRuntime, delivery: CapturingDelivery
) -> AsyncIterator[Gateway]:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=delivery,
    )
    yield gateway
    await gateway.close()


async def say(gw: Gateway, key: str, text: str, **route: Any) -> None:
    await gw.record_message(key, role="user", content=text, **route)


async def test_every_past_version_matches_what_the_gateway_showed_then(
    gw: Gateway, clock: VirtualClock
) -> None:
    seen: dict[int, tuple[Any, list[dict[str, Any]]]] = {}

    def remember() -> None:
        stored = store_of(gw).session(A_KEY)
        assert stored is not None
        history = store_of(gw).transcript(stored.id, limit=1000, include_tools=True)
        seen[stored.version] = (stored.state, [json.loads(m) for m in history])

    await say(gw, A, "hello", channel="discord", chat_type="group", to="channel:a")
    remember()
    await clock.advance(30)
    await gw.patch_session(A, label="ops", sendPolicy="deny")
    remember()
    await clock.advance(30)
    await gw.record_message(
        A, role="assistant", content="hi", usage={"input": 3, "output": 4}, model="m1"
    )
    remember()
    await clock.advance(30)
    await say(gw, A, "bye", display_name="#a")
    remember()

    assert sorted(seen) == [2, 3, 4, 5]
    for version, (row, transcript) in seen.items():
        past = await gw.session_as_of(A, version=version)
        assert (past.version, past.latest_version) == (version, 5)
        assert past.row == row
        assert past.transcript == transcript
    opened = await gw.session_as_of(A, version=1)
    assert opened.transcript == []
    assert opened.row.message_count == 0
    assert opened.recorded_at == START


async def test_state_at_an_instant_is_the_last_version_recorded_by_then(
    gw: Gateway, clock: VirtualClock
) -> None:
    await say(gw, A, "one")
    await clock.advance(60)
    await say(gw, A, "two")
    await clock.advance(60)
    await say(gw, A, "three")

    just_before_two = await gw.session_as_of(A, at=START + timedelta(seconds=59))
    assert [m["content"][0]["text"] for m in just_before_two.transcript] == ["one"]
    at_two = await gw.session_as_of(A, at=START + timedelta(seconds=60))
    assert at_two.version == 3
    assert at_two.row.updated_at == int((START + timedelta(seconds=60)).timestamp() * 1000)
    later = await gw.session_as_of(A, at=START + timedelta(days=1))
    assert later.version == later.latest_version == 4
    with pytest.raises(SessionNotRecorded, match="did not exist at"):
        await gw.session_as_of(A, at=START - timedelta(seconds=1))


async def test_an_instant_deep_in_a_long_stream(gw: Gateway, clock: VirtualClock) -> None:
    for n in range(300):
        await say(gw, A, f"m{n}")
        await clock.advance(1)
    # Message n was recorded at START + n seconds and is version n + 2.
    for n in (0, 62, 63, 200, 299):
        past = await gw.session_as_of(A, at=START + timedelta(seconds=n, milliseconds=500))
        assert past.version == n + 2
        assert past.transcript[-1]["content"][0]["text"] == f"m{n}"
        assert past.row == (await gw.session_as_of(A, version=n + 2)).row


async def test_bad_points_in_time_are_refused(gw: Gateway) -> None:
    await say(gw, A, "one")
    assert (await gw.session_as_of(A, version=99)).version == 2
    with pytest.raises(ValueError, match="versions start at 1"):
        await gw.session_as_of(A, version=0)
    with pytest.raises(ValueError, match="not both"):
        await gw.session_as_of(A, version=1, at=START)
    with pytest.raises(ValueError, match="time zone"):
        await gw.session_as_of(A, at=datetime(2026, 5, 1, 12, 0))
    with pytest.raises(SessionNotRecorded, match="Session not found: agent:main:nope"):
        await gw.session_as_of("nope", version=1)


async def exchange_between_a_and_b(gw: Gateway) -> None:
    await say(gw, A, "hi", channel="discord", chat_type="group", to="channel:a")
    await say(gw, B, "yo", channel="discord", chat_type="group", to="channel:b")
    await say(gw, "discord:group:unrelated", "not part of it")
    sent = await gw.call_tool(A, "sessions_send", {"sessionKey": B, "message": "ping"})
    assert sent["status"] == "ok"
    await gw.wait_idle()


async def test_the_timeline_holds_the_session_and_the_work_it_took_part_in(gw: Gateway) -> None:
    await exchange_between_a_and_b(gw)

    timeline = await gw.timeline(B)
    entries = timeline.entries
    assert timeline.key == B_KEY
    positions = [e.position for e in entries]
    assert positions == sorted(positions)
    assert {e.kind for e in entries} == {"session", "run", "exchange"}
    exchange_events = [e.event for e in entries if e.kind == "exchange"]
    assert exchange_events == [
        "ExchangeOpened",
        "RoundOneReplied",
        "ReplySkipped",
        "AnnounceRequested",
        "AnnounceReplied",
        "AnnounceDelivered",
        "ExchangeClosed",
    ]
    lines = [e.summary for e in entries]
    assert "user message via discord: 'yo'" in lines
    assert "run completed: 'pong'" in lines
    assert "announce delivered to discord channel:b: 'all done'" in lines
    assert not any("not part of it" in line for line in lines)
    # The requester's timeline has the same exchange, and its own reply-back run.
    requester = (await gw.timeline(A)).entries
    assert [e.event for e in requester if e.kind == "exchange"] == exchange_events
    turn_runs = [e for e in requester if e.event == "RunStarted" and e.data["step"] == "reply_back"]
    assert [e.data["session_key"] for e in turn_runs] == [A_KEY]
    with pytest.raises(LookupError, match="Session not found"):
        await gw.timeline("discord:group:nobody")


async def test_a_spawn_is_in_the_timelines_of_its_requester_and_its_child(gw: Gateway) -> None:
    await say(gw, "main", "find it", channel="whatsapp", to="+1555")
    spawned = await gw.call_tool("main", "sessions_spawn", {"task": "find it", "cleanup": "keep"})
    await gw.wait_idle()
    child = spawned["childSessionKey"]
    for key in ("main", child):
        events = [e.event for e in (await gw.timeline(key)).entries if e.kind == "spawn"]
        assert events[:2] == ["SubagentSpawned", "SubagentRunStarted"]
        assert "SubagentAnnounced" in events


async def test_auditing_never_calls_the_runtime_delivers_or_writes(
    gw: Gateway, runtime: ScriptedRuntime, delivery: CapturingDelivery
) -> None:
    await exchange_between_a_and_b(gw)
    calls, sent, position = len(runtime.calls), len(delivery.sent), store_of(gw).log_position()
    for version in range(1, 10):
        await gw.session_as_of(B, version=version)
    await gw.timeline(A)
    await gw.timeline(B)
    assert (len(runtime.calls), len(delivery.sent), store_of(gw).log_position()) == (
        calls,
        sent,
        position,
    )


# The command line -----------------------------------------------------------------------


@pytest.fixture
def store_file(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/audit.db"


async def test_cli_timeline_and_state(
    store_file: str, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_file, clock=clock
    )
    await say(gw, A, "first [bold]words[/bold]")
    await clock.advance(60)
    await say(gw, A, "second")
    await gw.close()

    assert main(["--store", store_file, "audit", "timeline", A]) == 0
    table = capsys.readouterr().out
    assert f"timeline of {A_KEY}: 3 event(s)" in table
    assert "user message: 'first [bold]words[/bold]'" in table

    assert main(["--store", store_file, "audit", "timeline", A, "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    assert [e["event"] for e in entries] == ["SessionOpened", "MessageAppended", "MessageAppended"]
    assert entries[2]["timestamp"] == "2026-05-01T12:01:00Z"

    assert main(["--store", store_file, "--json", "audit", "state", A, "--at-version", "2"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert (state["version"], state["latest_version"]) == (2, 3)
    assert [m["content"][0]["text"] for m in state["transcript"]] == ["first [bold]words[/bold]"]

    assert main(["--store", store_file, "audit", "state", A, "--at", "2026-05-01T12:00:30Z"]) == 0
    shown = capsys.readouterr().out
    assert f"{A_KEY} at version 2 of 3" in shown
    assert "second" not in shown


def test_cli_audit_refusals(store_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", store_file, "audit", "state", "main"]) == 2
    assert "exactly one of --at-version N or --at" in capsys.readouterr().err
    assert main(["--store", store_file, "audit", "state", "main", "--at", "yesterday"]) == 2
    assert "not an ISO 8601 instant" in capsys.readouterr().err
    assert main(["--store", store_file, "record", "cron:other", "hi"]) == 0
    assert main(["--store", store_file, "audit", "timeline", "main"]) == 1
    assert "Session not found: agent:main:main" in capsys.readouterr().err


async def test_cli_audit_leaves_unfinished_work_alone(
    store_file: str, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gateway would resume the run below; the audit commands open the store alone."""
    slow = ScriptedRuntime.from_dict({"rules": [{"reply": "late", "delaySeconds": 3600}]})
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_file, clock=clock, runtime=slow
    )
    await say(gw, A, "hi")
    await say(gw, B, "yo")
    send = {"sessionKey": B, "message": "ping", "timeoutSeconds": 0}
    await gw.call_tool(A, "sessions_send", send)
    await gw.wait_idle()
    position = store_of(gw).log_position()
    await gw.close()

    assert main(["--store", store_file, "audit", "timeline", B, "--json"]) == 0
    events = [e["event"] for e in json.loads(capsys.readouterr().out)["entries"]]
    assert events[-1] in {"RunDispatched", "MessageAppended"}
    assert main(["--store", store_file, "audit", "state", B, "--at-version", "1"]) == 0
    store = EventSourcedStore(store_file, kind_of=lambda state: "other")
    try:
        assert store.log_position() == position
    finally:
        store.close()


def test_cli_reads_leave_unfinished_work_alone(store_file: str) -> None:
    async def leave_a_run_pending() -> int:
        clock = VirtualClock(start=START)
        slow = ScriptedRuntime.from_dict({"rules": [{"reply": "late", "delaySeconds": 3600}]})
        gw = await Gateway.open(
            config=GatewayConfig.load(before_scopes()), store=store_file, clock=clock, runtime=slow
        )
        await say(gw, A, "hi")
        await say(gw, B, "yo")
        send = {"sessionKey": B, "message": "ping", "timeoutSeconds": 0}
        await gw.call_tool(A, "sessions_send", send)
        await gw.wait_idle()
        position = store_of(gw).log_position()
        await gw.close()
        return position

    position = asyncio.run(leave_a_run_pending())
    assert main(["--store", store_file, "--json", "sessions", "list"]) == 0
    store = EventSourcedStore(store_file, kind_of=lambda state: "other")
    try:
        assert store.log_position() == position
    finally:
        store.close()


def test_the_sync_facade_audits_too() -> None:
    with SyncGateway.open(
        config=before_scopes(), store="memory", clock=VirtualClock(start=START)
    ) as gw:
        gw.record_message("main", role="user", content="one")
        gw.patch_session("main", label="inbox")
        assert gw.session_as_of("main", version=2).row.label is None
        assert gw.session_as_of("main", version=3).row.label == "inbox"
        assert [e.event for e in gw.timeline("main").entries][-1] == "SessionPatched"
