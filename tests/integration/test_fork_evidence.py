"""A fork's evidence (decision 34, docs/evidence-format.md §2.7): its session bundle holds
none of its source's rows, verifies alone under both verifiers, and its fork event names
the source's stream hash at the fork point, which the source's own bundle shows on the
event at that version: a reference a third party checks with the two files alone."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import evidence_verifier as spec
import pytest
from audit_rig import audit_log_of, run_cli, sealed_now, signed_records
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire import Gateway
from sessionwire.application.audit.checkpoint import make_checkpoint, raw_public_key
from sessionwire.testing import VirtualClock

SOURCE, FORK = "agent:main:main", "agent:main:retry"


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records))
    return path


async def test_a_forks_bundle_references_its_source_verifiably(
    store_url: str, clock: VirtualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = await Gateway.open(store=store_url, clock=clock)
    try:
        await gateway.record_message("main", role="user", content="one")
        await gateway.record_message("main", role="user", content="two")
        await gateway.fork_session("main", new_key="retry", at_version=2)
        await gateway.record_message("main", role="user", content="after the fork")
        with audit_log_of(gateway) as log:
            sealed_now(log)
            key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
            made = make_checkpoint(log, key, now=clock.now())
            fork_bundle = signed_records(log, made, FORK)
            source_bundle = signed_records(log, made, SOURCE)
    finally:
        await gateway.close()
    public = raw_public_key(key)

    for name, records in (("fork", fork_bundle), ("source", source_bundle)):
        verdict = spec.verify(
            [json.dumps(record) for record in records],
            trusted_key=public,
            expect_head=None,
            require_anchored=True,
            expect_session=None,
        )
        assert verdict.kinds == [], (name, verdict.kinds)
        file = write(tmp_path / f"{name}.jsonl", records)
        code, out, _ = run_cli(capsys, "--json", "audit", "verify", str(file))
        assert code == 0, out

    source_stream = str(uuid.UUID(bytes=spec.session_stream(SOURCE)))
    events = [r for r in fork_bundle if r["type"] == "event"]
    (forked,) = [r for r in events if r["topic"].endswith("Session.SessionForked")]
    point = json.loads(forked["state"])["point"]
    (at_point,) = [
        r
        for r in source_bundle
        if r["type"] == "event"
        and r["originator_id"] == source_stream
        and r["originator_version"] == point["record_version"]
    ]
    assert point["source_key"] == SOURCE
    assert point["version"] == 2
    assert at_point["stream_hash"] == point["stream_hash"]
    # By reference: not one of the source's rows is in the fork's bundle.
    assert all(r["originator_id"] != source_stream for r in events)
