"""The test kit: VirtualClock's time control, ScriptedRuntime.add, given/when/then
scenarios for the exchange and spawn process managers, and the pytest plugin."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from freezegun import freeze_time
from postgres_server import POSTGRES_URL
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session, to_millis
from sessionwire.domain.spawn import Spawn
from sessionwire.testing import EventsDiffer, Scenario, ScriptedRuntime, ScriptError, VirtualClock
from sessionwire.testing import expect as e

pytest_plugins = ["pytester"]

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
A = "agent:main:discord:group:a"
B = "agent:main:discord:group:b"
MAIN = "agent:main:main"
CHILD = "agent:main:subagent:7f6c1d9e-0000-4000-8000-000000000001"


# VirtualClock ---------------------------------------------------------------------------


async def test_advance_to_an_instant_fires_the_timers_due_by_then() -> None:
    clock = VirtualClock(start=START)
    woke: list[datetime] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.now())

    tasks = [asyncio.create_task(sleeper(s)) for s in (90, 30, 600)]
    await clock.run_due()
    assert clock.timers == [START + timedelta(seconds=s) for s in (30, 90, 600)]
    await clock.advance_to(START + timedelta(minutes=2))
    assert woke == [START + timedelta(seconds=30), START + timedelta(seconds=90)]
    assert clock.now() == START + timedelta(minutes=2)
    with pytest.raises(ValueError, match="only moves forward"):
        await clock.advance_to(START)
    await clock.run_until_idle()
    assert woke[-1] == clock.now() == START + timedelta(seconds=600)
    await asyncio.gather(*tasks)


async def test_run_until_idle_follows_timers_that_set_new_timers() -> None:
    clock = VirtualClock(start=START)
    ticks: list[datetime] = []

    async def every_minute(times: int) -> None:
        for _ in range(times):
            await clock.sleep(60)
            ticks.append(clock.now())

    task = asyncio.create_task(every_minute(5))
    await clock.run_until_idle(within=timedelta(minutes=3, seconds=30))
    assert len(ticks) == 3
    assert clock.now() == START + timedelta(minutes=3, seconds=30)
    await clock.run_until_idle()
    assert ticks[-1] == START + timedelta(minutes=5)
    assert clock.timers == []
    await task


async def test_a_clock_that_drives_freezegun_keeps_event_times_and_now_together() -> None:
    # real_asyncio: the event loop keeps real time, or its own timers stop under freezegun.
    with freeze_time(START, real_asyncio=True) as frozen:
        clock = VirtualClock(freezer=frozen)
        gw = await Gateway.open(
            config=GatewayConfig.load(before_scopes()), store="memory", clock=clock
        )
        try:
            await gw.record_message("main", role="user", content="one")
            await clock.advance(timedelta(hours=1))
            assert datetime.now(UTC) == START + timedelta(hours=1)
            await gw.record_message("main", role="user", content="two")
            stamps = [event.timestamp for _, event in store_of(gw).events()]
        finally:
            await gw.close()
    assert stamps == [START, START, START + timedelta(hours=1)]


@pytest.mark.postgres
async def test_a_postgres_gateway_closes_under_frozen_time_and_leaves_no_pool_timer(
    postgres_store_url: str,
) -> None:
    # The plugin keeps the pool on real time: frozen, the stop its close schedules was
    # due in 2026 by the timer thread's real clock, and the thread outlived the close.
    def pool_timers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.endswith("-scheduler")]

    before = pool_timers()
    with freeze_time(START, real_asyncio=True) as frozen:
        gw = await Gateway.open(store=postgres_store_url, clock=VirtualClock(freezer=frozen))
        await gw.record_message("main", role="user", content="one")
        assert len(pool_timers()) > len(before)
        await gw.close()
    assert pool_timers() == before


def test_scripted_runtime_rules_can_be_added_one_by_one() -> None:
    runtime = ScriptedRuntime([]).add(step="primary", reply="pong").add(match="x", reply="y")
    assert [rule.reply for rule in runtime.rules] == ["pong", "y"]
    with pytest.raises(ScriptError, match="unknown step"):
        runtime.add(step="nope")


# Given / when / then: the exchange process manager -----------------------------------------


def sessions() -> list[Session]:
    return [Session.open(key=key, session_id=uuid4(), agent_id="main", at=START) for key in (A, B)]


def answered_primary(reply: str) -> Run:
    run = Run.start(
        run_id=uuid4(),
        session_key=B,
        agent_id="main",
        step="primary",
        message="ping",
        timeout_seconds=30,
        requester_key=A,
        at=START,
    )
    run.dispatch(at=START)
    run.complete(reply=reply, usage=None, model=None, at=START)
    return run


def exchange_after(run: Run, max_turns: int = 5) -> Exchange:
    return Exchange.open(
        primary_run_id=run.id,
        requester_key=A,
        requester_display=A,
        requester_channel="discord",
        target_key=B,
        target_display=B,
        target_channel="discord",
        original_message="ping",
        max_turns=max_turns,
        at=START,
    )


async def test_given_an_answered_primary_run_the_exchange_skips_both_steps() -> None:
    script = {
        "rules": [
            {"step": "reply_back", "reply": "REPLY_SKIP"},
            {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        ]
    }
    async with Scenario(script=script) as s:
        run = answered_primary("pong")
        s.given(*sessions(), run, exchange_after(run))
        await s.when()
        # A step and the run it starts are one commit: the run's events first (ADR 0057).
        s.then(
            e("RunStarted", step="reply_back", session_key=A, turn=1, message="pong"),
            e("RoundOneReplied", reply="pong"),
            e("RunDispatched", attempt=1),
            e("MessageAppended"),
            # The turn's end, its step on the exchange and the announce run's start.
            e("RunCompleted", reply="REPLY_SKIP"),
            e("MessageAppended"),
            e("RunStarted", step="announce", session_key=B),
            e("ReplySkipped", turn=1, speaker="requester", reason="REPLY_SKIP"),
            e("AnnounceRequested"),
            e("RunDispatched"),
            e("MessageAppended"),
            e("RunCompleted", reply="ANNOUNCE_SKIP"),
            e("MessageAppended"),
            e("AnnounceReplied", reply="ANNOUNCE_SKIP"),
            e("AnnounceSkipped", reason="ANNOUNCE_SKIP"),
            e("ExchangeClosed", reason="announce skipped: ANNOUNCE_SKIP"),
        )
        assert s.delivery.sent == []


async def test_given_a_silent_target_the_exchange_closes_at_once() -> None:
    async with Scenario() as s:
        run = answered_primary("")
        s.given(*sessions(), run, exchange_after(run))
        await s.when()
        s.then(
            e("RoundOneReplied", reply=None),
            e("ExchangeClosed", reason="the target gave no reply"),
        )
        assert s.runtime.calls == []


async def test_given_events_continue_a_recorded_stream() -> None:
    """History can be given as events too: here the round-one reply is already recorded."""
    async with Scenario(script={"rules": [{"step": "announce", "reply": "done"}]}) as s:
        run = answered_primary("pong")
        exchange = exchange_after(run, max_turns=0)
        s.given(*sessions(), run, exchange)
        replied = Exchange.RoundOneReplied(
            originator_id=exchange.id, originator_version=2, timestamp=START, reply="pong"
        )
        s.given(replied)
        await s.when()
        s.then(
            e("RunStarted", step="announce", session_key=B),
            e("LoopEnded", reason="maxPingPongTurns is 0"),
            e("AnnounceRequested"),
            e("RunDispatched"),
            e("MessageAppended"),
            e("RunCompleted", reply="done"),
            e("MessageAppended"),
            e("AnnounceReplied", reply="done"),
            e("AnnounceDelivered", channel="discord", to="channel:b", message="done"),
            e("ExchangeClosed", reason="announce delivered"),
        )
        assert [sent["to"] for sent in s.delivery.sent] == ["channel:b"]


async def test_a_mismatch_shows_a_readable_diff() -> None:
    async with Scenario() as s:
        run = answered_primary("")
        s.given(*sessions(), run, exchange_after(run))
        await s.when()
        with pytest.raises(EventsDiffer) as caught:
            s.then(e("RoundOneReplied", reply="pong"))
    message = str(caught.value)
    assert "expected 1 new event(s), got 2" in message
    assert "- RoundOneReplied(reply='pong')" in message
    assert "+ RoundOneReplied(reply=None)" in message
    assert "+ ExchangeClosed()" in message


# Given / when / then: the spawn process manager -----------------------------------------


def announced_spawn(*, cleanup: str = "keep") -> tuple[Session, Spawn]:
    child = Session.open(key=CHILD, session_id=uuid4(), agent_id="main", at=START, spawned_by=MAIN)
    spawn = Spawn.spawn(
        run_id=uuid4(),
        child_key=CHILD,
        agent_id="main",
        requester_key=MAIN,
        requester_display="main",
        task="look",
        label=None,
        model=None,
        run_timeout_seconds=0,
        cleanup="delete" if cleanup == "delete" else "keep",
        archive_after_minutes=60,
        at=START,
    )
    ended = to_millis(START)
    spawn.run_ended(
        outcome="ok", error=None, started_at=ended, ended_at=ended, usage=None, at=START
    )
    spawn.request_announce(UUID(int=1), at=START)
    spawn.record_announce_reply("ANNOUNCE_SKIP", at=START)
    spawn.skip_announce("ANNOUNCE_SKIP", at=START)
    return child, spawn


async def test_the_archive_timer_fires_an_hour_after_the_child_run_ended() -> None:
    async with Scenario() as s:
        s.given(*announced_spawn())
        await s.when(seconds=timedelta(minutes=59))
        s.then_nothing()
        await s.when(seconds=timedelta(minutes=1))
        s.then(
            e("SubagentArchived"),
            e("SessionArchived", reason="archiveAfterMinutes elapsed"),
        )
        assert s.runtime.calls == []


async def test_cleanup_delete_deletes_the_child_at_once() -> None:
    async with Scenario() as s:
        s.given(*announced_spawn(cleanup="delete"))
        await s.when()
        s.then(e("SubagentDeleted"), e("SessionDeleted", reason='sessions_spawn cleanup "delete"'))


async def test_a_command_as_the_when(store_url: str) -> None:
    script = {"rules": [{"reply": "pong"}]}
    async with Scenario(store=store_url, script=script, config=before_scopes()) as s:
        s.given(*sessions())
        sent = await s.when(
            lambda gw: gw.call_tool(A, "sessions_send", {"sessionKey": B, "message": "ping"})
        )
        assert sent["reply"] == "pong"
        names = [type(event).__name__ for event in s.new_events]
        assert names[:3] == ["RunStarted", "ExchangeOpened", "RunDispatched"]
        assert names[-1] == "ExchangeClosed"


# The pytest plugin ------------------------------------------------------------------------

PLUGIN_USER_TESTS = """
from sessionwire.testing import ScriptedRuntime, VirtualClock

