"""PostgreSQL's server-side save and sealing functions (ADR 0058): the server's seals are
the domain's, a fenced message's save is one call, and a schema whose functions are of
another version gets them replaced when a store opens it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from postgres_server import ON_CITUS, schema_of
from protocol_trace import sent, traced
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store import postgres_functions
from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind
from sessionwire.application.ports.session_locks import LeaseLost
from sessionwire.domain.hash_chain import LogHead, seal
from store_sessions import opened, with_message


def save_functions(url: str) -> set[str]:
    """The save and sealing functions (ADR 0058) in the store's schema."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        rows = connection.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname IN ('sw_append_one', 'sw_append_many', 'sw_seal')",
            (schema_of(url),),
        ).fetchall()
    return {str(name) for (name,) in rows}


def sealed_rows(url: str) -> list[tuple[int, bytes, int, bytes]]:
    """(position, stream hash, log_seq, log hash) of every sealed row, in sealed order."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        rows = connection.execute(
            "SELECT notification_id, stream_hash, log_seq, log_hash "
            f'FROM "{schema_of(url)}".sessionwire_events WHERE log_seq IS NOT NULL '
            "ORDER BY log_seq"
        ).fetchall()
    return [(int(n), bytes(own), int(seq), bytes(log)) for n, own, seq, log in rows]


def test_the_servers_seals_are_the_domains(postgres_url: str) -> None:
    store = EventSourcedStore(postgres_url, kind_of=no_kind)
    try:
        for key in ("agent:main:a", "agent:main:b"):
            session = opened(key)
            store.save(session)
            for text in ("one", "two", "three"):
                session = with_message(session, text)
                store.save(session)
        store.seal()
    finally:
        store.close()
    rows = sealed_rows(postgres_url)
    assert [seq for _, _, seq, _ in rows] == list(range(1, len(rows) + 1))
    expected = seal(LogHead(), [(n, own) for n, own, _, _ in rows])
    assert [(n, seq, log) for n, _, seq, log in rows] == [
        (x.notification_id, x.log_seq, x.log_hash) for x in expected
    ]


def test_a_schema_with_functions_of_another_version_gets_them_replaced_on_open(
    postgres_url: str,
) -> None:
    store = EventSourcedStore(postgres_url, kind_of=no_kind)
    store.close()
    # Citus saves are routed statements and its sealer reads each worker's bound (ADR
    # 0062): the store installs none of these functions, and calls none found there.
    installed = set() if ON_CITUS else {"sw_append_one", "sw_append_many", "sw_seal"}
    assert save_functions(postgres_url) == installed
    schema = f'"{schema_of(postgres_url)}"'
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
        # An older gateway's definitions (here: one that cannot seal) and their version.
        connection.execute(
            f"CREATE OR REPLACE FUNCTION {schema}.sw_seal(p_wait boolean, p_page integer) "
            "RETURNS integer LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'an old definition'; END $$"
        )
        connection.execute(f"UPDATE {schema}.sw_format SET value = 0 WHERE name = 'functions'")
    store = EventSourcedStore(postgres_url, kind_of=no_kind)
    try:
        store.recorder.stop_sealing()  # the pass below is the only one
        store.save(opened("agent:main:a"))
        assert store.seal() == 1
    finally:
        store.close()
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
        found = connection.execute(
            f"SELECT value FROM {schema}.sw_format WHERE name = 'functions'"
        ).fetchone()
    # Citus records no version of functions it does not install, and replaces nothing.
    assert found == (None if ON_CITUS else (postgres_functions.VERSION,))
    assert save_functions(postgres_url) == installed | {"sw_seal"}


@pytest.fixture
def fenced_stores(postgres_url: str) -> Iterator[list[EventSourcedStore]]:
    url = f"{postgres_url}&lease_seconds=3600"  # no renewal while a test looks
    stores = [open_event_store(url, GatewayConfig()) for _ in range(2)]
    for store in stores:
        store.recorder.stop_sealing()  # only the saves' own messages on the connections
    yield stores
    for store in stores:
        store.close()


async def test_a_fenced_message_is_one_call_and_a_moved_fence_still_refuses_it(
    fenced_stores: list[EventSourcedStore], tmp_path: Path
) -> None:
    first, second = fenced_stores
    key = "agent:main:main"
    await first.save_async(opened(key))
    async with first.session_lock(key):
        stored = first.session(key)
        assert stored is not None
        trace = tmp_path / "trace.txt"
        with traced(first, trace):
            await first.save_async(with_message(stored.to_aggregate(), "under the lease"))
        # Before the save function: BEGIN, the fence check, the insert, COMMIT. On Citus
        # (ADR 0062) still those four, routed statements pipelined in one round trip.
        assert (sent(trace, "Sync"), sent(trace, "Execute")) == (1, 4 if ON_CITUS else 1)
        # Another gateway takes the lease (as after this one's death, by SQL): the
        # fence moved on, and the next fenced save is refused whole.
        with psycopg.connect(str(first.backend.location).split("?")[0]) as connection:
            connection.execute(
                f'UPDATE "{first.recorder.datastore.schema}".sw_session_leases '
                "SET fence = fence + 1 WHERE session_key = %s",
                (key,),
            )
        latest = first.session(key)
        assert latest is not None
        with pytest.raises(LeaseLost, match="moved on"):
            await first.save_async(with_message(latest.to_aggregate(), "late"))
    after = second.session(key)
    assert after is not None
    assert after.version == latest.version
