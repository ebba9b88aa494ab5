"""PostgreSQL writers on different sessions do not wait for each other, and the sealer
never seals past a transaction still in flight (ADR 0016, 0021).

Writer A is held mid-save (its events inserted, its transaction open) by a hook in the
recorder; writer B, another store on the same schema, saves to another session
meanwhile. B's saves run with ``SET LOCAL lock_timeout = '1ms'``: with a lock shared by
the writers (eventsourcing's ``LOCK TABLE ... IN EXCLUSIVE MODE``) B's save fails at
once instead of waiting, so the test fails rather than hangs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from postgres_server import ON_CITUS, schema_of
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind
from sessionwire.adapters.store.postgres import BackgroundSealer
from sessionwire.application.audit.export import export_lines, import_export
from sessionwire.application.audit.verify import verify
from sessionwire.domain.session import Session
from store_sessions import opened, with_message

HELD = 60  # seconds: only a bound on a broken test, never reached when it passes


class HeldSave:
    """Store A's next save, stopped after its inserts, before its commit, in a thread."""

    def __init__(self, store: EventSourcedStore) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        recorder: Any = store.recorder
        original = recorder.before_commit

        def held(cursor: Any, links: Any) -> None:
            original(cursor, links)
            recorder.before_commit = original  # once
            # Send what the save's pipeline holds: its inserts run, its commit does not.
            with cursor.connection.pipeline() as pipeline:  # the save's own pipeline
                pipeline.sync()
            self.inside.set()
            self.release.wait(HELD)

        recorder.before_commit = held
        self.store = store

    def start(self, session: Session) -> None:
        def save() -> None:
            try:
                self.store.save(session)
            except BaseException as error:
                self.error = error

        self.thread = threading.Thread(target=save)
        self.thread.start()
        assert self.inside.wait(HELD), self.error

    def finish(self) -> None:
        self.release.set()
        self.thread.join()
        assert self.error is None, self.error


def impatient(store: EventSourcedStore) -> None:
    """The store's saves give up on any lock at once instead of waiting for it: the
    setting comes with the first statement of each save's transaction."""
    read_model: Any = store.read_model
    original = read_model.write

    def first_in_the_transaction(cursor: Any, changes: Any, stored: Any = ()) -> None:
        cursor.execute("SET LOCAL lock_timeout = '1ms'")
        original(cursor, changes, stored)

    read_model.write = first_in_the_transaction


@pytest.fixture
def stores(postgres_url: str) -> Iterator[tuple[Any, Any]]:
    a = EventSourcedStore(postgres_url, kind_of=no_kind)
    b = EventSourcedStore(postgres_url, kind_of=no_kind)
    impatient(b)
    a.recorder.stop_sealing()  # sealing only when the test says so
    b.recorder.stop_sealing()
    yield a, b
    b.close()
    a.close()


def sealed_keys(store: EventSourcedStore) -> list[tuple[int, str]]:
    return [
        (position, type(event).__name__ + ":" + str(event.originator_id))
        for position, event in store.records_after(0, 1000)
    ]


def test_a_save_on_another_session_commits_while_a_save_is_in_flight(
    stores: tuple[EventSourcedStore, EventSourcedStore],
) -> None:
    a, b = stores
    held = HeldSave(a)
    held.start(opened("agent:main:a"))
    b.save(opened("agent:main:b"))  # would fail on the table lock: A holds it until commit
    assert b.session("agent:main:b") is not None
    assert a.session("agent:main:a") is None  # A not committed yet
    held.finish()
    assert a.session("agent:main:a") is not None


def test_sealing_stops_below_a_transaction_in_flight_and_keeps_its_place_after(
    stores: tuple[EventSourcedStore, EventSourcedStore],
) -> None:
    a, b = stores
    b.save(opened("agent:main:early"))
    assert b.seal() == 1
    held = HeldSave(a)
    session_a = opened("agent:main:a")
    held.start(session_a)  # A's transaction id comes first
    session_b = opened("agent:main:b")
    b.save(session_b)  # ... B commits first
    # B's record is final only once A is no longer in flight: A could still commit a
    # record that goes before it.
    assert b.seal() == 0
    assert [position for position, _ in sealed_keys(b)] == [1]
    held.finish()
    assert b.seal() == 2
    order = [name for _, name in sealed_keys(b)]
    assert order == [
        f"SessionOpened:{opened('agent:main:early').id}",
        f"SessionOpened:{session_a.id}",  # A: lower transaction id, though it committed later
        f"SessionOpened:{session_b.id}",
    ]
    # More writes extend the same log, and it verifies.
    b.save(with_message(session_b, "after"))
    assert b.seal() == 1
    assert [position for position, _ in sealed_keys(b)] == [1, 2, 3, 4]
    audit = StoreAuditLog(b)
    report = verify(audit)
    assert (report.findings, report.unsealed, report.head_seq) == ([], 0, 4)


