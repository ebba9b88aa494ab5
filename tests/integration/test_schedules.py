"""Schedules (decision 36, ADR 0047): a message sent into ``cron:<id>`` (or a session
named) at each due time, through the Clock port — each due time fired once across
restarts and gateways, a gap while no gateway ran fired once and late, every firing's
run admitted by the trace budgets.

Every example runs on virtual time; those that reopen a store run on SQLite and
PostgreSQL (a memory store ends with its gateway), the rest on all three stores.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.config.gateway_config import ConfigError
from sessionwire.testing import ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SCRIPT = {"rules": [{"step": "scheduled", "reply": "did: {message}"}]}
# Only a bound on a broken test: a firing that never settles fails instead of hanging.
HANG_SECONDS = 60


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def events(gw: Gateway, name: str) -> list[Any]:
    return [event for _, event in store_of(gw).events() if type(event).__name__ == name]


def fired(gw: Gateway) -> list[Any]:
    return events(gw, "ScheduleFired")


@asynccontextmanager
async def opened(
    store_url: str,
    clock: VirtualClock,
    config: dict[str, Any] | None = None,
    runtime: ScriptedRuntime | None = None,
) -> AsyncIterator[Gateway]:
    gw = await Gateway.open(
        config=GatewayConfig.load(config or {}),
        store=store_url,
        clock=clock,
        runtime=runtime or ScriptedRuntime.from_dict(SCRIPT),
    )
    try:
        yield gw
    finally:
        await gw.close()


async def settle(gw: Gateway, clock: VirtualClock, seconds: float = 0) -> None:
    if seconds:
        await clock.advance(seconds)
    await asyncio.wait_for(gw.wait_idle(), HANG_SECONDS)


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return str(request.getfixturevalue("postgres_store_url"))


async def test_an_interval_fires_each_due_time_once_into_its_cron_session(
    store_url: str,
) -> None:
    clock = VirtualClock(start=START)
    async with opened(store_url, clock) as gw:
        defined = await gw.schedule("tick", every_seconds=60, message="tick")
        assert defined["sessionKey"] == "agent:main:cron:tick"
        # The first due time is one interval after the schedule is made.
        assert defined["nextDueAt"] == "2026-05-01T12:01:00Z"
        await settle(gw, clock, 59)
        assert fired(gw) == []
        await settle(gw, clock, 1)
        await settle(gw, clock, 125)

        due = [event.due_at for event in fired(gw)]
        assert due == [ms(START + timedelta(seconds=s)) for s in (60, 120, 180)]
        assert not any(event.late for event in fired(gw))
        runs = (await gw.runs(session_key="agent:main:cron:tick"))["runs"]
        assert sorted(run["runId"] for run in runs) == sorted(e.run_id for e in fired(gw))
        assert {run["step"] for run in runs} == {"scheduled"}
        assert {run["status"] for run in runs} == {"ok"}
        history = await gw.call_tool(
            "agent:main:cron:tick", "sessions_history", {"sessionKey": "cron:tick"}
        )
        texts = [m["content"][0]["text"] for m in history["messages"]]
        assert texts == ["tick", "did: tick"] * 3
        (listed,) = await gw.schedules()
        assert listed["fired"] == 3
        assert listed["nextDueAt"] == "2026-05-01T12:04:00Z"


async def test_a_cron_expression_fires_at_the_next_matching_minute_in_its_zone(
    store_url: str,
) -> None:
    clock = VirtualClock(start=START)  # 12:00 UTC is 14:00 in Berlin (summer time)
    async with opened(store_url, clock) as gw:
        defined = await gw.schedule(
            "standup", cron="30 14 * * *", tz="Europe/Berlin", message="standup", session_key="main"
        )
        assert defined["sessionKey"] == "agent:main:main"
        assert defined["nextDueAt"] == "2026-05-01T12:30:00Z"
        await settle(gw, clock, 24 * 3600 + 1800)
        assert [event.due_at for event in fired(gw)] == [
            ms(START + timedelta(minutes=30)),
            ms(START + timedelta(days=1, minutes=30)),
        ]
        history = await gw.call_tool("main", "sessions_history", {"sessionKey": "main"})
        assert [m["content"][0]["text"] for m in history["messages"]][:1] == ["standup"]


async def test_a_gateway_reopened_between_due_times_fires_the_next_on_time(
    durable_url: str,
) -> None:
    clock = VirtualClock(start=START)
    async with opened(durable_url, clock) as gw:
        await gw.schedule("tick", every_seconds=60, message="tick")
        await settle(gw, clock, 90)
        assert len(fired(gw)) == 1
    async with opened(durable_url, clock) as gw:
        await settle(gw, clock)
        assert len(fired(gw)) == 1  # nothing due at the reopen
        await settle(gw, clock, 30)
        due = [event.due_at for event in fired(gw)]
        assert due == [ms(START + timedelta(seconds=60)), ms(START + timedelta(seconds=120))]
        assert not any(event.late for event in fired(gw))
        assert len((await gw.runs(session_key="agent:main:cron:tick"))["runs"]) == 2


async def test_due_times_missed_while_every_gateway_was_down_fire_once_late(
    durable_url: str,
) -> None:
    clock = VirtualClock(start=START)
    async with opened(durable_url, clock) as gw:
        await gw.schedule("tick", every_seconds=60, message="tick")
        await settle(gw, clock, 60)
        assert len(fired(gw)) == 1
    # Down over five due times (120 s ... 360 s); back at 390 s.
    await clock.advance(330)
    async with opened(durable_url, clock) as gw:
        await settle(gw, clock)
        late = fired(gw)[1:]
        assert len(late) == 1
        (firing,) = late
        assert firing.late
        assert firing.first_due_at == ms(START + timedelta(seconds=120))
        assert firing.due_at == ms(START + timedelta(seconds=360))
        assert len((await gw.runs(session_key="agent:main:cron:tick"))["runs"]) == 2
        (listed,) = await gw.schedules()
        assert listed["late"] == 1
        # And on schedule again from there.
        assert listed["nextDueAt"] == "2026-05-01T12:07:00Z"
        await settle(gw, clock, 30)
        assert [event.late for event in fired(gw)] == [False, True, False]


async def test_two_postgresql_gateways_fire_each_due_time_once(postgres_store_url: str) -> None:
    clock = VirtualClock(start=START)
    one_agents, two_agents = ScriptedRuntime.from_dict(SCRIPT), ScriptedRuntime.from_dict(SCRIPT)
    async with opened(postgres_store_url, clock, runtime=one_agents) as one:
        await one.schedule("tick", every_seconds=60, message="tick")
        # The second resumes the store's schedules: both drive it, on one clock, so
        # both wake at every due time and race to record it.
        async with opened(postgres_store_url, clock, runtime=two_agents) as two:
            (driven,) = internals(one).schedules._tasks
            assert list(internals(two).schedules._tasks) == [driven]
            for _ in range(5):
                await clock.advance(60)
                await asyncio.wait_for(one.wait_idle(), HANG_SECONDS)
                await asyncio.wait_for(two.wait_idle(), HANG_SECONDS)
            due = [event.due_at for event in fired(one)]
            assert due == [ms(START + timedelta(seconds=60 * n)) for n in range(1, 6)]
            scheduled = [
                call for call in [*one_agents.calls, *two_agents.calls] if call.step == "scheduled"
            ]
            assert len(scheduled) == 5
            runs = (await two.runs(session_key="agent:main:cron:tick"))["runs"]
            assert len(runs) == 5


async def test_a_schedule_defined_elsewhere_is_found_by_a_serving_postgresql_gateway(
    postgres_store_url: str,
) -> None:
    clock = VirtualClock(start=START)
    async with opened(postgres_store_url, clock) as serving:
        # Defined by a process that does not drive schedules (the CLI opens so).
        defining = await Gateway.open(store=postgres_store_url, clock=clock, resume=False)
        try:
            await defining.schedule("tick", every_seconds=120, message="tick")
        finally:
            await defining.close()
        # What the serving gateway's watch does every 30 s on a real clock (on a test's
        # clock, as the takeover watch, the test looks when it means to).
        await internals(serving).schedules.look_for_new()
        await settle(serving, clock, 120)
        assert [event.due_at for event in fired(serving)] == [ms(START + timedelta(seconds=120))]


@pytest.mark.parametrize(
    ("definition", "reason"),
    [
        ({"cron": "61 * * * *"}, "cron '61 * * * *' is not valid"),
        ({"cron": "* * * *"}, "has 4 fields; it takes five"),
        ({"cron": "0 0 31 2 *"}, "is not valid"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"every_seconds": 0}, "every_seconds must be between 1 and"),
        ({"every_seconds": -5}, "every_seconds must be between 1 and"),
        ({"every_seconds": 1.5}, "whole number of seconds"),
        ({"every_seconds": float("nan")}, "whole number of seconds"),
        ({}, "exactly one of cron or every_seconds"),
        ({"cron": "* * * * *", "every_seconds": 60}, "exactly one of cron or every_seconds"),
    ],
)
async def test_bad_definitions_are_refused_with_the_reason_and_record_nothing(
    definition: dict[str, Any], reason: str
) -> None:
    clock = VirtualClock(start=START)
    async with opened("memory", clock) as gw:
        before = len(list(store_of(gw).events()))
        with pytest.raises(ValueError, match=re.escape(reason)):
            await gw.schedule("bad", message="hi", **definition)
        assert await gw.schedules() == []
        assert len(list(store_of(gw).events())) == before


async def test_bad_ids_and_messages_are_refused() -> None:
    async with opened("memory", VirtualClock(start=START)) as gw:
        with pytest.raises(ValueError, match="a schedule id is 1-100 letters"):
            await gw.schedule("no spaces", every_seconds=60, message="hi")
        with pytest.raises(ValueError, match="message is empty"):
            await gw.schedule("ok", every_seconds=60, message="  ")


def test_the_config_section_refuses_bad_entries_and_unknown_keys() -> None:
    with pytest.raises(ConfigError, match=r"schedules\[0\].*has 3 fields"):
        GatewayConfig.load({"schedules": [{"id": "a", "cron": "* * *", "message": "hi"}]})
    with pytest.raises(ConfigError, match=r"unknown key 'every'; known: id, message, cron"):
        GatewayConfig.load({"schedules": [{"id": "a", "every": 5, "message": "hi"}]})
    entry = {"id": "a", "everySeconds": 5, "message": "hi"}
    with pytest.raises(ConfigError, match="schedule ids must be unique: a"):
        GatewayConfig.load({"schedules": [entry, entry]})


async def test_the_config_section_defines_schedules_and_a_reopen_keeps_their_due_times(
    durable_url: str,
) -> None:
    clock = VirtualClock(start=START)
    config = {
        "schedules": [
            {"id": "tick", "everySeconds": 60, "message": "tick"},
            {"id": "daily", "cron": "0 6 * * *", "message": "report"},
        ]
    }
    async with opened(durable_url, clock, config) as gw:
        assert [s["id"] for s in await gw.schedules()] == ["tick", "daily"]
        assert {s["source"] for s in await gw.schedules()} == {"config"}
        await settle(gw, clock, 90)
    async with opened(durable_url, clock, config) as gw:
        # The same definition again: its due times go on from the first definition.
        await settle(gw, clock, 30)
        assert [e.due_at for e in fired(gw)] == [ms(START) + 60_000, ms(START) + 120_000]
        assert events(gw, "ScheduleRedefined") == []
    # Dropped from the config: removed at the next open; one defined by the API stays.
    async with opened(durable_url, clock, {"schedules": config["schedules"][1:]}) as gw:
        await gw.schedule("mine", every_seconds=600, message="mine")
        assert [s["id"] for s in await gw.schedules()] == ["daily", "mine"]
    async with opened(durable_url, clock, {}) as gw:
        assert [s["id"] for s in await gw.schedules()] == ["mine"]


async def test_defining_again_replaces_the_definition_and_unscheduling_stops_it(
    store_url: str,
) -> None:
    clock = VirtualClock(start=START)
    async with opened(store_url, clock) as gw:
        await gw.schedule("tick", every_seconds=60, message="tick")
        await settle(gw, clock, 30)
        again = await gw.schedule("tick", every_seconds=60, message="tick")
        assert again["nextDueAt"] == "2026-05-01T12:01:00Z"  # unchanged: same definition
        changed = await gw.schedule("tick", every_seconds=100, message="tock")
        assert changed["nextDueAt"] == "2026-05-01T12:02:10Z"  # counted from now
        await settle(gw, clock, 100)
        assert [e.due_at for e in fired(gw)] == [ms(START) + 130_000]
        removed = await gw.unschedule("tick")
        assert removed is not None
        assert removed["status"] == "removed"
        assert await gw.unschedule("tick") is None
        await settle(gw, clock, 1000)
        assert len(fired(gw)) == 1
        assert await gw.schedules() == []


async def test_a_budget_refuses_a_schedules_run_and_the_refusal_is_recorded(
    store_url: str,
) -> None:
    clock = VirtualClock(start=START)
    config = {"session": {"agentToAgent": {"budget": {"maxRuns": 0}}}}
    runtime = ScriptedRuntime.from_dict(SCRIPT)
    async with opened(store_url, clock, config, runtime) as gw:
        await gw.schedule("tick", every_seconds=60, message="tick")
        await settle(gw, clock, 120)
        firings = fired(gw)
        assert len(firings) == 2  # each due time is still fired once: refused
        assert all(event.refused and "maxRuns 0 reached" in event.refused for event in firings)
        assert (await gw.runs())["runs"] == []
        assert runtime.calls == []
        refusals = events(gw, "AccessRefused")
        assert [(r.tool, r.check) for r in refusals] == [("schedule", "trace_budget")] * 2
        (listed,) = await gw.schedules()
        assert listed["refused"] == 2
        assert "maxRuns 0 reached" in listed["lastRefusal"]


async def test_two_recordings_of_one_due_time_collide_and_only_one_is_stored(
    store_url: str,
) -> None:
    """What keeps two gateways from both firing a due time: each records the firing as
    the schedule's next version, so the slower save collides (StoreConflict)."""
    from sessionwire.application.ports.event_log import StoreConflict
    from sessionwire.domain.schedule import Schedule, ScheduleState, schedule_uuid

    clock = VirtualClock(start=START)
    async with opened(store_url, clock, runtime=ScriptedRuntime.from_dict(SCRIPT)) as gw:
        store = internals(gw).store
        await gw.schedule("tick", every_seconds=60, message="tick")
        await clock.advance(30)  # not due yet: nothing fires meanwhile
        copies = []
        for _ in range(2):
            stored = await store.work(schedule_uuid("tick"))
            assert stored is not None
            copies.append(stored.to_aggregate(Schedule, ScheduleState))
        later = START + timedelta(seconds=60)
        for copy in copies:
            firing = copy.firing(later)
            assert firing is not None
            copy.fire(firing, at=later)
        await store.save(copies[0])
        with pytest.raises(StoreConflict):
            await store.save(copies[1])
        assert len(fired(gw)) == 1


