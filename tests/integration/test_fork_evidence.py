"""A fork's evidence (decision 34, docs/evidence-format.md §2.7): its session bundle holds
none of its source's rows, verifies alone under both verifiers, and its fork event names
the source's stream hash at the fork point, which the source's own bundle shows on the
event at that version: a reference a third party checks with the two files alone. A
whole-store export holds both, so ``audit verify FILE`` checks every fork point in it
(§5.2 step 7), on every store."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import evidence_verifier as spec
import pytest
from audit_rig import audit_log_of, run_cli, sealed_now, signed_records
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.audit.checkpoint import (
    make_checkpoint,
    public_key_text,
    raw_public_key,
)
from sessionwire.application.audit.verify import verify
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.keys import agent_id_of
from sessionwire.domain.session import ForkPoint, Session, session_uuid
from sessionwire.testing import VirtualClock
from test_evidence_vectors import forge, independent_kinds, product_kinds

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


# A whole-store export checks its forks itself (docs/evidence-format.md §5.2 step 7) ----


def _options(tmp_path: Path, public: bytes, head: str) -> list[str]:
    key = tmp_path / "key.pub"
    key.write_text(public_key_text(public) + "\n")
    return ["--trusted-key", str(key), "--expect-head", head, "--require-anchored"]


def _head_of(records: list[dict[str, Any]]) -> str:
    (head,) = [r["statement"]["log_hash"] for r in records if r["type"] == "checkpoint"]
    return str(head)


async def test_an_export_checks_every_fork_point_against_its_source_on_each_store(
    store_url: str, clock: VirtualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The vectors' forks made on this store, exported whole: clean under both
    verifiers; each forgery of make_vectors.py (the point's hash or position changed,
    the source rewritten before it, each file rechained and signed again; the source
    edited alone; the source renamed away) gets its stated kinds from both."""
    gateway = await Gateway.open(store=store_url, clock=clock)
    try:
        await forge.record_forks(gateway)
        with audit_log_of(gateway) as log:
            sealed_now(log)
            made = make_checkpoint(log, forge.KEY, now=clock.now())
            export = signed_records(log, made, None)
    finally:
        await gateway.close()
    public = raw_public_key(forge.KEY)
    cases = [("export", export, [], "genuine")]
    cases += forge.fork_forgeries({"v3-export": export})
    assert len(cases) == 6
    for stem, records, kinds, what in cases:
        file = write(tmp_path / f"{stem}.jsonl", records)
        options = _options(tmp_path, public, _head_of(records))
        code, found = product_kinds(capsys, file, options)
        assert found == independent_kinds(file, options) == kinds, (stem, what)
        assert code == (1 if kinds else 0), stem


async def test_a_fork_point_forged_in_the_store_is_found_in_its_export_on_each_store(
    store_url: str, clock: VirtualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Points the source's chain does not have, written and signed by the store itself
    (so every hash and the signature hold): the store's ``audit verify`` and both
    verifiers of its export find each, the export as ``fork`` for a wrong hash and as
    ``unresolved`` for a source it holds no stream of."""
    gateway = await Gateway.open(store=store_url, clock=clock)
    try:
        await gateway.record_message("main", role="user", content="hello")
        await gateway.record_message("main", role="user", content="again")
        await gateway.fork_session("main", new_key="honest", at_version=2)
        service = internals(gateway)
        for key, point in (
            ("agent:main:wrong-hash", {"source_key": SOURCE, "stream_hash": "00" * 32}),
            ("agent:main:no-source", {"source_key": "agent:main:gone", "stream_hash": None}),
        ):
            forged = ForkPoint(version=2, record_version=2, messages=1, **point)
            async for uow in retrying(service.store, key):
                with uow:
                    fork = uow.add(
                        Session.open(
                            key=key,
                            session_id=service.ids.new_id(),
                            agent_id=agent_id_of(key),
                            at=service.clock.now(),
                        )
                    )
                    fork.fork_from(forged, at=service.clock.now())
                    await uow.commit()
        with audit_log_of(gateway) as log:
            store_report = verify(log)
            sealed_now(log)
            made = make_checkpoint(log, forge.KEY, now=clock.now())
            export = signed_records(log, made, None)
    finally:
        await gateway.close()

    assert sorted((f.kind, f.session_key) for f in store_report.findings) == [
        ("fork", "agent:main:no-source"),
        ("fork", "agent:main:wrong-hash"),
    ]
    file = write(tmp_path / "export.jsonl", export)
    options = _options(tmp_path, raw_public_key(forge.KEY), _head_of(export))
    code, out, _ = run_cli(capsys, "--json", "audit", "verify", str(file), *options)
    findings = json.loads(out)["findings"]
    assert code == 1
    forks = {session_uuid(key): key for key in ("agent:main:wrong-hash", "agent:main:no-source")}
    assert sorted((f["kind"], forks.get(UUID(f["stream"]))) for f in findings) == [
        ("fork", "agent:main:wrong-hash"),
        ("unresolved", "agent:main:no-source"),
    ]
    assert independent_kinds(file, options) == ["fork", "unresolved"]
