"""Each shard's own chain and the version-4 checkpoint statement (ADR 0067), with no
store: the expected bytes are written out from docs/evidence-format.md, not taken from the
code under test."""

from __future__ import annotations

import hashlib
import json

import pytest
from sessionwire.domain.checkpoint import ShardHead, Statement, shards_root, sort_shard_heads
from sessionwire.domain.hash_chain import (
    GENESIS,
    LogHead,
    ShardChains,
    ShardLink,
    seal_in_shard,
    shard_log_hash,
)
from sessionwire.domain.merkle import leaf_hash, root


def spec_shard_hash(previous: bytes, notification_id: int, stream: bytes) -> bytes:
    return hashlib.sha256(
        b"sessionwire/shard-log/v1\x00" + previous + notification_id.to_bytes(8, "big") + stream
    ).digest()


STREAM = [bytes([n]) * 32 for n in range(1, 7)]


def test_a_shard_hash_is_the_specified_bytes_and_differs_from_the_log_hash() -> None:
    from sessionwire.domain.hash_chain import log_hash

    assert shard_log_hash(GENESIS, 7, STREAM[0]) == spec_shard_hash(GENESIS, 7, STREAM[0])
    assert shard_log_hash(GENESIS, 7, STREAM[0]) != log_hash(GENESIS, 7, STREAM[0])


def test_each_shard_chains_only_its_own_records_in_the_sealed_order() -> None:
    # The sealed log: records 10, 11, 12, 13 on shards 2, 5, 2, 2.
    chains = ShardChains()
    got = [
        chains.follow(2, 10, STREAM[0]),
        chains.follow(5, 11, STREAM[1]),
        chains.follow(2, 12, STREAM[2]),
        chains.follow(2, 13, STREAM[3]),
    ]
    first = spec_shard_hash(GENESIS, 10, STREAM[0])
    third = spec_shard_hash(first, 12, STREAM[2])
    assert got == [
        ShardLink(2, 1, first),
        ShardLink(5, 1, spec_shard_hash(GENESIS, 11, STREAM[1])),
        ShardLink(2, 2, third),
        ShardLink(2, 3, spec_shard_hash(third, 13, STREAM[3])),
    ]
    assert chains.heads[2] == LogHead(3, got[3].shard_hash)
    assert chains.heads[5] == LogHead(1, got[1].shard_hash)


def test_sealing_in_a_shard_continues_its_head() -> None:
    head = LogHead(4, STREAM[5])
    seals = seal_in_shard(head, [(20, STREAM[0]), (23, STREAM[1])])
    first = spec_shard_hash(STREAM[5], 20, STREAM[0])
    assert [(s.notification_id, s.log_seq, s.log_hash) for s in seals] == [
        (20, 5, first),
        (23, 6, spec_shard_hash(first, 23, STREAM[1])),
    ]


def test_the_shards_root_is_the_merkle_root_of_the_specified_leaves_by_shard_id() -> None:
    heads = [ShardHead(9, 3, STREAM[0]), ShardHead(2, 10, STREAM[1])]
    leaves = [
        leaf_hash(
            b"sessionwire/shard-head/v1\x00"
            + (2).to_bytes(8, "big")
            + (10).to_bytes(8, "big")
            + STREAM[1]
        ),
        leaf_hash(
            b"sessionwire/shard-head/v1\x00"
            + (9).to_bytes(8, "big")
            + (3).to_bytes(8, "big")
            + STREAM[0]
        ),
    ]
    assert shards_root(sort_shard_heads(heads)) == root(leaves)


def v4() -> Statement:
    return Statement(
        log_size=12,
        log_hash=STREAM[0],
        heads_root=STREAM[1],
        time="2026-12-02T14:00:00Z",
        key_id="0123456789abcdef",
        sessions_root=STREAM[2],
        heads_count=4,
        sessions_count=2,
        shards_root=STREAM[3],
        shards_count=3,
    )


def test_a_version_4_statement_signs_the_shards_root_and_count() -> None:
    statement = v4()
    assert statement.version == 4
    expected = {
        "heads_count": 4,
        "heads_root": STREAM[1].hex(),
        "key_id": "0123456789abcdef",
        "log_hash": STREAM[0].hex(),
        "log_size": 12,
        "sessions_count": 2,
        "sessions_root": STREAM[2].hex(),
        "shards_count": 3,
        "shards_root": STREAM[3].hex(),
        "time": "2026-12-02T14:00:00Z",
        "version": 4,
    }
    assert (
        statement.signed_bytes()
        == b"sessionwire/checkpoint/v4\n"
        + json.dumps(expected, sort_keys=True, separators=(",", ":")).encode()
    )
    assert Statement.from_json(statement.to_json()) == statement


def test_shard_members_are_refused_in_a_version_3_statement_and_needed_in_a_4() -> None:
    shown = v4().to_json()
    shown["version"] = 3
    with pytest.raises(ValueError, match="signature does not cover: shards_count, shards_root"):
        Statement.from_json(shown)
    shown = v4().to_json()
    del shown["shards_count"]
    with pytest.raises(ValueError, match="needs shards_count"):
        Statement.from_json(shown)
    shown["shards_count"] = 3
    shown["version"] = 5
    with pytest.raises(ValueError, match="3 or 4"):
        Statement.from_json(shown)