async def test_the_schedules_read_model_is_a_rebuild_of_its_events(store_url: str) -> None:
    clock = VirtualClock(start=START)
    async with opened(store_url, clock) as gw:
        await gw.schedule("tick", every_seconds=60, message="tick")
        await gw.schedule("gone", cron="*/5 * * * *", message="gone")
        await settle(gw, clock, 300)
        await gw.unschedule("gone")
        await gw.schedule("tick", every_seconds=90, message="tock")
        store = store_of(gw)
        live = store.read_model_snapshot()
        store.rebuild_read_models()
        assert store.read_model_snapshot() == live
        assert [s["id"] for s in await gw.schedules()] == ["tick"]


async def test_a_gateway_has_fired_what_came_due_while_down_by_the_time_it_opens(
    durable_url: str,
) -> None:
    """Found by the simulator (seed 77): a schedule removed right after an open lost the
    firing its downtime owed, which the open had only started a task to make."""
    clock = VirtualClock(start=START)
    async with opened(durable_url, clock) as gw:
        await gw.schedule("tick", every_seconds=60, message="tick")
    await clock.advance(200)  # 60, 120, 180 pass with no gateway
    async with opened(durable_url, clock) as gw:
        (firing,) = fired(gw)  # no wait: the open fired it
        assert (firing.first_due_at, firing.due_at, firing.late) == (
            ms(START) + 60_000,
            ms(START) + 180_000,
            True,
        )
        await gw.unschedule("tick")
        await settle(gw, clock, 600)
        assert len(fired(gw)) == 1
        assert len((await gw.runs(session_key="agent:main:cron:tick"))["runs"]) == 1


def test_the_sync_gateway_schedules_too() -> None:
    from sessionwire import SyncGateway

    clock = VirtualClock(start=START)
    with SyncGateway.open(
        store="memory", clock=clock, runtime=ScriptedRuntime.from_dict(SCRIPT)
    ) as gw:
        defined = gw.schedule("tick", every_seconds=60, message="tick")
        assert defined["nextDueAt"] == "2026-05-01T12:01:00Z"
        assert [s["id"] for s in gw.schedules()] == ["tick"]
        removed = gw.unschedule("tick")
        assert removed is not None
        assert removed["status"] == "removed"
        assert gw.schedules() == []
