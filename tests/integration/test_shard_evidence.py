"""Exports and bundles of a store distributed by session (decision 39, ADR 0067;
docs/evidence-format.md §2.2, §3.8, §3.9, §5.3).

No Citus cluster runs here, so the store's log is read through ``ShardedLog``: the log of
a memory, SQLite or PostgreSQL store with each sealed link given its ``ShardLink`` the
way a distributed store's chain reads give it (the shard of its stream, its place and
hash in that shard's log). Whole-store exports then carry each sealed record's shard and
bundles none; under a version-4 statement over the same log both verifiers find the
files clean; an import keeps the events but not a checkpoint that signs shard heads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import evidence_verifier as spec
import pytest
from audit_rig import audit_log_of, open_populated, run_cli, sealed_now
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.audit.checkpoint import Checkpointed, make_checkpoint
from sessionwire.application.audit.export import export_lines, import_export
from sessionwire.application.audit.verify_file import verify_file
from sessionwire.application.ports.audit_log import AuditLog, LogBounds, StoredRecord
from sessionwire.domain.checkpoint import Checkpoint
from sessionwire.domain.hash_chain import ChainLink, ShardLink
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"
SHARDS = (102008, 102009)


class ShardedLog:
    """``log`` as a distributed store reads it: every sealed link with its shard link,
    each stream on one of ``SHARDS``, each shard chained along the sealed log (spec §3.8,
    laid out here from its bytes)."""

    def __init__(self, log: StoreAuditLog) -> None:
        self.log = log
        self.shard_links: dict[int, ShardLink] = {}
        heads: dict[int, tuple[int, bytes]] = {}
        for record, link in log.stored_records(log.log_bounds()):
            if link is None or link.log_hash is None:
                continue
            shard = SHARDS[record.content.originator_id.int % len(SHARDS)]
            size, previous = heads.get(shard, (0, bytes(32)))
            own = hashlib.sha256(
                b"sessionwire/shard-log/v1\0"
                + previous
                + record.notification_id.to_bytes(8, "big")
                + link.stream_hash
            ).digest()
            heads[shard] = (size + 1, own)
            self.shard_links[record.notification_id] = ShardLink(shard, size + 1, own)
        self.heads = heads

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)

    def _linked(
        self, found: list[tuple[StoredRecord, ChainLink | None]] | Iterator[Any]
    ) -> Iterator[tuple[StoredRecord, ChainLink | None]]:
        for record, link in found:
            shard = self.shard_links.get(record.notification_id)
            yield record, (link if link is None or shard is None else replace(link, shard=shard))

    def stored_records(self, bounds: LogBounds) -> Iterator[tuple[StoredRecord, ChainLink | None]]:
        return self._linked(self.log.stored_records(bounds))

    def session_records(self, key: str) -> list[tuple[StoredRecord, ChainLink | None]] | None:
        found = self.log.session_records(key)
        return None if found is None else list(self._linked(found))


def shards_root(heads: dict[int, tuple[int, bytes]]) -> tuple[bytes, int]:
    """§3.9 over ``heads`` (shard -> size, shard hash), by the second verifier's tree."""
    leaves = [spec.leaf(spec.shard_head_data(s, *heads[s])) for s in sorted(heads)]
    return spec.tree_root(leaves), len(leaves)


def version_4(made: Checkpointed, key: Ed25519PrivateKey, log: ShardedLog) -> Checkpointed:
    """``made``'s statement signed again as version 4 with the shard heads at its size
    (every record is sealed and within it: ``sealed_now`` ran first)."""
    root, count = shards_root(log.heads)
    statement = replace(made.checkpoint.statement, shards_root=root, shards_count=count)
    assert statement.version == 4
    signed = Checkpoint(statement, made.checkpoint.public_key, key.sign(statement.signed_bytes()))
    return replace(made, checkpoint=signed)


