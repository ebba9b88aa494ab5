"""``audit verify FILE`` on session bundles and whole-store exports, with no store: every
alteration, deletion, insertion and reordering is found and located (event index,
version, stream), a file cut short is found, the checkpoint's signature, key and head are
checked, and events after the checkpoint are reported as unanchored (ADR 0016 §4)."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from audit_rig import populate, run_cli, signed_lines
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessionwire import GatewayConfig
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.audit.checkpoint import (
    make_checkpoint,
    public_key_text,
    raw_public_key,
)
from sessionwire.application.audit.verify_file import FileReport, verify_file
from sessionwire.domain.hash_chain import GENESIS, RecordContent, log_hash, stream_hash
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MAIN = "agent:main:main"
Line = dict[str, Any]


@dataclass(frozen=True)
class Files:
    session: list[str]  # the bundle of MAIN, lines as exported
    scanned: list[str]  # the same, its streams found by scanning the log, not the index
    whole: list[str]  # the whole-store export
    public_key: bytes
    log_hash: bytes
    url: str

    def __repr__(self) -> str:
        return f"Files({self.url})"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    url = f"sqlite:///{tmp_path_factory.mktemp('bundle')}/source.db"
    asyncio.run(populate(url, VirtualClock(start=START)))
    store = EventSourcedStore(
        url, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key, state.chat_type)
    )
    try:
        log = StoreAuditLog(store)
        key = Ed25519PrivateKey.generate()
        made = make_checkpoint(log, key, now=START)
        session = signed_lines(log, made, MAIN)
        whole = signed_lines(log, made)
        log.session_records = lambda key: None  # type: ignore[method-assign]
        scanned = signed_lines(log, made, MAIN)
    finally:
        store.close()
    return Files(
        session=session,
        scanned=scanned,
        whole=whole,
        public_key=raw_public_key(key),
        log_hash=made.checkpoint.statement.log_hash,
        url=url,
    )


def parsed(lines: list[str]) -> list[Line]:
    return [json.loads(line) for line in lines]


def dumped(lines: list[Line]) -> list[str]:
    return [json.dumps(line) for line in lines]


def event_indexes(lines: list[Line]) -> list[int]:
    """Where the event lines are in ``lines``."""
    return [i for i, line in enumerate(lines) if line["type"] == "event"]


def check(lines: list[Line], **options: Any) -> FileReport:
    return verify_file(dumped(lines), **options)


def kinds(report: FileReport) -> list[str]:
    return [finding.kind for finding in report.findings]


def fixed_end(lines: list[Line]) -> list[Line]:
    """The end line recounted, as someone covering their tracks would."""
    count = sum(1 for line in lines if line["type"] == "event")
    return [{**line, "events": count} if line["type"] == "end" else line for line in lines]


def rechained(lines: list[Line]) -> list[Line]:
    """Every stream and log hash recomputed with the published rule."""
    streams: dict[str, bytes] = {}
    head = GENESIS
    out: list[Line] = []
    for line in lines:
        if line["type"] == "event":
            content = RecordContent(
                originator_id=uuid.UUID(line["originator_id"]),
                originator_version=line["originator_version"],
                topic=line["topic"],
                state=line["state"].encode(),
            )
            own = stream_hash(streams.get(line["originator_id"], GENESIS), content)
            streams[line["originator_id"]] = own
            head = log_hash(head, line["notification_id"], own)
            line = {**line, "stream_hash": own.hex(), "log_hash": head.hex()}
        out.append(line)
    return out


def events_of(lines: list[Line]) -> list[tuple[str, int]]:
    return [
        (line["originator_id"], line["originator_version"]) for line in lines if "topic" in line
    ]


def main_stream_events(lines: list[Line]) -> list[int]:
    main = str(session_uuid(MAIN))
    return [i for i in event_indexes(lines) if lines[i]["originator_id"] == main]


# Clean files --------------------------------------------------------------------------


def test_a_session_bundle_verifies_alone_against_its_checkpoint(files: Files) -> None:
    lines = parsed(files.session)
    assert [line["type"] for line in lines][-3:] != ["event", "event", "end"]
    streams = {line["originator_id"] for line in lines if line["type"] == "event"}
    proofs = [line for line in lines if line["type"] == "proof"]
    assert len(streams) >= 3  # main, its spawn, the run and the child it took part in
    assert {proof["originator_id"] for proof in proofs} == streams
    report = verify_file(files.session, trusted_key=files.public_key, expect_head=files.log_hash)
    assert report.clean, report.findings
    assert report.scope == "session"
    assert report.unanchored == 0
    assert report.anchored == report.events == len(event_indexes(lines))
    assert report.checkpoint is not None
    assert report.checkpoint.signature_holds
    assert report.checkpoint.trusted is True


def test_a_bundle_read_through_the_index_equals_one_found_by_scanning_the_log(
    files: Files,
) -> None:
    assert files.session == files.scanned


def test_a_whole_store_export_verifies_against_the_signed_log_hash(files: Files) -> None:
    report = verify_file(files.whole, trusted_key=files.public_key, expect_head=files.log_hash)
    assert report.clean, report.findings
    assert (report.scope, report.unanchored) == ("all", 0)
    assert report.anchored == report.events > 10


# Located findings -----------------------------------------------------------------------


def test_an_altered_event_is_named_by_index_and_version(files: Files) -> None:
    lines = parsed(files.session)
    target = main_stream_events(lines)[1]
    lines[target]["state"] = lines[target]["state"].replace("hello", "HELLO")
    report = check(lines)
    assert kinds(report) == ["altered"]
    finding = report.findings[0]
    assert finding.event == event_indexes(lines).index(target) + 1
    assert (finding.version, finding.line) == (2, target + 1)
    assert finding.originator_id == session_uuid(MAIN)


def test_a_deleted_event_is_named_at_the_version_after_it(files: Files) -> None:
    lines = parsed(files.session)
    target = main_stream_events(lines)[1]
    del lines[target]
    report = check(fixed_end(lines))
    assert kinds(report) == ["deleted"]
    assert report.findings[0].version == 3
    assert "version 2" in report.findings[0].detail


def test_an_inserted_copy_of_an_event_is_named(files: Files) -> None:
    lines = parsed(files.session)
    target = main_stream_events(lines)[1]
    lines.insert(target + 2, dict(lines[target]))
    report = check(fixed_end(lines))
    assert "inserted" in kinds(report)
    inserted = next(f for f in report.findings if f.kind == "inserted")
    assert (inserted.version, inserted.line) == (2, target + 3)


def test_events_swapped_within_a_stream_are_named_as_reordered(files: Files) -> None:
    lines = parsed(files.session)
    first, second = main_stream_events(lines)[1:3]
    lines[first], lines[second] = lines[second], lines[first]
    report = check(lines)
    # Two neighbours swapped: either one moved past the other, and the one named is
    # the one out of the longest run in log order.
    assert kinds(report) == ["reordered"]
    assert report.findings[0].version in {2, 3}
    assert report.findings[0].event is not None


def test_a_bundle_cut_short_is_found(files: Files) -> None:
    lines = parsed(files.session)
    cut = lines[: main_stream_events(lines)[-1]]
    report = check(cut)
    assert "truncated" in kinds(report)
    assert any("no end line" in f.detail for f in report.findings)


def test_a_bundle_cut_short_with_its_tracks_covered_is_found_by_its_proof(files: Files) -> None:
    lines = parsed(files.session)
    last = main_stream_events(lines)[-1]
    version = lines[last]["originator_version"]
    del lines[last]
    report = check(fixed_end(lines))
    assert kinds(report) == ["truncated"]
    finding = report.findings[0]
    assert finding.version == version
    assert f"ends it at version {version - 1}" in finding.detail


def test_a_rewritten_stream_with_recomputed_links_fails_its_proof(files: Files) -> None:
    lines = parsed(files.session)
    target = main_stream_events(lines)[1]
    lines[target]["state"] = lines[target]["state"].replace("hello", "HELLO")
    report = check(rechained(lines))
    assert kinds(report) == ["altered"]
    head = main_stream_events(lines)[-1]
    assert report.findings[0].version == lines[head]["originator_version"]
    assert "rewritten at or before" in report.findings[0].detail


def test_a_rewritten_whole_store_export_fails_the_signed_log_hash(files: Files) -> None:
    lines = parsed(files.whole)
    target = event_indexes(lines)[1]
    lines[target]["state"] = lines[target]["state"].replace("hello", "HELLO")
    report = check(rechained(lines))
    assert kinds(report) == ["altered", "altered"]  # the log hash and the heads root
    assert report.findings[0].event == len(event_indexes(lines))


def test_a_whole_store_export_cut_short_is_found_against_the_checkpoint(files: Files) -> None:
    lines = parsed(files.whole)
    del lines[event_indexes(lines)[-1]]
    last = [line for line in lines if line["type"] == "event"][-1]
    lines = [
        {**line, "head_notification_id": last["notification_id"], "head_log_hash": last["log_hash"]}
        if line["type"] == "end"
        else line
        for line in fixed_end(lines)
    ]
    report = check(lines)
    assert kinds(report) == ["truncated"]
    assert "signs a log of" in report.findings[0].detail


def test_removed_hashes_and_garbled_lines_are_located(files: Files) -> None:
    lines = parsed(files.session)
    target = main_stream_events(lines)[1]
    del lines[target]["stream_hash"], lines[target]["log_hash"]
    text = dumped(lines)
    text[main_stream_events(lines)[2]] = "{not json"
    report = verify_file(text)
    assert {(f.kind, f.line) for f in report.findings} >= {
        ("altered", target + 1),
        ("malformed", main_stream_events(lines)[2] + 1),
    }


def test_an_event_appended_after_the_checkpoint_is_unanchored(files: Files) -> None:
    lines = parsed(files.session)
    last = main_stream_events(lines)[-1]
    extra = dict(lines[last])
    del extra["log_hash"], extra["log_seq"]  # written after the checkpoint: not sealed yet
    extra["originator_version"] += 1
    extra["notification_id"] = 10**6
    content = RecordContent(
        originator_id=uuid.UUID(extra["originator_id"]),
        originator_version=extra["originator_version"],
        topic=extra["topic"],
        state=extra["state"].encode(),
    )
    extra["stream_hash"] = stream_hash(bytes.fromhex(lines[last]["stream_hash"]), content).hex()
    lines.insert(event_indexes(lines)[-1] + 1, extra)
    report = check(fixed_end(lines))
    assert report.clean, report.findings
    assert report.unanchored == 1
    strict = check(fixed_end(lines), require_anchored=True)
    assert kinds(strict) == ["unanchored"]


# The checkpoint ---------------------------------------------------------------------------


def test_a_changed_statement_or_signature_fails(files: Files) -> None:
    for field, value in (("log_size", 1), ("time", "2020-01-01T00:00:00Z")):
        lines = parsed(files.session)
        for line in lines:
            if line["type"] == "checkpoint":
                line["statement"][field] = value
        assert "checkpoint" in kinds(check(lines)), field


def test_another_key_or_another_head_is_a_finding(files: Files) -> None:
    other = raw_public_key(Ed25519PrivateKey.generate())
    report = verify_file(files.session, trusted_key=other)
    assert kinds(report) == ["checkpoint"]
    assert "not by the trusted key" in report.findings[0].detail
    report = verify_file(files.session, expect_head=bytes(32))
    assert kinds(report) == ["checkpoint"]
    unsigned = [line for line in parsed(files.session) if line["type"] not in ("checkpoint",)]
    report = check(unsigned, trusted_key=files.public_key)
    assert kinds(report) == ["checkpoint"]
    assert report.unanchored == report.events


# Any one mutation ----------------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operation=st.sampled_from(["alter", "delete", "duplicate", "move"]),
    pick=st.integers(min_value=0, max_value=10**6),
    to=st.integers(min_value=0, max_value=10**6),
    whole=st.booleans(),
)
def test_any_single_mutation_is_found_and_names_its_stream(
    files: Files, operation: str, pick: int, to: int, whole: bool
) -> None:
    original = parsed(files.whole if whole else files.session)
    lines = parsed(files.whole if whole else files.session)
    events = event_indexes(lines)
    target = events[pick % len(events)]
    stream = uuid.UUID(lines[target]["originator_id"])
    allowed = {stream}
    if operation == "alter":
        lines[target]["state"] = lines[target]["state"].replace("{", '{"x":1,', 1)
    elif operation == "delete":
        del lines[target]
    elif operation == "duplicate":
        lines.insert(target, dict(lines[target]))
    else:
        moved = lines.pop(target)
        remaining = event_indexes(lines)
        place = remaining[to % len(remaining)]
        if place == target:
            place = remaining[(to + 1) % len(remaining)]
        lines.insert(place, moved)
        if events_of(lines) == events_of(original):
            return  # put back where it was: the same file
        low, high = sorted((target, lines.index(moved)))
        crossed = [line for line in lines[low : high + 1] if "topic" in line and line is not moved]
        if len(crossed) == 1:
            # Moved past one neighbour: the same file as the neighbour moved past it.
            allowed.add(uuid.UUID(crossed[0]["originator_id"]))
    report = check(fixed_end(lines))
    assert not report.clean, (operation, target)
    if whole and operation == "delete":
        # A stream's last event removed from the whole log leaves no gap in its stream:
        # the log chain names where a record went (at the next event), or the
        # checkpoint finds the log cut short when it was the last.
        following = lines[target]
        if following["type"] != "event":
            assert "truncated" in kinds(report)
            return
        if any(
            f.kind == "deleted" and f.notification_id == following["notification_id"]
            for f in report.findings
        ):
            return
    assert any(finding.originator_id in allowed for finding in report.findings), (
        operation,
        report.findings,
    )


# The command line ----------------------------------------------------------------------------


def test_the_command_exits_0_clean_1_findings_2_usage(
    capsys: pytest.CaptureFixture[str], files: Files, tmp_path: Path
) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("\n".join(files.session) + "\n")
    bad.write_text("\n".join(files.session).replace("hello", "HELLO") + "\n")
    key = public_key_text(files.public_key)
    code, out, err = run_cli(capsys, "audit", "verify", str(good), "--trusted-key", key)
    assert code == 0, err
    assert "clean: a session bundle (agent:main:main)" in out
    assert "trusted key" in out
    code, out, _ = run_cli(capsys, "--json", "audit", "verify", str(bad), "--trusted-key", key)
    assert code == 1
    report = json.loads(out)
    assert [f["kind"] for f in report["findings"]] == ["altered"]
    assert report["findings"][0]["version"] == 2
    assert run_cli(capsys, "audit", "verify", str(tmp_path / "missing.jsonl"))[0] == 2
    assert run_cli(capsys, "audit", "verify", str(good), "--trusted-key", "nope")[0] == 2
    assert run_cli(capsys, "audit", "verify", str(good), "--expect-head", "abc")[0] == 2
    # The head kept from a checkpoint verifies the store too; another one does not.
    head = files.log_hash.hex()
    code, out, _ = run_cli(
        capsys,
        "--store",
        files.url,
        "--json",
        "audit",
        "verify",
        "--expect-head",
        head,
        "--trusted-key",
        key,
    )
    assert code == 0, out
    code, out, _ = run_cli(
        capsys, "--store", files.url, "--json", "audit", "verify", "--expect-head", "00" * 32
    )
    assert code == 1
    assert "not in the chain" in json.loads(out)["findings"][0]["detail"]


@pytest.mark.parametrize(
    ("line_type", "field"),
    [
        ("event", "notification_id"),
        ("event", "originator_version"),
        ("event", "log_seq"),
        ("proof", "version"),
        ("proof", "tree_size"),
        ("end", "head_log_seq"),
        ("checkpoint", "log_size"),
    ],
)
def test_a_position_past_64_bits_is_a_malformed_line_not_a_traceback(
    files: Files, capsys: pytest.CaptureFixture[str], tmp_path: Path, line_type: str, field: str
) -> None:
    """Issue 27 finding 8: 2^63 in a position raised OverflowError out of ``audit verify
    FILE``; it is a finding (malformed, at its line), exit 1."""
    lines = parsed(files.session)
    at = next(i for i, line in enumerate(lines) if line["type"] == line_type)
    if line_type == "checkpoint":
        lines[at] = {**lines[at], "statement": {**lines[at]["statement"], field: 2**63}}
    else:
        lines[at] = {**lines[at], field: 2**63}
    path = tmp_path / "huge.jsonl"
    path.write_text("".join(line + "\n" for line in dumped(lines)))
    code, out, err = run_cli(capsys, "--json", "audit", "verify", str(path))
    assert code == 1, err
    report = json.loads(out)
    malformed = [f for f in report["findings"] if f["kind"] == "malformed"]
    assert [f["line"] for f in malformed] == [at + 1], report["findings"]