async def test_send_gets_the_scripted_reply(gateway, scripted, clock):
    assert isinstance(clock, VirtualClock) and isinstance(scripted, ScriptedRuntime)
    scripted.add(step="primary", reply="pong")
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message("discord:group:b", role="user", content="yo")
    # Main reaches every session of its agent under the default scope (tree).
    result = await gateway.call_tool(
        "main", "sessions_send",
        {"sessionKey": "discord:group:b", "message": "ping"},
    )
    assert result["reply"] == "pong"
    await clock.advance(60)

def test_each_store_in_turn(sessionwire_store):
    assert sessionwire_store == "memory" or sessionwire_store.startswith("sqlite:///")
"""


def test_the_plugin_gives_gateway_clock_and_scripted_on_each_store(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SESSIONWIRE_TEST_POSTGRES", raising=False)
    pytester.makepyfile(test_user=PLUGIN_USER_TESTS)
    result = pytester.runpytest_subprocess("-o", "asyncio_mode=auto", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_send_gets_the_scripted_reply?memory?*PASSED*"])
    result.stdout.fnmatch_lines(["*test_send_gets_the_scripted_reply?sqlite?*PASSED*"])


PLUGIN_POSTGRES_TESTS = """
from urllib.parse import parse_qs, urlsplit

def test_the_store_carries_the_servers_options(sessionwire_store):
    if sessionwire_store.startswith("postgresql://"):
        query = parse_qs(urlsplit(sessionwire_store).query)
        assert query["lease_seconds"] == ["7"] and query["schema"][0].startswith("t_")
"""


def test_the_plugins_postgres_store_keeps_the_options_of_the_servers_url(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    # A server URL with store options (CI's `?distribution=citus`) gives stores with them,
    # on a schema of their own.
    monkeypatch.setenv("SESSIONWIRE_TEST_POSTGRES", f"{POSTGRES_URL}?lease_seconds=7")
    pytester.makepyfile(test_user=PLUGIN_POSTGRES_TESTS)
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_the_store_carries_the_servers_options?postgres?*PASSED*"])


def test_a_project_fixture_overrides_the_plugins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture\ndef clock():\n    return 'the project clock'\n"
    )
    pytester.makepyfile(
        test_override="def test_clock(clock):\n    assert clock == 'the project clock'\n"
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
