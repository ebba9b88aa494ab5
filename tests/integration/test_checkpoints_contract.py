"""The checkpoint part of the audit port (ADR 0016 §3) on memory, SQLite and PostgreSQL:
the sealed head, the stream heads at a size, and recorded checkpoints, signed and read
back byte for byte."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from audit_rig import sealed_now
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire import Gateway
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.audit.checkpoint import (
    CheckpointMismatch,
    NothingToCheckpoint,
    latest_anchor,
    make_checkpoint,
    raw_public_key,
    signature_holds,
)
from sessionwire.domain.checkpoint import heads_root
from sessionwire.domain.hash_chain import GENESIS, log_hash
from sessionwire.domain.session import session_uuid

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def audit_log(gateway: Gateway) -> StoreAuditLog:
    """The gateway's store through the audit port, with every record sealed."""
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    log = StoreAuditLog(store)
    if log.log_bounds().last_event:
        sealed_now(log)
    return log


async def test_an_empty_log_has_no_head_and_nothing_to_sign(gateway: Gateway) -> None:
    log = audit_log(gateway)
    assert log.sealed_head() is None
    assert log.checkpoints() == []
    assert latest_anchor(log) is None
    with pytest.raises(NothingToCheckpoint):
        make_checkpoint(log, Ed25519PrivateKey.generate(), now=NOW)


async def test_the_sealed_head_and_stream_heads_follow_the_chain(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="one")
    await gateway.record_message("main", role="user", content="two")
    await gateway.record_message("discord:group:dev", role="user", content="three")
    log = audit_log(gateway)
    sealed_now(log)  # PostgreSQL seals behind its writers; SQLite sealed as it wrote
    links = list(log.chain_links(stop=10**9))
    head = log.sealed_head()
    assert head is not None
    assert (head.size, head.log_hash, head.position) == (
        len(links),
        links[-1].log_hash,
        links[-1].notification_id,
    )
    previous = GENESIS
    for link in links:  # the head is the linear chain's, whatever the engine
        previous = log_hash(previous, link.notification_id, link.stream_hash)
    assert previous == head.log_hash

    main = session_uuid("agent:main:main")
    heads = log.stream_heads(head)
    assert [h.originator_id.bytes for h in heads] == sorted(h.originator_id.bytes for h in heads)
    by_stream = {h.originator_id: h for h in heads}
    assert by_stream[main].version == 3
    assert (
        by_stream[main].stream_hash
        == [link.stream_hash for link in links if link.originator_id == main][-1]
    )

    # The head when the log held two records: main at version 2, no dev room yet.
    earlier = log.sealed_head(2)
    assert earlier is not None
    assert (earlier.size, earlier.log_hash) == (2, links[1].log_hash)
    assert [(h.originator_id, h.version) for h in log.stream_heads(earlier)] == [(main, 2)]
    assert log.sealed_head(len(links) + 1) is None


async def test_checkpoints_are_signed_recorded_and_read_back(gateway: Gateway) -> None:
    key = Ed25519PrivateKey.generate()
    await gateway.record_message("main", role="user", content="one")
    log = audit_log(gateway)
    first = make_checkpoint(log, key, now=NOW)
    await gateway.record_message("main", role="user", content="two")
    sealed_now(log)
    second = make_checkpoint(log, key, now=NOW)

    assert log.checkpoints(limit=5) == [second.checkpoint, first.checkpoint]
    for made in (first, second):
        assert signature_holds(made.checkpoint)
        assert made.checkpoint.statement.heads_root == heads_root(made.heads)
        assert made.checkpoint.statement.time == "2026-05-01T12:00:00Z"
    assert first.checkpoint.statement.log_size < second.checkpoint.statement.log_size
    anchor = latest_anchor(log)
    assert anchor is not None
    assert anchor.checkpoint == second.checkpoint
    assert anchor.heads == second.heads


async def test_a_statement_changed_after_signing_fails_its_signature(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="one")
    made = make_checkpoint(audit_log(gateway), Ed25519PrivateKey.generate(), now=NOW)
    checkpoint = made.checkpoint
    bigger = replace(checkpoint.statement, log_size=checkpoint.statement.log_size + 1)
    assert not signature_holds(replace(checkpoint, statement=bigger))
    other = Ed25519PrivateKey.generate().public_key()
    assert not signature_holds(replace(checkpoint, public_key=raw_public_key(other)))


async def test_a_log_rewritten_under_its_checkpoint_is_refused_as_an_anchor(
    gateway: Gateway,
) -> None:
    await gateway.record_message("main", role="user", content="one")
    log = audit_log(gateway)
    make_checkpoint(log, Ed25519PrivateKey.generate(), now=NOW)
    store = log.store
    with store.writing() as cursor:
        # The events table the chain's view reads (Citus updates no view over its tables).
        cursor.execute(
            f"UPDATE {store.chain.t.events} SET log_hash = {store.chain.t.marker} "
            "WHERE log_seq IS NOT NULL",
            (bytes(32),),
        )
    with pytest.raises(CheckpointMismatch):
        latest_anchor(log)


async def test_a_postgres_schema_made_before_checkpoints_gets_the_table(
    postgres_url: str,
) -> None:
    from sessionwire import GatewayConfig
    from sessionwire.adapters.bootstrap import open_event_store

    gateway = await Gateway.open(config=GatewayConfig(), store=postgres_url)
    await gateway.record_message("main", role="user", content="one")
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    with store.writing() as cursor:
        cursor.execute(f"DROP TABLE {store.chain.t.checkpoints}")
    await gateway.close()

    reopened = open_event_store(postgres_url, GatewayConfig())
    try:
        log = StoreAuditLog(reopened)
        sealed_now(log)
        made = make_checkpoint(log, Ed25519PrivateKey.generate(), now=NOW)
        assert log.checkpoints() == [made.checkpoint]
    finally:
        reopened.close()
