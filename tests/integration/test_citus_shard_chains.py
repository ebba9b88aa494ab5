"""Each shard's own chain on Citus (contract decision 39, ADR 0067): a sealing pass seals
one shard in one phase, every sealed row carries its place in its shard's log, a
checkpoint signs the shards' heads (statement version 4), ``audit verify`` follows each
shard's chain and finds a rewritten shard column, and a schema distributed before the
shard chains gets them on upgrade. These run where ``SESSIONWIRE_TEST_POSTGRES`` is a
Citus coordinator (the Citus tier) and skip elsewhere.

The expected shard ids come from Citus itself (``get_shard_id_for_distribution_column``)
and the expected chains from the hashing rule (``shard_log_hash``) over the rows in the
sealed log's order, not from the sealer's code."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from audit_rig import populate, run_cli, stored_contents
from citus_cluster import EVENTS, distributed_url
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from postgres_server import POSTGRES_URL, schema_of
from psycopg import sql
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.citus_schema import NotDistributed
from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind
from sessionwire.application.audit.checkpoint import (
    latest_anchor,
    make_checkpoint,
    raw_public_key,
)
from sessionwire.application.audit.verify import verify
from sessionwire.domain.checkpoint import ShardHead, shards_root
from sessionwire.domain.hash_chain import GENESIS, ShardChains, ShardLink, shard_log_hash
from sessionwire.testing import VirtualClock
from store_sessions import opened, with_message

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def citus_url(postgres_url: str) -> str:
    return distributed_url(postgres_url)


@pytest.fixture
def store(citus_url: str) -> Iterator[EventSourcedStore]:
    opened_store = EventSourcedStore(citus_url, kind_of=no_kind)
    yield opened_store
    opened_store.close()


def _events(url: str) -> str:
    return f'"{schema_of(url)}".{EVENTS}'


def _saved(store: EventSourcedStore, count: int, prefix: str = "s") -> None:
    """``count`` sessions with a message each: two events a session, over every shard."""
    for number in range(count):
        store.save(with_message(opened(f"agent:main:{prefix}{number}"), f"m{number}"))


def _sealed(store: EventSourcedStore) -> None:
    for _ in range(1000):
        store.seal()
        if StoreAuditLog(store).log_bounds().unsealed == 0:
            return
    pytest.fail("records still unsealed after 1000 sealing passes")


def _expected_chains(url: str) -> tuple[list[tuple[int, ShardLink]], list[ShardHead]]:
    """Each sealed row's place in its shard's log (by position), derived from the rows:
    the row's Citus shard, and the shard's log as the sealed log restricted to it."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows = connection.execute(
            f"SELECT notification_id, stream_hash, get_shard_id_for_distribution_column("
            f"%s, shard_key) FROM {_events(url)} WHERE log_seq IS NOT NULL ORDER BY log_seq",
            (_events(url),),
        ).fetchall()
    heads: dict[int, tuple[int, bytes]] = {}
    links = []
    for n, own, shard in rows:
        seq, previous = heads.get(shard, (0, GENESIS))
        hashed = shard_log_hash(previous, n, bytes(own))
        heads[shard] = (seq + 1, hashed)
        links.append((n, ShardLink(shard=shard, seq=seq + 1, shard_hash=hashed)))
    ordered = sorted(heads.items())
    return links, [ShardHead(shard, size, hashed) for shard, (size, hashed) in ordered]


def _stored_chains(url: str) -> list[tuple[int, ShardLink | None]]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows = connection.execute(
            f"SELECT notification_id, log_shard, shard_seq, shard_hash FROM {_events(url)} "
            "WHERE log_seq IS NOT NULL ORDER BY log_seq"
        ).fetchall()
    return [
        (n, None if seq is None else ShardLink(shard=shard, seq=seq, shard_hash=bytes(hashed)))
        for n, shard, seq, hashed in rows
    ]


@contextmanager
def sealer_connections(store: EventSourcedStore) -> Iterator[tuple[list[str], list[int]]]:
    """The commands Citus sends to the workers on the store's own connections (its remote
    command log, as notices: other tests' writes on the cluster do not show), and those
    connections' backend ids (what a two-phase commit's id in ``pg_dist_transaction``
    names)."""
    datastore: Any = store.datastore
    original = datastore.get_connection
    seen: list[str] = []
    pids: list[int] = []

    @contextmanager
    def logging() -> Iterator[Any]:
        with original() as conn:
            pids.append(conn.info.backend_pid)
            conn.execute("SET citus.log_remote_commands = on")
            conn.execute("SET client_min_messages = notice")

            def heard(notice: Any) -> None:
                seen.append(notice.message_primary or "")

            conn.add_notice_handler(heard)
            try:
                yield conn
            finally:
                conn.execute("RESET citus.log_remote_commands")
                conn.execute("RESET client_min_messages")
                conn.remove_notice_handler(heard)

    datastore.get_connection = logging
    try:
        yield seen, pids
    finally:
        datastore.get_connection = original


