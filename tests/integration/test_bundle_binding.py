"""Every field of a bundle is bound by the signature or a hash, or refused (issue 36 item
6, issue 42 item 6; ADR 0041; docs/evidence-format.md).

Replayed through ``sessionwire audit verify FILE`` with ``--trusted-key --expect-head
--require-anchored`` on bundles signed on each store (memory, SQLite, PostgreSQL): a
session bundle whose last event's position was renumbered and its log hash recomputed,
a statement carrying a field its signature does not cover, and an end line naming
another head all verified clean before."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from audit_rig import (
    audit_log_of,
    distributed,
    open_populated,
    run_cli,
    sealed_now,
    signed_records,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire.application.audit.checkpoint import (
    latest_anchor,
    make_checkpoint,
    public_key_text,
    raw_public_key,
    session_members,
)
from sessionwire.application.audit.export import export_lines
from sessionwire.domain.checkpoint import Checkpoint, Statement, sessions_root
from sessionwire.domain.hash_chain import log_hash
from sessionwire.testing import VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MAIN = "agent:main:main"
Line = dict[str, Any]


@dataclass(frozen=True)
class Signed:
    bundle: list[Line]  # MAIN's bundle
    whole: list[Line]  # the whole-store export
    key: str
    head: str


@pytest.fixture
async def signed(store_url: str, clock: VirtualClock) -> Signed:
    gateway = await open_populated(store_url, clock)
    try:
        with audit_log_of(gateway) as log:
            sealed_now(log)
            key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
            made = make_checkpoint(log, key, now=START)
            return Signed(
                bundle=signed_records(log, made, MAIN),
                whole=signed_records(log, made),
                key=public_key_text(raw_public_key(key)),
                head=made.checkpoint.statement.log_hash.hex(),
            )
    finally:
        await gateway.close()


def verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[Line], signed: Signed
) -> tuple[int, set[str], str]:
    file = tmp_path / "forged.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = run_cli(
        capsys,
        "--json",
        "audit",
        "verify",
        str(file),
        "--trusted-key",
        signed.key,
        "--expect-head",
        signed.head,
        "--require-anchored",
    )
    assert out, err
    report = json.loads(out)
    details = "\n".join(finding["detail"] for finding in report["findings"])
    return code, {finding["kind"] for finding in report["findings"]}, details


def renumbered_last(lines: list[Line], by: int) -> list[Line]:
    """The file's last event moved to another position, its log hash recomputed from the
    event before it, and the end line's head following: every hash a forger can make."""
    lines = [dict(line) for line in lines]
    events = [line for line in lines if line["type"] == "event"]
    last, before = events[-1], events[-2]
    last["notification_id"] += by
    last["log_hash"] = log_hash(
        bytes.fromhex(before["log_hash"]),
        last["notification_id"],
        bytes.fromhex(last["stream_hash"]),
    ).hex()
    end = lines[-1]
    assert end["type"] == "end"
    assert end["head_log_seq"] == last["log_seq"]
    end["head_notification_id"] = last["notification_id"]
    end["head_log_hash"] = last["log_hash"]
    return lines


async def test_the_genuine_bundle_and_export_verify_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Signed
) -> None:
    for lines in (signed.bundle, signed.whole):
        assert verify(capsys, tmp_path, lines, signed)[:2] == (0, set())


@pytest.mark.parametrize("by", [1, 1000])
async def test_a_renumbered_last_position_is_found(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Signed, by: int
) -> None:
    code, kinds, details = verify(capsys, tmp_path, renumbered_last(signed.bundle, by), signed)
    assert code == 1
    # The signed order (statement v3) holds each covered event's position and log hash.
    assert kinds == {"reordered"}, details
    assert "renumbered" in details


async def test_a_renumbered_position_in_a_whole_store_export_is_found(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Signed
) -> None:
    code, kinds, _ = verify(capsys, tmp_path, renumbered_last(signed.whole, 1), signed)
    assert code == 1
    assert "altered" in kinds  # the signed log hash is at the last record


@pytest.mark.parametrize(
    "field", [{"version": 2}, {"version": 3}, {"version": "3"}, {"note": "signed later"}]
)
async def test_a_statement_field_the_signature_does_not_cover_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Signed, field: dict[str, Any]
) -> None:
    for lines in (signed.bundle, signed.whole):
        forged = [
            {**line, "statement": {**line["statement"], **field}}
            if line["type"] == "checkpoint"
            else line
            for line in lines
        ]
        if forged == lines:
            continue  # the genuine statement has it already (v3's version: 3)
        code, kinds, details = verify(capsys, tmp_path, forged, signed)
        assert code == 1, field
        assert "malformed" in kinds, details
        # With the checkpoint refused, nothing anchors the file.
        assert "checkpoint" in kinds, details


async def test_an_end_line_naming_another_head_is_found(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Signed
) -> None:
    for lines in (signed.bundle, signed.whole):
        end = lines[-1]
        for changed in (
            {"head_notification_id": end["head_notification_id"] + 1},
            {"head_log_hash": "00" * 32},
            {"head_log_seq": end["head_log_seq"] - 1},
        ):
            forged = [*lines[:-1], {**end, **changed}]
            code, kinds, details = verify(capsys, tmp_path, forged, signed)
            assert code == 1, changed
            assert kinds == {"altered"}, details
        past = [*lines[:-1], {**end, "head_log_seq": end["head_log_seq"] + 1}]
        assert verify(capsys, tmp_path, past, signed)[:2] == (1, {"truncated"})


