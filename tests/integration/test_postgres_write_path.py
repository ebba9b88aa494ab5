"""A PostgreSQL save is one transaction sent in one round trip, and a save that fails
part-way keeps nothing (ADR 0021, "Amended: fewer round trips and writes"). With storage
v3 (ADR 0036 §6) an append is one INSERT of its row and one narrow UPDATE of the session
row, between BEGIN and COMMIT."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from postgres_server import schema_of
from protocol_trace import sent, traced
from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind
from sessionwire.application.ports.store import StoreConflict
from sessionwire.domain.session import Session
from store_sessions import opened, with_message


def texts(store: EventSourcedStore, session: Session) -> list[str]:
    """The session's transcript texts, oldest first."""
    messages = [
        json.loads(row) for row in store.transcript(session.id, limit=10, include_tools=True)
    ]
    return [message["content"][0]["text"] for message in messages]


@pytest.fixture
def store(postgres_url: str) -> Iterator[EventSourcedStore]:
    opened_store = EventSourcedStore(postgres_url, kind_of=no_kind)
    opened_store.recorder.stop_sealing()  # only the save's own messages on its connection
    yield opened_store
    opened_store.close()


def test_an_append_is_one_round_trip(store: EventSourcedStore, tmp_path: Path) -> None:
    session = opened("agent:main:a")
    store.save(session)
    trace = tmp_path / "trace.txt"
    with traced(store, trace):
        store.save(with_message(session, "one"))
    # Every statement of the transaction, BEGIN and COMMIT included, goes out before the
    # one Sync the client then waits on (psycopg's transaction() in a pipeline syncs
    # after BEGIN, before COMMIT and after it: with the pipeline's own, four).
    assert sent(trace, "Sync") == 1
    # BEGIN, the event row (with its chain link and history columns), the session
    # row's narrow UPDATE, COMMIT: v2 sent six (a transcript row and a chain row more).
    assert sent(trace, "Execute") == 4
    parsed = [
        line for line in trace.read_text().splitlines() if line.split("\t")[:3:2] == ["F", "Parse"]
    ]
    assert not any("sw_transcript" in line or "sw_chain" in line for line in parsed)
    assert texts(store, session) == ["one"]


def test_a_message_on_a_stored_session_is_one_statement(
    store: EventSourcedStore, tmp_path: Path
) -> None:
    """Its session row's narrow UPDATE goes within the insert of its event, and one
    statement needs no BEGIN or COMMIT: the server commits it at the Sync."""
    store.save(opened("agent:main:a"))
    stored = store.session("agent:main:a")
    assert stored is not None
    trace = tmp_path / "trace.txt"
    with traced(store, trace):
        store.save(with_message(stored.to_aggregate(), "one"))
    assert (sent(trace, "Sync"), sent(trace, "Execute")) == (1, 1)
    again = store.session("agent:main:a")
    assert again is not None
    assert again.version == 2
    assert again.state.updated_at == stored.state.updated_at  # the message's own time
    assert texts(store, again.to_aggregate()) == ["one"]


def test_a_one_statement_save_that_loses_a_conflict_keeps_nothing(
    store: EventSourcedStore, postgres_url: str
) -> None:
    other = EventSourcedStore(postgres_url, kind_of=no_kind)
    try:
        other.save(opened("agent:main:a"))
        stale = store.session("agent:main:a")
        fresh = other.session("agent:main:a")
        assert stale is not None
        assert fresh is not None
        won = with_message(fresh.to_aggregate(), "won")
        other.save(won)
        with pytest.raises(StoreConflict):
            store.save(with_message(stale.to_aggregate(), "lost"))
        schema = schema_of(postgres_url)
        with store.reading() as cursor:
            cursor.execute(
                f'SELECT (SELECT COUNT(*) FROM "{schema}".sessionwire_events) AS events, '
                f'(SELECT COUNT(*) FROM "{schema}".sw_saves) AS saves, '
                f'(SELECT version FROM "{schema}".sw_sessions) AS version'
            )
            assert cursor.fetchone() == {"events": 2, "saves": 2, "version": 2}
        assert texts(store, won) == ["won"]
    finally:
        other.close()


def test_a_save_that_fails_part_way_keeps_nothing_and_the_connection_serves_on(
    store: EventSourcedStore, postgres_url: str
) -> None:
    session = opened("agent:main:a")
    store.save(session)
    other = opened("agent:main:b")
    # Its event inserts fine; a session row already there fails the save after it. The
    # row has the session's key as well as its id: on Citus the key is the distribution
    # column, part of every unique key (ADR 0051).
    schema = schema_of(postgres_url)
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
        connection.execute(
            f'INSERT INTO "{schema}".sw_sessions SELECT %s, %s, session_id, '
            "agent_id, kind, label, spawned_by, status, updated_at, version, created_on, "
            f'modified_on, state FROM "{schema}".sw_sessions',
            (other.id.hex, "agent:main:b"),
        )
    with pytest.raises(StoreConflict):
        store.save(with_message(other, "lost"))
    with store.reading() as cursor:
        cursor.execute(
            f'SELECT (SELECT COUNT(*) FROM "{schema}".sessionwire_events) AS events, '
            f'(SELECT COUNT(*) FROM "{schema}".sw_chain) AS links'
        )
        assert cursor.fetchone() == {"events": 1, "links": 1}
    # Every pooled connection is idle again, and the next save on the session commits.
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
        connection.execute(f'DELETE FROM "{schema}".sw_sessions WHERE id = %s', (other.id.hex,))
    fresh = store.session("agent:main:a")
    assert fresh is not None
    store.save(with_message(fresh.to_aggregate(), "kept"))
    assert texts(store, session) == ["kept"]


def test_conflicts_on_every_pooled_connection_leave_their_prepared_statements_usable(
    store: EventSourcedStore, postgres_url: str
) -> None:
    """The writes are server-side prepared statements; a conflict aborts the pipeline
    that would have prepared some of them, and the connection's next saves still run."""
    other = EventSourcedStore(postgres_url, kind_of=no_kind)
    try:
        other.save(opened("agent:main:a"))
        for round_ in range(12):  # more than the pool has connections
            stored = store.session("agent:main:a")
            assert stored is not None
            stale = stored.to_aggregate()
            fresh = other.session("agent:main:a")
            assert fresh is not None
            other.save(with_message(fresh.to_aggregate(), f"won {round_}"))
            with pytest.raises(StoreConflict):
                store.save(with_message(stale, f"lost {round_}"))
            again = store.session("agent:main:a")
            assert again is not None
            store.save(with_message(again.to_aggregate(), f"kept {round_}"))
        session = store.session("agent:main:a")
        assert session is not None
        assert len(texts(store, session.to_aggregate())) == 10  # the last ten of 24
    finally:
        other.close()
