"""A session bundle binds its membership and order (issue 27 finding 2, ADR 0036 §7).

Each forgery the hostile review found clean before — with `--trusted-key K --expect-head H
--require-anchored` — now makes `audit verify FILE` exit 1 with the finding named: a
bundle with zero events, the session's own stream removed, a run's or spawn's stream
removed, another session's stream added, the cross-stream order rewritten, the header
relabelled, another session's bundle presented as this one's, and an edited event whose
proof line was deleted at a position the checkpoint covers."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from audit_rig import populate, run_cli, signed_records
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire import GatewayConfig
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.audit.checkpoint import (
    make_checkpoint,
    public_key_text,
    raw_public_key,
)
from sessionwire.domain.hash_chain import GENESIS, RecordContent, stream_hash
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MAIN = "agent:main:main"
DEV = "agent:main:discord:group:dev"
Line = dict[str, Any]


@dataclass(frozen=True)
class Bundles:
    main: list[Line]
    dev: list[Line]
    key: str
    head: str


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    url = f"sqlite:///{tmp_path_factory.mktemp('members')}/source.db"
    asyncio.run(populate(url, VirtualClock(start=START)))
    store = EventSourcedStore(
        url, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key, state.chat_type)
    )
    try:
        log = StoreAuditLog(store)
        key = Ed25519PrivateKey.generate()
        made = make_checkpoint(log, key, now=START)
        return Bundles(
            main=signed_records(log, made, MAIN),
            dev=signed_records(log, made, DEV),
            key=public_key_text(raw_public_key(key)),
            head=made.checkpoint.statement.log_hash.hex(),
        )
    finally:
        store.close()


def verify(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    lines: list[Line],
    bundles: Bundles,
    *extra: str,
) -> tuple[int, dict[str, Any]]:
    file = tmp_path / "bundle.jsonl"
    file.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    code, out, err = run_cli(
        capsys,
        "--json",
        "audit",
        "verify",
        str(file),
        "--trusted-key",
        bundles.key,
        "--expect-head",
        bundles.head,
        "--require-anchored",
        *extra,
    )
    assert out, err
    return code, json.loads(out)


def kinds(report: dict[str, Any]) -> set[str]:
    return {finding["kind"] for finding in report["findings"]}


def details(report: dict[str, Any]) -> str:
    return "\n".join(finding["detail"] for finding in report["findings"])


def recounted(lines: list[Line]) -> list[Line]:
    """The end line recounted, as someone covering their tracks would."""
    count = sum(1 for line in lines if line["type"] == "event")
    return [{**line, "events": count} if line["type"] == "end" else line for line in lines]


def without_streams(lines: list[Line], *streams: str) -> list[Line]:
    """The events and proof lines of ``streams`` removed, the end line recounted."""
    return recounted(
        [
            line
            for line in lines
            if line["type"] not in ("event", "proof") or line["originator_id"] not in streams
        ]
    )


def member_streams(bundles: Bundles) -> list[str]:
    [members] = [line for line in bundles.main if line["type"] == "members"]
    return [stream["originator_id"] for stream in members["streams"]]


def test_a_genuine_bundle_verifies_clean_with_every_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    code, report = verify(capsys, tmp_path, bundles.main, bundles, "--session", "main")
    assert (code, report["findings"], report["unanchored"]) == (0, [], 0)
    assert len(member_streams(bundles)) >= 3  # main, the spawn, its runs


def test_a_bundle_with_zero_events(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    lines = recounted([line for line in bundles.main if line["type"] not in ("event", "proof")])
    code, report = verify(capsys, tmp_path, lines, bundles)
    assert code == 1
    assert kinds(report) == {"truncated"}
    assert "holds none of its events" in details(report)


def test_the_session_s_own_stream_removed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    own = str(session_uuid(MAIN))
    code, report = verify(capsys, tmp_path, without_streams(bundles.main, own), bundles)
    assert code == 1
    assert kinds(report) == {"truncated"}
    [finding] = report["findings"]
    assert finding["stream"] == own


def test_another_stream_of_the_session_removed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    own = str(session_uuid(MAIN))
    for stream in member_streams(bundles):
        if stream == own:
            continue
        code, report = verify(capsys, tmp_path, without_streams(bundles.main, stream), bundles)
        assert code == 1, stream
        assert kinds(report) == {"truncated"}, stream
        assert report["findings"][0]["stream"] == stream


def test_another_session_s_stream_added(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    dev = str(session_uuid(DEV))
    foreign = [
        line for line in bundles.dev if line["type"] == "event" and line["originator_id"] == dev
    ]
    lines = [line for line in bundles.main if line["type"] == "event"] + foreign
    lines.sort(key=lambda line: line["log_seq"])
    head = [line for line in bundles.main if line["type"] == "header"]
    tail = [line for line in bundles.main if line["type"] not in ("header", "event")]
    code, report = verify(capsys, tmp_path, recounted(head + lines + tail), bundles)
    assert code == 1
    assert "inserted" in kinds(report)
    inserted = [f for f in report["findings"] if f["kind"] == "inserted"]
    assert {f["stream"] for f in inserted} == {dev}


def test_the_cross_stream_order_rewritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    # Two neighbouring events of different streams trade places, positions renumbered
    # to match: every stream's own order and every link still hold.
    lines = [dict(line) for line in bundles.main]
    events = [i for i, line in enumerate(lines) if line["type"] == "event"]
    first, second = next(
        (a, b)
        for a, b in itertools.pairwise(events)
        if lines[a]["originator_id"] != lines[b]["originator_id"]
    )
    for field in ("log_seq", "notification_id", "log_hash"):
        lines[first][field], lines[second][field] = lines[second][field], lines[first][field]
    lines[first], lines[second] = lines[second], lines[first]
    code, report = verify(capsys, tmp_path, lines, bundles)
    assert code == 1
    assert kinds(report) == {"reordered"}
    assert "signed order" in details(report)


def test_the_header_relabelled_to_another_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    lines = [
        {**line, "session": DEV} if line["type"] == "header" else line for line in bundles.main
    ]
    code, report = verify(capsys, tmp_path, lines, bundles)
    assert code == 1
    assert "checkpoint" in kinds(report)
    assert "its signed members are 'agent:main:main'" in details(report)


def test_another_session_s_bundle_presented_as_this_one_s(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    assert verify(capsys, tmp_path, bundles.dev, bundles)[0] == 0  # genuine, for its session
    code, report = verify(capsys, tmp_path, bundles.dev, bundles, "--session", "main")
    assert code == 1
    assert kinds(report) == {"checkpoint"}
    assert f"the bundle of {DEV}, not of {MAIN}" in details(report)


def test_an_edited_event_with_its_proof_line_deleted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    # The edit is chained again (its stream rehashed from there on) and the stream's proof
    # line removed: its position is one the checkpoint covers, so it is not "after" it.
    own = str(session_uuid(MAIN))
    lines = [
        dict(line)
        for line in bundles.main
        if not (line["type"] == "proof" and line["originator_id"] == own)
    ]
    previous = GENESIS
    edited = False
    for line in lines:
        if line["type"] != "event" or line["originator_id"] != own:
            continue
        if not edited and "hello" in line["state"]:
            line["state"] = line["state"].replace("hello", "HELLO")
            edited = True
        content = RecordContent(
            originator_id=session_uuid(MAIN),
            originator_version=line["originator_version"],
            topic=line["topic"],
            state=line["state"].encode(),
        )
        previous = stream_hash(previous, content)
        line["stream_hash"] = previous.hex()
    assert edited
    code, report = verify(capsys, tmp_path, lines, bundles)
    assert code == 1
    assert kinds(report) == {"altered"}
    assert "binds to the session" in details(report)


def test_a_bundle_without_its_members_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bundles: Bundles
) -> None:
    lines = [line for line in bundles.main if line["type"] != "members"]
    code, report = verify(capsys, tmp_path, lines, bundles)
    assert code == 1
    assert "no members line" in details(report)