def respelled(lines: list[Line], kind: str, change: Any) -> list[Line]:
    """The first line of ``kind`` with ``change`` applied to a copy of it."""
    at = next(i for i, line in enumerate(lines) if line["type"] == kind)
    line = json.loads(json.dumps(lines[at]))
    change(line)
    return [*lines[:at], line, *lines[at + 1 :]]


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("event", lambda line: line.update(originator_id=line["originator_id"].upper())),
        ("event", lambda line: line.update(stream_hash=line["stream_hash"].upper())),
        ("proof", lambda line: line.update(path=[step.upper() for step in line["path"]])),
        ("members", lambda line: line.update(order=line["order"].upper())),
        ("checkpoint", lambda line: line.update(signature=line["signature"].upper())),
        ("checkpoint", lambda line: line.update(public_key=line["public_key"].rstrip("="))),
    ],
)
async def test_another_spelling_of_a_signed_value_is_refused(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    signed: Signed,
    kind: str,
    change: Any,
) -> None:
    """The same bytes written another way (upper-case hex or id, base64 unpadded): each
    value has one spelling, so no line differs from the signed one unchecked."""
    code, kinds, details = verify(capsys, tmp_path, respelled(signed.bundle, kind, change), signed)
    assert code == 1
    assert "malformed" in kinds, details


async def test_a_checkpoint_recorded_before_version_3_still_anchors_exports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, store_url: str, clock: VirtualClock
) -> None:
    """A store's version-2 checkpoint (recorded before the upgrade: no tree sizes) is
    read back as version 2, re-checked against the log with the version-1 order digest,
    and anchors a bundle and an export that verify clean under its rules."""
    gateway = await open_populated(store_url, clock)
    try:
        with audit_log_of(gateway) as log:
            sealed_now(log)
            key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
            current = make_checkpoint(log, key, now=START).checkpoint.statement
            head = log.sealed_head()
            assert head is not None
            members = session_members(log, head.size, log.stream_heads(head), 2)
            # As recorded before version 3: with no tree sizes, and so (on Citus) with no
            # shards_root either, which only version 4 signs (ADR 0067 §3).
            older = replace(
                current,
                sessions_root=sessions_root(members),
                heads_count=None,
                sessions_count=None,
                shards_root=None,
                shards_count=None,
            )
            assert older.version == 2
            log.record_checkpoint(
                Checkpoint(older, raw_public_key(key), key.sign(older.signed_bytes()))
            )
            anchor = latest_anchor(log)
            assert anchor is not None
            assert anchor.checkpoint.statement == older
            files = [
                [
                    json.loads(line)
                    for line in export_lines(
                        log,
                        session_key=session,
                        checkpoint=anchor.checkpoint,
                        heads=anchor.heads,
                        members=anchor.members,
                    )
                ]
                for session in (MAIN, None)
            ]
    finally:
        await gateway.close()
    signed = Signed(
        bundle=files[0],
        whole=files[1],
        key=public_key_text(raw_public_key(key)),
        head=older.log_hash.hex(),
    )
    for lines in files:
        [checkpoint] = [line for line in lines if line["type"] == "checkpoint"]
        assert "version" not in checkpoint["statement"]
        assert verify(capsys, tmp_path, lines, signed)[:2] == (0, set())


def resigned(lines: list[Line], change: Callable[[Line], Line]) -> list[Line]:
    """``lines`` with the checkpoint's statement changed and signed again with its key."""
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    out = []
    for line in lines:
        if line["type"] == "checkpoint":
            statement = Statement.from_json(change(line["statement"]))
            line = {
                **line,
                "statement": statement.to_json(),
                "signature": key.sign(statement.signed_bytes()).hex(),
            }
        out.append(line)
    return out


async def test_an_import_keeps_a_carried_checkpoint_only_if_it_signs_the_sessions_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signed: Signed, store_url: str
) -> None:
    """A checkpoint whose signature holds and whose log head and heads_root are the
    imported log's, but whose sessions_root is not, is not kept: kept, it made every
    later verify and export of the copy fail on the mismatch."""
    whole = signed.whole
    [statement] = [line["statement"] for line in whole if line["type"] == "checkpoint"]
    assert ("shards_root" in statement) is distributed(store_url)
    if distributed(store_url):
        # A version-4 checkpoint is never kept: the copy places its records on its own
        # shards, so no shard head it has is the signed one (ADR 0067 §5). The same
        # statement at version 3 (no shards) then shows the rule on sessions_root.
        file = tmp_path / "v4.jsonl"
        file.write_text("".join(json.dumps(line) + "\n" for line in whole))
        copy = f"sqlite:///{tmp_path}/v4.db"
        code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "import", str(file))
        assert code == 0, err
        (note,) = json.loads(out)["checkpoints"]
        assert note.endswith("was not kept: it signs the shard heads of the store exported")
        unsharded = {"shards_root", "shards_count"}
        whole = resigned(
            whole, lambda s: {**{k: v for k, v in s.items() if k not in unsharded}, "version": 3}
        )
    forged = resigned(whole, lambda s: {**s, "sessions_root": "00" * 32})
    for name, lines, kept in (("genuine", whole, True), ("forged", forged, False)):
        file = tmp_path / f"{name}.jsonl"
        file.write_text("".join(json.dumps(line) + "\n" for line in lines))
        copy = f"sqlite:///{tmp_path}/{name}.db"
        code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "import", str(file))
        assert code == 0, err
        (note,) = json.loads(out)["checkpoints"]
        assert ("was kept" in note) is kept, note
        code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "verify")
        assert code == 0, out + err
