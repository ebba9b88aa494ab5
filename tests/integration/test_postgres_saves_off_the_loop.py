"""On PostgreSQL an awaited save runs off the event loop (the design card: nothing blocks
the event loop): the loop goes on while the server writes and commits, a conflict is still
a StoreConflict its unit of work retries, and the save is in-flight work until settled.

A save is held mid-transaction (its inserts sent, its commit not) by a hook in the
recorder. Held on the event loop's own thread it could never be released, so the hook
does not hold it there: it records that the save ran on the loop, and the test fails.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.postgres_writer import save_threads
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.telemetry import Telemetry
from sessionwire.domain.session import session_uuid
from store_sessions import opened

HELD = 60  # seconds: only a bound on a broken test, never reached when it passes
LOOP_TURNS = 1_000


class HeldSave:
    """The store's next save, stopped after its inserts, before its commit."""

    def __init__(self, store: EventSourcedStore) -> None:
        self.loop = asyncio.get_running_loop()
        self.entered = asyncio.Event()
        self.release = threading.Event()
        self.on_loop = False
        loop_thread = threading.get_ident()
        recorder: Any = store.recorder
        original = recorder.before_commit

        def held(cursor: Any, links: Any) -> None:
            original(cursor, links)
            recorder.before_commit = original  # once
            if threading.get_ident() == loop_thread:
                self.on_loop = True  # held here, nothing could release it
                self.loop.call_soon(self.entered.set)
                return
            # Send what the save's pipeline holds: its inserts run, its commit does not.
            with cursor.connection.pipeline() as pipeline:
                pipeline.sync()
            self.loop.call_soon_threadsafe(self.entered.set)
            self.release.wait(HELD)

        recorder.before_commit = held

    async def reached(self) -> None:
        """Once the save is held; it must be held off the event loop's thread."""
        await self.entered.wait()
        assert not self.on_loop, "the save ran on the event loop's thread"


class CountingTelemetry(Telemetry):
    def __init__(self) -> None:
        self.retries = 0

    def conflict_retried(self) -> None:
        self.retries += 1


def texts(store: EventSourcedStore, key: str) -> list[str]:
    messages = store.transcript(session_uuid(key), limit=100, include_tools=False)
    return [json.loads(message)["content"][0]["text"] for message in messages]


async def test_the_loop_runs_on_while_a_postgres_save_is_in_progress(postgres_url: str) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=postgres_url)
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    held = HeldSave(store)
    try:
        first = asyncio.create_task(
            gateway.record_message("agent:main:a", role="user", content="held")
        )
        await held.reached()
        # Meanwhile, on the same loop: another session's save commits, and a read sees
        # the held one not committed yet.
        await gateway.record_message("agent:main:b", role="user", content="beside")
        assert texts(store, "agent:main:b") == ["beside"]
        assert store.session("agent:main:a") is None
        assert not first.done()
        held.release.set()
        await first
        assert texts(store, "agent:main:a") == ["held"]
    finally:
        held.release.set()
        await gateway.close()


async def test_wait_idle_waits_for_a_postgres_save_in_progress(postgres_url: str) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=postgres_url)
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    held = HeldSave(store)
    try:
        sending = asyncio.create_task(gateway.record_message("main", role="user", content="hi"))
        await held.reached()
        assert store.writes_in_flight() == 1
        idle = asyncio.create_task(gateway.wait_idle())
        for _ in range(LOOP_TURNS):
            await asyncio.sleep(0)
        assert not idle.done()
        held.release.set()
        await idle
        assert store.writes_in_flight() == 0
        assert texts(store, "agent:main:main") == ["hi"]  # committed before idle
        await sending
    finally:
        held.release.set()
        await gateway.close()


