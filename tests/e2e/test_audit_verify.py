"""``sessionwire audit verify``: every stored event is chained; editing the store directly
(an SQLite file, PostgreSQL rows) shows up as altered, deleted, inserted or reordered
records, by stream and position, and the command exits 1."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from audit_rig import RawStore, populate, verify_json
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"
DEV = "agent:main:discord:group:dev"


@pytest.fixture(params=["sqlite", "postgres"])
async def raw(request: pytest.FixtureRequest, tmp_path: Any, clock: VirtualClock) -> RawStore:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audited.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    await populate(url, clock)
    return RawStore(url)


def stream_positions(raw: RawStore, key: str) -> list[int]:
    """Log positions of one session's events, in version order."""
    originator = session_uuid(key)
    return [
        position
        for position in raw.positions()
        if raw.event(position)[0].replace("-", "") == originator.hex
    ]


def findings(report: dict[str, Any]) -> list[tuple[str, str | None, int | None, int]]:
    return [
        (
            f["kind"],
            f["stream"]["session_key"],
            f["position"]["version"],
            f["position"]["notification_id"],
        )
        for f in report["findings"]
    ]


def shard_breaks(report: dict[str, Any]) -> list[int]:
    """Where a shard's own log breaks (a store distributed on Citus, ADR 0067): reported
    beside the sealed log's breaks."""
    return [
        f["position"]["notification_id"]
        for f in report["findings"]
        if f["kind"] == "deleted" and "'s log breaks at position" in f["detail"]
    ]


def log_findings(report: dict[str, Any]) -> list[tuple[str, str | None, int | None, int]]:
    """``findings`` but a shard's log's breaks."""
    return [
        found
        for found, f in zip(findings(report), report["findings"], strict=True)
        if "'s log breaks at position" not in f["detail"]
    ]


def next_in_shard(raw: RawStore, position: int) -> list[int]:
    """On Citus, the record after ``position`` in its shard's own log (none elsewhere, or
    for a shard's last record): where that log breaks when ``position`` is removed."""
    if "distribution=citus" not in raw.url:
        return []
    ((shard, seq),) = raw.rows(
        "SELECT log_shard, log_seq FROM sw_chain WHERE notification_id = ?", (position,)
    )
    after = raw.rows(
        "SELECT notification_id FROM sw_chain WHERE log_shard = ? AND log_seq > ? "
        "ORDER BY log_seq LIMIT 1",
        (shard, seq),
    )
    return [after[0][0]] if after else []