def _two_phase_commits() -> set[tuple[int, str]]:
    """The coordinator's records of two-phase commits: (backend id, gid); a gid reads
    ``citus_<group>_<pid>_<transaction>_<connection>``."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows = connection.execute("SELECT gid FROM pg_dist_transaction").fetchall()
    return {(int(gid.split("_")[2]), gid) for (gid,) in rows}


def test_sealing_rows_of_every_worker_makes_no_two_phase_commit(
    store: EventSourcedStore, citus_url: str
) -> None:
    store.recorder.stop_sealing()  # the test's own passes only
    _saved(store, 8)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        found = connection.execute(
            f"SELECT DISTINCT get_shard_id_for_distribution_column(%s, shard_key) "
            f"FROM {_events(citus_url)}",
            (_events(citus_url),),
        ).fetchall()
        groups = connection.execute(
            "SELECT DISTINCT groupid FROM pg_dist_placement WHERE shardid = ANY(%s)",
            ([shard for (shard,) in found],),
        ).fetchall()
    assert len(groups) == 2  # rows on both workers: one pass over them all would be a 2PC
    before = _two_phase_commits()
    with sealer_connections(store) as (seen, pids):
        sealed = store.seal()  # several passes, one shard each
    assert sealed == 16
    assert StoreAuditLog(store).log_bounds().unsealed == 0
    assert not [line for line in seen if "PREPARE TRANSACTION" in line]
    made = [gid for pid, gid in _two_phase_commits() - before if pid in pids]
    assert made == []


def test_each_sealed_row_has_its_place_in_its_shards_own_log(
    store: EventSourcedStore, citus_url: str
) -> None:
    _saved(store, 8)
    _sealed(store)
    expected, heads = _expected_chains(citus_url)
    assert len(expected) == 16
    assert len(heads) >= 2
    assert _stored_chains(citus_url) == expected
    log = StoreAuditLog(store)
    links = list(log.sealed_links(stop=16))
    assert [(link.notification_id, link.shard) for link in links] == expected
    # What exports read: the records with their links, in the sealed log's order.
    stored = [
        (record.notification_id, None if link is None else link.shard)
        for record, link in log.stored_records(log.log_bounds())
    ]
    assert stored == expected
    assert log.shard_heads(16) == heads
    # Each shard's head when the log held 6 records: its last row among the first 6.
    at_six: dict[int, ShardLink] = {}
    for _, link in expected[:6]:
        at_six[link.shard] = link
    assert log.shard_heads(6) == [
        ShardHead(shard, link.seq, link.shard_hash) for shard, link in sorted(at_six.items())
    ]


def test_a_checkpoint_signs_the_shards_heads_and_the_store_verifies_clean(
    store: EventSourcedStore, citus_url: str
) -> None:
    _saved(store, 6)
    _sealed(store)
    log = StoreAuditLog(store)
    key = Ed25519PrivateKey.generate()
    made = make_checkpoint(log, key, now=NOW)
    statement = made.checkpoint.statement
    _, heads = _expected_chains(citus_url)
    assert statement.version == 4
    assert (statement.shards_root, statement.shards_count) == (shards_root(heads), len(heads))
    assert made.shards == heads
    assert log.checkpoints() == [made.checkpoint]
    anchor = latest_anchor(log)
    assert anchor is not None
    assert anchor.shards == heads
    report = verify(log, trusted_key=raw_public_key(key))
    assert report.clean, report.findings


@pytest.mark.parametrize("column", ["shard_hash", "shard_seq"])
def test_a_rewritten_shard_column_is_found_by_verify(
    store: EventSourcedStore, citus_url: str, column: str
) -> None:
    _saved(store, 6)
    _sealed(store)
    log = StoreAuditLog(store)
    key = Ed25519PrivateKey.generate()
    make_checkpoint(log, key, now=NOW)
    expected, _ = _expected_chains(citus_url)
    # A shard's first record of several: its own link breaks, and the next one's (the
    # shard is followed on from the stored place).
    shard = next(
        link.shard
        for _, link in expected
        if sum(1 for _, other in expected if other.shard == link.shard) >= 2
    )
    first, second = [n for n, link in expected if link.shard == shard][:2]
    value: Any = b"\xff" * 32 if column == "shard_hash" else 7
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(
            "SELECT run_command_on_shards(%s, %s)",
            (
                _events(citus_url),
                f"UPDATE %s SET {column} = {sql.Literal(value).as_string(connection)} "
                f"WHERE notification_id = {first}",
            ),
        )
    report = verify(log, trusted_key=raw_public_key(key))
    broken = [f.notification_id for f in report.findings if f"shard {shard}'s log" in f.detail]
    assert broken == [first, second]
    assert {f.kind for f in report.findings if f.notification_id in (first, second)} == {"deleted"}


def test_a_rewritten_shard_head_breaks_the_checkpoint(
    store: EventSourcedStore, citus_url: str
) -> None:
    _saved(store, 6)
    _sealed(store)
    log = StoreAuditLog(store)
    key = Ed25519PrivateKey.generate()
    make_checkpoint(log, key, now=NOW)
    expected, heads = _expected_chains(citus_url)
    last = max(n for n, link in expected if link.shard == heads[0].shard)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(
            f"UPDATE {_events(citus_url)} SET shard_hash = %s WHERE notification_id = %s",
            (b"\xee" * 32, last),
        )
    report = verify(log, trusted_key=raw_public_key(key))
    kinds = sorted((f.kind, f.notification_id) for f in report.findings)
    assert ("deleted", last) in kinds
    assert [f for f in report.findings if f.kind == "checkpoint"]


def test_a_schema_distributed_before_the_shard_chains_gets_them_on_upgrade(
    citus_url: str,
) -> None:
    first = EventSourcedStore(citus_url, kind_of=no_kind)
    try:
        _saved(first, 6)
        _sealed(first)
    finally:
        first.close()
    events = _events(citus_url)
    schema = events.split(".", 1)[0]
    # The schema as ADR 0051's build left it: no shard columns, the view and trigger
    # without them.
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f"DROP VIEW {schema}.sw_chain")
        connection.execute(
            f"ALTER TABLE {events} DROP COLUMN log_shard, DROP COLUMN shard_seq, "
            "DROP COLUMN shard_hash"
        )
        connection.execute(
            f"CREATE VIEW {schema}.sw_chain AS SELECT notification_id, originator_id, "
            "originator_version, stream_hash, log_hash, log_seq, xact_id, shard_key "
            f"FROM {events} WHERE stream_hash IS NOT NULL"
        )
        connection.execute(
            f"CREATE OR REPLACE FUNCTION {schema}.sw_worker_xact() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN NEW.xact_id := pg_current_xact_id(); "
            "RETURN NEW; END $$"
        )
    with pytest.raises(NotDistributed, match="upgrade=yes"):
        EventSourcedStore(citus_url, kind_of=no_kind)
    upgraded = EventSourcedStore(f"{citus_url}&upgrade=yes", kind_of=no_kind)
    try:
        _saved(upgraded, 2, prefix="after")
        _sealed(upgraded)
        expected, _ = _expected_chains(citus_url)
        assert len(expected) == 16
        assert _stored_chains(citus_url) == expected
        report = verify(StoreAuditLog(upgraded))
        assert report.clean, report.findings
    finally:
        upgraded.close()


def test_records_imported_into_a_distributed_schema_get_the_copys_own_shard_chains(
    citus_url: str, tmp_path: Path, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import (ADR 0062) gives its sealed records the shard chains of the shards they
    are on in the copy, as the upgrade's backfill does (ADR 0067 §5): each shard's log
    starts at its first imported record, later records go on from there, and the copy
    verifies and takes a version-4 checkpoint like a store that was always distributed.
    The file (from SQLite here) carries no shard, so nothing of the chains is copied."""
    source = f"sqlite:///{tmp_path}/source.db"
    asyncio.run(populate(source, clock))
    exported = tmp_path / "log.jsonl"
    code, _, err = run_cli(
        capsys, "--store", source, "audit", "export", "--format", "jsonl", "-o", str(exported)
    )
    assert code == 0, err
    code, _, err = run_cli(capsys, "--store", citus_url, "audit", "import", str(exported))
    assert code == 0, err
    imported = len(_stored_chains(citus_url))
    assert imported > 10
    store = EventSourcedStore(citus_url, kind_of=no_kind)
    try:
        _saved(store, 4, prefix="after")
        _sealed(store)
        assert len(_stored_chains(citus_url)) == imported + 8
        chains = ShardChains()
        for record, link in stored_contents(citus_url)[0]:
            assert link is not None
            assert link.log_hash is not None
            assert link.shard is not None, record.notification_id
            expected = chains.follow(link.shard.shard, record.notification_id, link.stream_hash)
            assert link.shard == expected, record.notification_id
        assert len(chains.heads) > 1
        log = StoreAuditLog(store)
        key = Ed25519PrivateKey.generate()
        assert make_checkpoint(log, key, now=NOW).checkpoint.statement.version == 4
        report = verify(log, trusted_key=raw_public_key(key))
        assert report.clean, report.findings
    finally:
        store.close()
