"""A store distributed on Citus (``?distribution=citus``, contract decision 39, ADR 0051
and 0052): its tables distributed by session key and colocated, a message's save one
shard's transaction, each event row stamped with its worker's own transaction id, the log
sealed and verified across shards. These run where ``SESSIONWIRE_TEST_POSTGRES`` is a
Citus coordinator (the Citus tier) and skip elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from command_line import run_in_process
from postgres_server import POSTGRES_URL
from sessionwire.adapters.store.citus_schema import NotDistributed
from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind
from sessionwire.application.ports.session_read_model import SessionQuery
from sessionwire.application.ports.transcript_search import TranscriptSearchQuery
from store_sessions import opened, with_message

EVENTS = "sessionwire_events"


def _coordinator() -> bool:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        if connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            found = connection.execute("SELECT citus_is_coordinator()").fetchone()
            return found is not None and bool(found[0])
    return False


@pytest.fixture
def citus_url(postgres_url: str) -> str:
    if not _coordinator():
        pytest.skip("the test server is not a Citus coordinator")
    return f"{_local(postgres_url)}&distribution=citus"


@pytest.fixture
def store(citus_url: str) -> Iterator[EventSourcedStore]:
    opened_store = EventSourcedStore(citus_url, kind_of=no_kind)
    yield opened_store
    opened_store.close()


def _local(url: str) -> str:
    """``url`` without ``distribution=citus``: its tables left local."""
    return url.replace("&distribution=citus", "")


def _schema(url: str) -> str:
    return url.split("schema=", 1)[1].split("&", 1)[0]


def test_every_per_session_table_is_distributed_and_colocated(
    store: EventSourcedStore, citus_url: str
) -> None:
    schema = _schema(citus_url)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT logicalrelid::text, column_to_column_name(logicalrelid, partkey), "
            "colocationid FROM pg_dist_partition "
            "WHERE logicalrelid::regclass::text LIKE %s ORDER BY 1",
            (f"{schema}.%",),
        ).fetchall()
        local = connection.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
            "AND c.relkind = 'r' AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p "
            "WHERE p.logicalrelid = c.oid) ORDER BY 1",
            (schema,),
        ).fetchall()
    assert {(name.split(".", 1)[1], column) for name, column, _ in rows} == {
        (EVENTS, "shard_key"),
        ("sw_saves", "shard_key"),
        ("sw_sessions", "key"),
        ("sw_work", "session_key"),
        ("sw_session_streams", "session_key"),
        ("sw_runs", "session_key"),
    }
    assert len({colocation for _, _, colocation in rows}) == 1
    # The gateway tables and the schema's own records stay on the coordinator.
    assert [name for (name,) in local] == [
        "sw_checkpoints",
        "sw_format",
        "sw_gateways",
        "sw_session_leases",
    ]


@contextmanager
def remote_commands(store: EventSourcedStore) -> Iterator[list[tuple[str, str]]]:
    """The commands Citus sends to the workers for this store's saves (its remote
    command log, read as notices on the store's own connections: other tests' writes
    on the cluster do not show)."""
    datastore: Any = store.datastore
    original = datastore.get_connection
    seen: list[tuple[str, str]] = []

    @contextmanager
    def logging() -> Iterator[Any]:
        with original() as conn:
            conn.execute("SET citus.log_remote_commands = on")
            conn.execute("SET client_min_messages = notice")

            def heard(notice: Any) -> None:
                seen.append((notice.message_primary or "", notice.message_detail or ""))

            conn.add_notice_handler(heard)
            try:
                yield conn
            finally:
                conn.execute("RESET citus.log_remote_commands")
                conn.execute("RESET client_min_messages")
                conn.remove_notice_handler(heard)

    datastore.get_connection = logging
    try:
        yield seen
    finally:
        datastore.get_connection = original


def test_a_message_save_is_one_shards_transaction(store: EventSourcedStore) -> None:
    session = opened("agent:main:one-shard")
    store.save(session)
    store.recorder.stop_sealing()  # the saves' commands alone
    with remote_commands(store) as seen:
        for text in ("one", "two", "three"):
            session = with_message(session, text)
            store.save(session)
    issued = [(line, detail) for line, detail in seen if line.startswith("issuing ")]
    assert any(f"{EVENTS}_" in line for line, _ in issued), seen
    # No two-phase commit, and every command to one worker ("on server …").
    assert not any("PREPARE TRANSACTION" in line for line, _ in issued), issued
    servers = {detail.split(" connectionId")[0] for _, detail in issued}
    assert len(servers) == 1, issued


def test_each_event_row_carries_its_workers_own_transaction_id(
    store: EventSourcedStore, citus_url: str
) -> None:
    schema = _schema(citus_url)
    session = opened("agent:main:worker-xid")
    store.save(with_message(session, "hi"))
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        placements = connection.execute(
            "SELECT shard_name, nodename, nodeport FROM citus_shards "
            "WHERE table_name = %s::regclass",
            (f"{schema}.{EVENTS}",),
        ).fetchall()
    checked = 0
    for shard, host, port in placements:
        with psycopg.connect(
            host=host, port=port, user="postgres", dbname="postgres", autocommit=True
        ) as worker:
            rows = worker.execute(
                f"SELECT xmin::text::bigint, xact_id::text::bigint FROM {shard}"
            ).fetchall()
        for xmin, xact in rows:
            # The row's own version was made by the worker's transaction: its 32-bit xid.
            assert xact % 2**32 == xmin
            checked += 1
    assert checked == 2  # the session's creation and its message


def test_transcripts_are_searched_across_shards(store: EventSourcedStore) -> None:
    # Sessions on both workers (four shards), each row joined to its session within its
    # shard; hidden sessions filtered in the same query.
    for number in range(6):
        session = with_message(opened(f"agent:main:find{number}"), f"the needle {number}")
        store.save(with_message(session, f"hay {number}"))
    everyone = SessionQuery(limit=1)
    query = TranscriptSearchQuery(
        words=("needle",), scopes=(everyone,), include_tools=False, limit=4
    )
    first = store.search_transcripts(query)
    assert [match.session_key for match in first] == [
        f"agent:main:find{number}" for number in (5, 4, 3, 2)
    ]
    rest = store.search_transcripts(
        TranscriptSearchQuery(
            words=("needle",),
            scopes=(everyone,),
            include_tools=False,
            limit=4,
            before=first[-1].position,
        )
    )
    assert [match.session_key for match in rest] == ["agent:main:find1", "agent:main:find0"]
    hidden = replace(everyone, exclude_keys=frozenset({"agent:main:find5"}))
    narrowed = store.search_transcripts(replace(query, scopes=(hidden,), limit=1))
    assert [match.session_key for match in narrowed] == ["agent:main:find4"]
    # The match's index in its transcript: the second message of its session is 1.
    (hay,) = store.search_transcripts(replace(query, words=("hay", "3")))
    assert store.messages_before(hay.stream, hay.version) == 1


def _verified(url: str) -> str:
    ran = run_in_process("--store", url, "audit", "verify")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("clean: "), ran.stdout
    return ran.stdout


def test_the_log_is_sealed_and_verified_across_shards(
    store: EventSourcedStore, citus_url: str
) -> None:
    for number in range(6):
        session = opened(f"agent:main:s{number}")
        store.save(with_message(session, f"m{number}"))
    store.seal()
    assert store.sealed_position() == 12
    shown = [position for position, _ in store.records_after(0, 100)]
    assert shown == list(range(1, 13))
    # The head is named by its record's position (a sequence's number, in no set order
    # against the seals across workers).
    assert "clean: 12 event(s) checked; head #" in _verified(citus_url)


def test_an_existing_schema_is_refused_until_distributed_then_distributed_resumably(
    postgres_url: str,
) -> None:
    if not _coordinator():
        pytest.skip("the test server is not a Citus coordinator")
    # The Citus tier's server URL carries the option itself (tests/postgres_server.py).
    postgres_url = _local(postgres_url)
    local = EventSourcedStore(postgres_url, kind_of=no_kind)
    session = opened("agent:main:before")
    local.save(with_message(session, "kept"))
    local.close()
    with pytest.raises(NotDistributed, match="distribution=citus&upgrade=yes"):
        EventSourcedStore(f"{postgres_url}&distribution=citus", kind_of=no_kind)
    distributed = EventSourcedStore(
        f"{postgres_url}&distribution=citus&upgrade=yes", kind_of=no_kind
    )
    try:
        found = distributed.session_for_update("agent:main:before")
        assert found is not None
        distributed.save(with_message(found.to_aggregate(), "after"))
    finally:
        distributed.close()
    assert "clean: 3 event(s) checked; head #" in _verified(f"{postgres_url}&distribution=citus")
    with pytest.raises(NotDistributed, match="open it with distribution=citus"):
        EventSourcedStore(postgres_url, kind_of=no_kind)


def test_a_reader_of_the_log_stops_at_a_position_whose_worker_has_not_committed_yet(
    store: EventSourcedStore, citus_url: str
) -> None:
    """A read across shards reads each at its own moment: it can see a later sealing
    pass's positions on one shard without an earlier pass's on another. The stream gives
    the unbroken prefix, then the rest once it is there, never a gap (ADR 0023, 0051,
    0067)."""
    for number in range(4):
        session = opened(f"agent:main:lag{number}")
        store.save(with_message(session, f"m{number}"))
    store.seal()
    events = f"{_schema(citus_url)}.{EVENTS}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        # Position 5 as a reader sees it before its pass's shard has committed.
        seal_of_5 = connection.execute(
            f"SELECT notification_id, log_hash FROM {events} WHERE log_seq = 5"
        ).fetchone()
        assert seal_of_5 is not None
        connection.execute(
            f"UPDATE {events} SET log_seq = NULL, log_hash = NULL WHERE notification_id = %s",
            (seal_of_5[0],),
        )
        assert [position for position, _ in store.records_after(0, 100)] == [1, 2, 3, 4]
        assert store.records_after(4, 100) == []
        connection.execute(
            f"UPDATE {events} SET log_seq = 5, log_hash = %s WHERE notification_id = %s",
            (seal_of_5[1], seal_of_5[0]),
        )
    assert [position for position, _ in store.records_after(4, 100)] == list(range(5, 9))