@pytest.fixture
async def sharded(store_url: str, clock: VirtualClock) -> dict[str, Any]:
    gateway = await open_populated(store_url, clock)
    try:
        with audit_log_of(gateway) as store_log:
            sealed_now(store_log)
            key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
            log = ShardedLog(store_log)
            made = version_4(make_checkpoint(store_log, key, now=clock.now()), key, log)

            def export(session: str | None) -> list[str]:
                return list(
                    export_lines(
                        cast(AuditLog, log),
                        session_key=session,
                        checkpoint=made.checkpoint,
                        heads=made.heads,
                        members=made.members,
                    )
                )

            return {
                "whole": export(None),
                "bundle": export(MAIN),
                "links": log.shard_links,
                "options": {
                    "trusted_key": made.checkpoint.public_key,
                    "expect_head": made.checkpoint.statement.log_hash,
                    "require_anchored": True,
                },
            }
    finally:
        await gateway.close()


def events(lines: list[str]) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, lines) if line["type"] == "event"]


async def test_a_whole_store_export_names_each_sealed_records_shard_and_a_bundle_none(
    sharded: dict[str, Any],
) -> None:
    whole = events(sharded["whole"])
    assert whole
    assert all(line.get("log_hash") for line in whole)  # every record sealed
    links: dict[int, ShardLink] = sharded["links"]
    assert [line.get("shard") for line in whole] == [
        links[line["notification_id"]].shard for line in whole
    ]
    assert {line["shard"] for line in whole} == set(SHARDS)
    bundle = events(sharded["bundle"])
    assert bundle
    assert all("shard" not in line for line in bundle)


async def test_both_verifiers_find_the_distributed_stores_files_clean_under_statement_4(
    sharded: dict[str, Any],
) -> None:
    options = sharded["options"]
    for name in ("whole", "bundle"):
        report = verify_file(sharded[name], **options)
        assert report.findings == [], name
        assert report.checkpoint is not None
        assert report.checkpoint.version == 4
        verdict = spec.verify(sharded[name], **options)
        assert (verdict.kinds, verdict.statement_version) == ([], 4), name


async def test_a_moved_record_is_found_by_its_shards_head_alone(
    sharded: dict[str, Any],
) -> None:
    """One record put on the other shard: every other hash and the signature hold; only
    the shard heads at the checkpoint differ (§5.3), for both verifiers."""
    lines = [json.loads(line) for line in sharded["whole"]]
    at = next(i for i, line in enumerate(lines) if line["type"] == "event")
    lines[at]["shard"] = next(s for s in SHARDS if s != lines[at]["shard"])
    text = [json.dumps(line) for line in lines]
    options = sharded["options"]
    assert {f.kind for f in verify_file(text, **options).findings} == {"altered"}
    assert set(spec.verify(text, **options).kinds) == {"altered"}


async def test_an_import_keeps_the_events_but_not_a_statement_over_shard_heads(
    sharded: dict[str, Any], tmp_path: Path
) -> None:
    """The copy places its records itself, so the source's shard heads are not its own:
    not kept, even from a file whose shard ids were removed (every other root holds)."""
    stripped = [
        json.dumps({k: v for k, v in json.loads(line).items() if k != "shard"})
        for line in sharded["whole"]
    ]
    for name, lines in (("whole", sharded["whole"]), ("stripped", stripped)):
        copy = f"sqlite:///{tmp_path}/{name}.db"
        store = EventSourcedStore(copy, kind_of=lambda state: "other")
        try:
            notes: list[str] = []
            count = import_export(StoreAuditLog(store), lines, notes=notes)
            assert count == len(events(sharded["whole"]))
            assert len(notes) == 1
            assert "was not kept: it signs the shard heads" in notes[0], name
            assert StoreAuditLog(store).checkpoints(limit=1) == [], name
        finally:
            store.close()


def test_verify_says_when_a_files_shards_are_bound_by_no_statement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Under statement v3 a whole-store export's shard ids are bound by nothing (§4): the
    report says so, as it says what a bundle's older statement leaves unbound."""
    vectors = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"
    said = {}
    for name in (
        "forged/v4shards-export-shard-forged-under-v3",
        "genuine/v4shards-statement-v4-export",
        "genuine/v3rows-statement-v3-export",
    ):
        code, out, _ = run_cli(capsys, "audit", "verify", str(vectors / f"{name}.jsonl"))
        assert code == 0, out
        said[name] = "shards not bound" in out
    assert said == {
        "forged/v4shards-export-shard-forged-under-v3": True,
        "genuine/v4shards-statement-v4-export": False,
        "genuine/v3rows-statement-v3-export": False,
    }