async def test_a_conflict_off_the_loop_is_a_store_conflict(postgres_url: str) -> None:
    store = open_event_store(postgres_url, GatewayConfig())
    try:
        held = HeldSave(store)
        first = asyncio.create_task(store.save_async(opened("agent:main:a")))
        await held.reached()
        # The same stream at the same version, while the first is uncommitted.
        second = asyncio.create_task(store.save_async(opened("agent:main:a")))
        held.release.set()
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
        assert [type(outcome) for outcome in outcomes] == [type(None), StoreConflict]
        assert store.writes_in_flight() == 0
        # The cache follows what was committed, not the save that lost.
        assert store.session_for_update("agent:main:a") == store.session("agent:main:a")
    finally:
        store.close()


async def test_a_save_that_lost_a_race_off_the_loop_is_retried(postgres_url: str) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=postgres_url)
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    telemetry = CountingTelemetry()
    store.telemetry = telemetry
    key = "agent:main:main"
    await gateway.record_message("main", role="user", content="one")
    held = HeldSave(store)
    try:
        first = asyncio.create_task(gateway.record_message("main", role="user", content="two"))
        await held.reached()
        # Decided on the version before the held save: it conflicts once that commits.
        second = asyncio.create_task(gateway.record_message("main", role="user", content="three"))
        for _ in range(LOOP_TURNS):
            if store.writes_in_flight() == 2:
                break
            await asyncio.sleep(0)
        assert store.writes_in_flight() == 2
        held.release.set()
        await asyncio.gather(first, second)
        assert telemetry.retries == 1
        assert texts(store, key) == ["one", "two", "three"]
    finally:
        held.release.set()
        await gateway.close()


def test_closing_the_store_finishes_a_save_in_progress_and_seals_it(postgres_url: str) -> None:
    store = open_event_store(postgres_url, GatewayConfig())
    saving: list[asyncio.Task[None]] = []
    holds: list[HeldSave] = []

    async def start_and_leave() -> None:
        holds.append(HeldSave(store))
        saving.append(asyncio.create_task(store.save_async(opened("agent:main:a"))))
        await holds[0].reached()

    writer: Any = store.writer
    closing = writer.close

    def released_as_the_store_closes() -> None:
        # The save is still in its transaction when the store starts closing.
        for held in holds:
            held.release.set()
        closing()

    writer.close = released_as_the_store_closes
    try:
        asyncio.run(start_and_leave())  # the loop closes while the save is held
        assert saving[0].cancelled()
        assert store.writes_in_flight() == 1
    finally:
        store.close()  # the held save commits first, then the sealer's last pass
    assert store.writes_in_flight() == 0
    reopened = open_event_store(postgres_url, GatewayConfig())
    try:
        assert reopened.session("agent:main:a") is not None
        assert reopened.sealed_position() == reopened.log_position() == 1
    finally:
        reopened.close()


def test_the_save_threads_leave_most_of_the_connection_pool_to_the_rest() -> None:
    # eventsourcing's default pool: 5 connections and 10 more on demand.
    assert [save_threads(size) for size in (15, 8, 5, 2, 1)] == [4, 4, 2, 1, 1]


async def test_the_statistics_refresh_a_save_triggers_never_runs_on_the_loop(
    postgres_url: str, monkeypatch: Any
) -> None:
    # The ANALYZE a growing table gets at 1,000, 2,000, 4,000... new rows was counted in
    # the awaited save's settlement, on the loop: the guard refused it there, and the
    # save that had committed was reported to its caller as failed.
    store = open_event_store(postgres_url, GatewayConfig())
    analyzed_on: list[str] = []
    analyze = store.backend.analyze

    def spied(target: EventSourcedStore) -> None:
        analyzed_on.append(threading.current_thread().name)
        analyze(target)

    monkeypatch.setattr(store.backend, "analyze", spied)
    try:
        store._analyze_at = 1  # the next new row doubles the count
        await store.save_async(opened("agent:main:grows"))
    finally:
        store.close()  # after the refresh it started
    assert analyzed_on == ["sessionwire-analyze"]