def test_an_export_carries_a_sealed_order_that_differs_from_the_positions(
    stores: tuple[EventSourcedStore, EventSourcedStore], postgres_url: str
) -> None:
    _, b = stores
    first, second = opened("agent:main:first"), opened(second_key(b, "agent:main:first"))
    b.save(first)
    b.save(second)
    # Writers racing: the later position's transaction had the lower id (as when one
    # transaction takes its sequence value first and its transaction id second). On
    # Citus through the events table, which the chain view only reads (ADR 0051).
    rows = f'"{schema_of(postgres_url)}".{"sessionwire_events" if ON_CITUS else "sw_chain"}'
    with b.writing() as cursor:
        cursor.execute(f"SELECT MIN(xact_id)::text::bigint AS low FROM {rows}")
        low = int(cursor.fetchone()["low"])
        cursor.execute(
            f"UPDATE {rows} SET xact_id = %s::text::xid8 WHERE originator_id = %s",
            (str(low - 1), second.id),
        )
    assert b.seal() == 2
    sealed = [event.originator_id for _, event in b.records_after(0, 10)]
    assert sealed == [second.id, first.id]  # not their positions' order

    lines = list(export_lines(StoreAuditLog(b)))
    copy_url = postgres_url.replace(schema_of(postgres_url), schema_of(postgres_url) + "_copy")
    copy = EventSourcedStore(copy_url, kind_of=no_kind)
    try:
        assert import_export(StoreAuditLog(copy), lines) == 2
        source, copied = verify(StoreAuditLog(b)), verify(StoreAuditLog(copy))
        assert copied.findings == []
        assert copied.unsealed == 0
        assert copied.head_seq == source.head_seq == 2
        assert copied.head_hash == source.head_hash
        assert [e.originator_id for _, e in copy.records_after(0, 10)] == sealed
    finally:
        copy.close()
        with psycopg.connect(copy_url.split("?")[0], autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema_of(copy_url)}" CASCADE')


def second_key(store: EventSourcedStore, first: str) -> str:
    """A second session's key. On Citus one in the first's shard: a sealing pass orders
    one shard's rows by their transaction ids (ADR 0067), so only there can a lower id
    put the later position first."""
    if not ON_CITUS:
        return "agent:main:second"
    events = f'"{store.datastore.schema}".sessionwire_events'  # type: ignore[attr-defined]
    with store.writing() as cursor:
        shard = "SELECT get_shard_id_for_distribution_column(%s::regclass, %s::text) AS shard"
        cursor.execute(shard, (events, first))
        wanted = cursor.fetchone()["shard"]
        for n in range(100):
            key = f"agent:main:second-{n}"
            cursor.execute(shard, (events, key))
            if cursor.fetchone()["shard"] == wanted:
                return key
    raise AssertionError(f"no key among 100 in the shard of {first}")


def test_the_sealer_is_paced_by_saves_not_by_the_schemas_gateways(
    stores: tuple[EventSourcedStore, EventSourcedStore], postgres_url: str
) -> None:
    # A pass once every SAVES_PER_PASS saves, at most MAX_LAG after a save; the first
    # save after a quiet spell at once. Any gateway's pass seals every gateway's rows,
    # so the schema's passes per save do not depend on how many gateways are live.
    a, _ = stores
    with a.writing() as cursor:
        cursor.execute(
            f'INSERT INTO "{schema_of(postgres_url)}".sw_gateways (gateway_id, expires_at) '
            "SELECT 'g' || n, now() + interval '1 hour' FROM generate_series(1, 100) n"
        )
    sealer = BackgroundSealer(a.recorder)  # type: ignore[arg-type]
    now = time.monotonic()
    assert sealer.due_in(now) <= 0  # nothing passed for longer than the lag
    sealer._last_pass = now  # a pass just began
    for _ in range(BackgroundSealer.SAVES_PER_PASS - 1):
        sealer._saves += 1
        assert sealer.due_in(now) == pytest.approx(BackgroundSealer.MAX_LAG)
    assert sealer.due_in(now + BackgroundSealer.MAX_LAG) <= 0  # the lag, at most
    sealer._saves += 1
    assert sealer.due_in(now) == 0  # the count's save: at once, 100 gateways or one


def test_a_pass_that_meets_another_sealer_leaves_the_rows_to_it(
    stores: tuple[EventSourcedStore, EventSourcedStore], postgres_url: str
) -> None:
    a, b = stores
    b.save(opened("agent:main:b"))
    recorder: Any = a.recorder
    key = (7252, schema_of(postgres_url))  # the sealer's lock
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
        assert recorder.seal_log(wait=False) == 0  # another sealer's pass is under way
        assert sealed_keys(b) == []
        # Let go before closing: a closed connection's backend may exit (and free its
        # locks) after the next statement has run.
        other.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)
    assert recorder.seal_log(wait=False) == 1
    assert [position for position, _ in sealed_keys(b)] == [1]
