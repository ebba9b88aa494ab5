"""A save is idempotent across a dropped connection (issue 22, item 4).

eventsourcing retries PostgreSQL writes on connection errors. A save whose COMMIT the
server processed, but whose answer was lost with the connection, is run again: its
events are then already there. That is the save's own commit, not a conflict: the caller
hears success, the cache follows the commit, nothing is written twice. A save that did
not commit and meets another writer's events is still a conflict.

The fault is real: the save's transaction is committed (or not) on the server, its
connection closed, and ``psycopg.OperationalError`` raised to the recorder, as when the
server or the network drops the connection at that moment.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from postgres_server import ON_CITUS
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.citus_schema import NotDistributed
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.postgres_save_ids import RETENTION_MINUTES
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.adapters.testkit.simulator.faults import drop_next_commit
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.domain.session import Session, session_uuid
from store_sessions import opened, with_message

KEY = "agent:main:main"


class DroppedConnection:
    """The store's next save loses its connection, once, at its COMMIT: after the server
    committed it (``committed``: only the answer is lost), or before (nothing is)."""

    def __init__(
        self, store: EventSourcedStore, *, committed: bool, at_start: bool = False
    ) -> None:
        self.fired = 0
        chain: Any = store.chain
        if at_start:
            self._drop_at_start(chain)
            return
        drop_next_commit(store, committed=committed, fired=self._fired)

    def _fired(self) -> None:
        self.fired += 1

    def _drop_at_start(self, chain: Any) -> None:
        """Lost before any of the save's statements reached the server. (A save over a
        stale version may hear of its conflict at any statement of its pipeline, before
        its last one: a drop there would not always come first.)"""
        original = chain.previous_streams

        def dropped(cursor: Any, records: Any) -> Any:
            chain.previous_streams = original  # once: the retry runs as written
            self.fired += 1
            cursor.connection.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        chain.previous_streams = dropped


class Outcomes:
    """Which of the store's bookkeeping ran after each save: committed or failed."""

    def __init__(self, store: EventSourcedStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        saved, failed = store._saved, store._failed

        def on_saved(*args: Any) -> None:
            self.seen.append("saved")
            saved(*args)

        def on_failed(*args: Any) -> None:
            self.seen.append("failed")
            failed(*args)

        monkeypatch.setattr(store, "_saved", on_saved)
        monkeypatch.setattr(store, "_failed", on_failed)


def versions(store: EventSourcedStore, originator_id: UUID) -> list[int]:
    """Every event row of the stream, by version (a duplicate would show twice)."""
    table = f'"{store.datastore.schema}".{store.recorder.events_table_name}'
    with store.reading() as cursor:
        cursor.execute(
            f"SELECT originator_version FROM {table} WHERE originator_id = %s "
            "ORDER BY originator_version",
            (originator_id,),
        )
        return [row["originator_version"] for row in cursor.fetchall()]


def texts(store: EventSourcedStore, key: str) -> list[str]:
    messages = store.transcript(session_uuid(key), limit=100, include_tools=False)
    return [json.loads(message)["content"][0]["text"] for message in messages]


def loaded(store: EventSourcedStore, key: str) -> Session:
    stored = store.session(key)
    assert stored is not None
    return stored.to_aggregate()


@pytest.fixture
def store(postgres_url: str) -> Any:
    opened_store = open_event_store(postgres_url, GatewayConfig())
    yield opened_store
    opened_store.close()


def test_a_blocking_save_committed_before_its_connection_dropped_is_saved_once(
    store: EventSourcedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save(opened(KEY))
    session = with_message(loaded(store, KEY), "once")
    outcomes = Outcomes(store, monkeypatch)
    fault = DroppedConnection(store, committed=True)
    store.save(session)
    assert fault.fired == 1
    assert outcomes.seen == ["saved"]
    assert versions(store, session.id) == [1, 2]
    assert texts(store, KEY) == ["once"]
    written = store.session_for_update(KEY)
    assert written is not None
    assert written.version == 2


async def test_an_awaited_save_committed_before_its_connection_dropped_is_saved_once(
    store: EventSourcedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.writer is not None  # the PostgreSQL writer's worker threads
    await store.save_async(opened(KEY))
    session = with_message(loaded(store, KEY), "once")
    outcomes = Outcomes(store, monkeypatch)
    fault = DroppedConnection(store, committed=True)
    await store.save_async(session)
    assert fault.fired == 1
    assert outcomes.seen == ["saved"]
    assert versions(store, session.id) == [1, 2]
    assert store.writes_in_flight() == 0


async def test_a_new_stream_saved_before_its_connection_dropped_is_saved_once(
    store: EventSourcedStore,
) -> None:
    fault = DroppedConnection(store, committed=True)
    session = opened(KEY)
    await store.save_async(session)
    assert fault.fired == 1
    assert versions(store, session.id) == [1]


async def test_a_command_whose_save_lost_its_answer_is_done_once(postgres_url: str) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=postgres_url)
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    try:
        await gateway.record_message("main", role="user", content="one")
        fault = DroppedConnection(store, committed=True)
        await gateway.record_message("main", role="user", content="two")
        assert fault.fired == 1
        # A false conflict made the unit of work append "two" again on fresh state.
        assert texts(store, KEY) == ["one", "two"]
    finally:
        await gateway.close()


def test_a_blocking_save_that_dropped_before_committing_still_meets_a_conflict(
    store: EventSourcedStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save(opened(KEY))
    stale = with_message(loaded(store, KEY), "second writer")
    other = open_event_store(postgres_url, GatewayConfig())
    try:
        other.save(with_message(loaded(other, KEY), "first writer"))
    finally:
        other.close()
    outcomes = Outcomes(store, monkeypatch)
    fault = DroppedConnection(store, committed=False, at_start=True)
    with pytest.raises(StoreConflict):
        store.save(stale)
    assert fault.fired == 1
    assert outcomes.seen == ["failed"]
    assert versions(store, stale.id) == [1, 2]
    assert texts(store, KEY) == ["first writer"]


async def test_an_awaited_save_that_dropped_before_committing_still_meets_a_conflict(
    store: EventSourcedStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.save_async(opened(KEY))
    stale = with_message(loaded(store, KEY), "second writer")
    other = open_event_store(postgres_url, GatewayConfig())
    try:
        other.save(with_message(loaded(other, KEY), "first writer"))
    finally:
        other.close()
    outcomes = Outcomes(store, monkeypatch)
    fault = DroppedConnection(store, committed=False, at_start=True)
    with pytest.raises(StoreConflict):
        await store.save_async(stale)
    assert fault.fired == 1
    assert outcomes.seen == ["failed"]
    assert texts(store, KEY) == ["first writer"]


async def test_a_save_that_dropped_before_committing_is_committed_by_its_retry(
    store: EventSourcedStore,
) -> None:
    await store.save_async(opened(KEY))
    session = with_message(loaded(store, KEY), "once")
    fault = DroppedConnection(store, committed=False)
    await store.save_async(session)
    assert fault.fired == 1
    assert versions(store, session.id) == [1, 2]
    assert texts(store, KEY) == ["once"]


async def test_the_sqlite_writer_runs_a_save_once_and_reports_a_failed_commit_as_it_is(
    tmp_path: Any,
) -> None:
    """SQLite's writer never re-runs a save (nothing there retries): a batch whose
    transaction fails settles that error, which is no StoreConflict, so no unit of work
    repeats the command over a save whose outcome is unknown."""
    store = open_event_store(f"sqlite:///{tmp_path}/sessions.db", GatewayConfig())
    try:
        writer: Any = store.writer
        write = writer._write
        runs: list[object] = []

        def failing(cursor: Any, save: Any) -> Any:
            runs.append(save)
            raise sqlite3.OperationalError("disk I/O error")

        writer._write = failing
        with pytest.raises(sqlite3.OperationalError):
            await store.save_async(opened(KEY))
        assert len(runs) == 1
        writer._write = write
        await store.save_async(opened(KEY))  # the writer goes on
        assert store.session(KEY) is not None
    finally:
        store.close()


def test_save_ids_are_kept_for_their_retention_then_pruned(store: EventSourcedStore) -> None:
    store.save(opened(KEY))
    save_ids = store.recorder.save_ids  # type: ignore[attr-defined]
    # An older save's id, as the store records it: on Citus with its save's shard key,
    # the table's distribution column (``CitusSaveIds.recording``, ADR 0062).
    columns, key = ("save_id, shard_key, ", (KEY,)) if ON_CITUS else ("save_id, ", ())
    with store.writing() as cursor:
        cursor.execute(
            f"INSERT INTO {save_ids.table} ({columns}saved_at) "
            f"VALUES (%s, {'%s, ' * len(key)}now() - make_interval(mins => %s))",
            (uuid4(), *key, RETENTION_MINUTES + 1),
        )
        cursor.execute(f"SELECT count(*) AS ids FROM {save_ids.table}")
        assert cursor.fetchone()["ids"] == 2
        assert save_ids.prune(cursor) == 1
        cursor.execute(f"SELECT count(*) AS ids FROM {save_ids.table}")
        assert cursor.fetchone()["ids"] == 1  # the save's own, recent


def test_a_schema_made_before_save_ids_gets_their_table_when_opened(postgres_url: str) -> None:
    first = open_event_store(postgres_url, GatewayConfig())
    try:
        with first.writing() as cursor:
            cursor.execute(f'DROP TABLE "{first.datastore.schema}".sw_saves')
    finally:
        first.close()
    if ON_CITUS:
        # A table missing on Citus is a distribution step to go: the open refuses it and
        # names the upgrade, which makes the table distributed (ADR 0062).
        with pytest.raises(NotDistributed, match=r"first: sw_saves: .*&upgrade=yes"):
            open_event_store(postgres_url, GatewayConfig())
        open_event_store(f"{postgres_url}&upgrade=yes", GatewayConfig()).close()
    store = open_event_store(postgres_url, GatewayConfig())
    try:
        store.save(opened(KEY))
        session = with_message(loaded(store, KEY), "once")
        fault = DroppedConnection(store, committed=True)
        store.save(session)
        assert fault.fired == 1
        assert versions(store, session.id) == [1, 2]
    finally:
        store.close()