def test_an_untouched_store_verifies_clean(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    code, report = verify_json(capsys, raw.url)
    assert code == 0
    assert report["clean"] is True
    assert report["findings"] == []
    assert report["checked"] == len(raw.positions()) > 10
    # The head is the sealed log's last record. One writer sealed in position order; on
    # Citus a pass seals one shard (ADR 0067), so another shard's rows may come after.
    ((last_sealed,),) = raw.rows(
        "SELECT notification_id FROM sw_chain ORDER BY log_seq DESC LIMIT 1"
    )
    assert report["head"]["notification_id"] == last_sealed
    if not raw.distributed:
        assert last_sealed == raw.positions()[-1]
    assert len(report["head"]["log_hash"]) == 64


def test_a_changed_byte_is_an_altered_record(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    position = stream_positions(raw, MAIN)[1]  # "hello"
    state = raw.event(position)[3]
    assert b"hello" in state
    raw.run(
        (
            "UPDATE stored_events SET state = ? WHERE {pos} = ?",
            (state.replace(b"hello", b"hellO"), position),
        )
    )
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    assert findings(report) == [("altered", MAIN, 2, position)]


def test_a_removed_row_is_a_deleted_record(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    position = stream_positions(raw, DEV)[2]  # the label patch
    # The record sealed after it, where the sealed log breaks: the next position on one
    # writer; on Citus, whichever record the sealer ordered next (ADR 0051).
    ((sealed_at,),) = raw.rows(
        "SELECT log_seq FROM sw_chain WHERE notification_id = ?", (position,)
    )
    ((sealed_next,),) = raw.rows(
        "SELECT notification_id FROM sw_chain WHERE log_seq = ?", (sealed_at + 1,)
    )
    shard_next = next_in_shard(raw, position)
    raw.run(("DELETE FROM stored_events WHERE {pos} = ?", (position,)))
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    # Storage v3 (ADR 0036): the chain link is a column of the row, so the row and its
    # link go together: the stream names the missing version (at the position of the
    # version after it) and the sealed log the gap; on Citus so does the shard's log.
    assert log_findings(report) == [
        ("deleted", DEV, 3, stream_positions(raw, DEV)[2]),
        ("deleted", None, None, sealed_next),
    ]
    assert shard_breaks(report) == shard_next


def test_removing_a_row_and_its_chain_row_still_shows_a_deletion(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    position = stream_positions(raw, DEV)[2]
    raw.run(
        ("DELETE FROM stored_events WHERE {pos} = ?", (position,)),
        ("DELETE FROM sw_chain WHERE notification_id = ?", (position,)),
    )
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    kinds = {kind for kind, *_ in findings(report)}
    assert kinds == {"deleted"}
    # The stream chain names the missing version; the log chain the gap after it.
    assert ("deleted", DEV, 3, stream_positions(raw, DEV)[2]) in findings(report)
    assert any(f[3] > position and f[2] is None for f in findings(report))


def test_a_forged_row_is_an_inserted_record(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    positions = stream_positions(raw, MAIN)
    originator = raw.event(positions[-1])[0]
    last_version = len(positions)
    forged = raw.event(positions[1])[3].replace(b"hello", b"send me the keys")
    columns, values = "originator_id, originator_version, topic, state", "?, ?, ?, ?"
    row: tuple[Any, ...] = (originator, last_version + 1, raw.event(positions[1])[2], forged)
    if raw.distributed:
        # On Citus a row needs its stream's shard key, as a forger copying a row would.
        ((shard_key,),) = raw.rows(
            "SELECT shard_key FROM stored_events WHERE {pos} = ?", (positions[1],)
        )
        columns, values, row = f"{columns}, shard_key", f"{values}, ?", (*row, shard_key)
    raw.run((f"INSERT INTO stored_events ({columns}) VALUES ({values})", row))
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    assert findings(report) == [("inserted", MAIN, last_version + 1, raw.positions()[-1])]


def test_swapped_positions_are_reordered_records(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    first, second = stream_positions(raw, MAIN)[1:3]
    raw.run(
        ("UPDATE stored_events SET {pos} = ? WHERE {pos} = ?", (-1, first)),
        ("UPDATE stored_events SET {pos} = ? WHERE {pos} = ?", (first, second)),
        ("UPDATE stored_events SET {pos} = ? WHERE {pos} = ?", (second, -1)),
    )
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    # Storage v3: each row took its link along, so no link names another event; the
    # sealed log's hashes (which cover each position) break at both positions, and on
    # Citus the shard's log's (the stream's two records are in one shard).
    assert log_findings(report) == [
        ("deleted", None, None, second),
        ("deleted", None, None, first),
    ]
    citus = "distribution=citus" in raw.url
    assert shard_breaks(report) == ([second, first] if citus else [])


def test_swapped_versions_are_reordered_records(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    first, second = stream_positions(raw, DEV)[1:3]
    raw.run(
        ("UPDATE stored_events SET originator_version = -1 WHERE {pos} = ?", (first,)),
        ("UPDATE stored_events SET originator_version = 2 WHERE {pos} = ?", (second,)),
        ("UPDATE stored_events SET originator_version = 3 WHERE {pos} = ?", (first,)),
    )
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    # Storage v3: each row kept its own link, whose stream hash covers its old version:
    # both rows differ from what was chained at their versions, and so does the next.
    assert findings(report) == [
        ("altered", DEV, 3, first),
        ("altered", DEV, 2, second),
        ("altered", DEV, 4, stream_positions(raw, DEV)[3]),
    ]


def test_events_from_before_the_chain_are_counted_as_unchained(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    # A store written before this version had no chain rows at all.
    before = len(raw.positions())
    raw.run(("DELETE FROM sw_chain", ()))
    code, report = verify_json(capsys, raw.url)
    assert (code, report["unchained"], report["findings"]) == (0, before, [])


def test_the_command_prints_a_table_of_findings_and_exits_1(raw: RawStore) -> None:
    position = stream_positions(raw, MAIN)[1]
    shard_next = next_in_shard(raw, position)
    raw.run(("DELETE FROM stored_events WHERE {pos} = ?", (position,)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionwire.adapters.cli.main",
            "--store",
            raw.url,
            "audit",
            "verify",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    # Storage v3: the stream's gap and the sealed log's (the link went with the row),
    # and on Citus the shard's log's.
    assert f"{2 + len(shard_next)} finding(s)" in done.stdout
    assert "deleted" in done.stdout
    assert MAIN in done.stdout
