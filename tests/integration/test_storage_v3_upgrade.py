"""Storage v3 (ADR 0036) from a real v2 store: ``tests/fixtures/storage_v2`` was written by
the v2 code (its README says how). Opening it upgrades it in place, resumably, with
progress on stderr; it then verifies with the same head, reads as it did, and its log
goes on. A v2 export still imports, and a v2 bundle still verifies."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from audit_rig import run_cli, verify_json
from sessionwire.adapters.store import sqlite_format

V2 = Path(__file__).resolve().parents[1] / "fixtures" / "storage_v2"
V2_EVENTS = 63


HISTORY_FLAGS = ("truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes")


def golden(name: str) -> Any:
    return json.loads((V2 / f"golden_{name}.json").read_text())


@pytest.fixture
def v2_file(tmp_path: Path) -> Path:
    copy = tmp_path / "v2.db"
    shutil.copyfile(V2 / "v2_demo.db", copy)
    return copy


def url_of(file: Path) -> str:
    return f"sqlite:///{file}"


def kinds(file: Path) -> dict[str, str]:
    connection = sqlite3.connect(file)
    try:
        return dict(connection.execute("SELECT name, type FROM sqlite_master").fetchall())
    finally:
        connection.close()


def reads(capsys: pytest.CaptureFixture[str], file: Path) -> dict[str, Any]:
    """What list and history print, as the goldens were taken (paths made alike)."""
    common = ["--store", url_of(file), "--config", str(V2 / "demo.config.json"), "--json"]
    found: dict[str, Any] = {}
    for name, args in (
        ("list", ["sessions", "list"]),
        ("history_main", ["sessions", "history", "main"]),
        ("history_main_tools", ["sessions", "history", "main", "--include-tools"]),
    ):
        if name == "history_main_tools":
            args = [*args, "--limit", "1000"]
        code, out, err = run_cli(capsys, *common, *args)
        assert code == 0, err
        found[name] = json.loads(out)
    for row in found["list"]["sessions"]:
        row.pop("transcriptPath", None)
    # Flags history answers gained after the goldens were taken (decision 27): each
    # says nothing was left out of these short histories.
    for name in ("history_main", "history_main_tools"):
        flags = {key: found[name].pop(key) for key in HISTORY_FLAGS if key in found[name]}
        assert flags == {
            "truncated": False,
            "droppedMessages": False,
            "contentTruncated": False,
            "contentRedacted": False,
            "bytes": flags.get("bytes"),
        }, flags
    return found


def goldens() -> dict[str, Any]:
    found = {name: golden(name) for name in ("list", "history_main", "history_main_tools")}
    for row in found["list"]["sessions"]:
        row.pop("transcriptPath", None)
    return found


@contextmanager
def transaction(file: Path) -> Iterator[sqlite3.Cursor]:
    connection = sqlite3.connect(file, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield connection.cursor()
        connection.execute("COMMIT")
    finally:
        connection.close()


def test_a_real_v2_store_upgrades_in_place_and_reads_as_it_did(
    capsys: pytest.CaptureFixture[str], v2_file: Path
) -> None:
    assert kinds(v2_file)["sw_chain"] == "table"
    code, out, err = run_cli(capsys, "--store", url_of(v2_file), "--json", "audit", "verify")
    report = json.loads(out)
    assert (code, report["findings"]) == (0, [])
    assert report == golden("verify")  # the same records, the same head
    assert f"storage v3: upgrading {V2_EVENTS} events in place (resumable)" in err
    assert "storage v3: upgrade done" in err

    assert kinds(v2_file)["sw_chain"] == "view"
    assert kinds(v2_file)["sw_transcript"] == "view"
    assert reads(capsys, v2_file) == goldens()
    # Opened again: nothing left to upgrade, nothing printed.
    code, _, err = run_cli(capsys, "--store", url_of(v2_file), "--json", "audit", "verify")
    assert code == 0
    assert "storage v3" not in err


def test_an_upgrade_stopped_midway_resumes_where_it_stopped(
    capsys: pytest.CaptureFixture[str], v2_file: Path
) -> None:
    lines: list[str] = []
    stopped = sqlite_format.upgrade(
        lambda: transaction(v2_file), progress=lines.append, batch=10, stop_after=2
    )
    assert stopped is True
    assert lines == [
        f"storage v3: upgrading {V2_EVENTS} events in place (resumable)",
        f"storage v3: 10/{V2_EVENTS} events",
        f"storage v3: 20/{V2_EVENTS} events",
    ]
    assert kinds(v2_file)["sw_chain"] == "table"  # as a crash would leave it

    code, out, err = run_cli(capsys, "--store", url_of(v2_file), "--json", "audit", "verify")
    assert (code, json.loads(out)) == (0, golden("verify"))
    assert f"storage v3: resuming the upgrade at event 20 of {V2_EVENTS}" in err
    assert kinds(v2_file)["sw_chain"] == "view"
    assert reads(capsys, v2_file) == goldens()


async def test_the_log_of_an_upgraded_store_goes_on(
    capsys: pytest.CaptureFixture[str], v2_file: Path
) -> None:
    from sessionwire import Gateway, GatewayConfig
    from sessionwire.testing import VirtualClock

    gateway = await Gateway.open(
        config=GatewayConfig(), store=url_of(v2_file), clock=VirtualClock(), resume=False
    )
    try:
        await gateway.record_message("main", role="user", content="after the upgrade")
        await gateway.record_many(
            "main", [{"role": "assistant", "content": "one"}, {"role": "user", "content": "two"}]
        )
        result = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "main", "limit": 4}
        )
    finally:
        await gateway.close()
    texts = [m["content"][0]["text"] for m in result["messages"]]
    assert texts == ["after the batch", "after the upgrade", "one", "two"]
    code, report = verify_json(capsys, url_of(v2_file))
    assert (code, report["findings"], report["checked"]) == (0, [], V2_EVENTS + 3)


def test_a_v2_export_imports_into_a_v3_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    copy = tmp_path / "imported.db"
    code, _, err = run_cli(
        capsys, "--store", url_of(copy), "audit", "import", str(V2 / "export.jsonl")
    )
    assert code == 0, err
    assert kinds(copy)["sw_chain"] == "view"
    code, report = verify_json(capsys, url_of(copy))
    assert (code, report["findings"], report["checked"]) == (0, [], V2_EVENTS)
    assert report["head"]["log_hash"] == golden("verify")["head"]["log_hash"]
    assert reads(capsys, copy) == goldens()


def test_a_v2_bundle_still_verifies(capsys: pytest.CaptureFixture[str]) -> None:
    key = (V2 / "checkpoint.pub").read_text().strip()
    code, out, _ = run_cli(
        capsys, "--json", "audit", "verify", str(V2 / "bundle_main.jsonl"), "--trusted-key", key
    )
    report = json.loads(out)
    assert (code, report["findings"], report["events"]) == (0, [], 48)


def test_a_v2_gateway_cannot_write_into_an_upgraded_file(
    capsys: pytest.CaptureFixture[str], v2_file: Path
) -> None:
    assert verify_json(capsys, url_of(v2_file))[0] == 0
    # What the v2 code's projection does with every message: refused, with the reason.
    connection = sqlite3.connect(v2_file)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="this store is storage v3"):
            connection.execute(
                "INSERT INTO sw_transcript (session, seq, role, message) VALUES ('x', 1, 'u', '{}')"
            )
    finally:
        connection.close()


def test_a_v3_export_imports_with_the_same_history_columns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import asyncio

    from audit_rig import populate
    from sessionwire.testing import VirtualClock

    source, copy, whole = tmp_path / "source.db", tmp_path / "copy.db", tmp_path / "all.jsonl"
    asyncio.run(populate(url_of(source), VirtualClock()))  # messages with provenance (a spawn's)
    assert run_cli(capsys, "--store", url_of(source), "audit", "export", "-o", str(whole))[0] == 0
    code, _, err = run_cli(capsys, "--store", url_of(copy), "audit", "import", str(whole))
    assert code == 0, err

    def columns(file: Path) -> list[tuple[Any, ...]]:
        connection = sqlite3.connect(file)
        try:
            return connection.execute(
                "SELECT rowid, role, body, provenance FROM stored_events ORDER BY rowid"
            ).fetchall()
        finally:
            connection.close()

    written = columns(source)
    assert any(row[3] is not None for row in written)  # some lines carry a provenance
    assert columns(copy) == written
    for key in ("main", "discord:group:dev"):
        args = ["--json", "sessions", "history", key, "--include-tools"]
        assert (
            run_cli(capsys, "--store", url_of(copy), *args)[1]
            == (run_cli(capsys, "--store", url_of(source), *args)[1])
        )


async def test_postgresql_writes_v3_records(postgres_url: str) -> None:
    # Storage v3 on PostgreSQL too (ADR 0036 §6): short topics, a batch one row per
    # message (its upgrade from a real v2 schema: test_storage_v3_upgrade_postgres.py).
    from audit_rig import RawStore
    from sessionwire import Gateway, GatewayConfig
    from sessionwire.testing import VirtualClock

    gateway = await Gateway.open(config=GatewayConfig(), store=postgres_url, clock=VirtualClock())
    try:
        await gateway.record_message("main", role="user", content="one")
        await gateway.record_many("main", [{"role": "user", "content": "two"}] * 2)
    finally:
        await gateway.close()
    raw = RawStore(postgres_url)
    topics = [raw.event(position)[2] for position in raw.positions()]
    assert topics == ["Session.SessionOpened", *["Msg"] * 3]


async def test_a_line_with_multibyte_text_and_a_provenance_reads_as_its_event(
    tmp_path: Path,
) -> None:
    # The history slices bytes in SQL (ADR 0036 §2): lengths are in bytes, not characters.
    from sessionwire import Gateway, GatewayConfig
    from sessionwire.adapters.testkit.internals import store_of
    from sessionwire.domain.causality import Provenance
    from sessionwire.domain.session import Session, session_uuid
    from sessionwire.domain.transcript import TranscriptMessage
    from sessionwire.testing import VirtualClock

    clock = VirtualClock()
    gateway = await Gateway.open(
        config=GatewayConfig(), store=url_of(tmp_path / "u.db"), clock=clock
    )
    try:
        await gateway.record_message("main", role="user", content="grüße 👋 «ok»")
        store = store_of(gateway)
        stored = store.session("agent:main:main")
        assert stored is not None
        session = stored.to_aggregate()
        text = 'ünïcödé ✓ 中文 "quoted" \\ back'
        session.append_message(
            TranscriptMessage(
                role="assistant", content=[{"type": "text", "text": text}], timestamp=1
            ),
            at=clock.now(),
            provenance=Provenance(kind="a2a", session_key="agent:ops:main", run_id="r-ü", hops=2),
        )
        store.save(session)
        lines = store.transcript(session_uuid("agent:main:main"), limit=10, include_tools=True)
        expected = [
            event.transcript_message().to_json()
            for event in store.stream(session_uuid("agent:main:main"))
            if isinstance(event, Session.MessageAppended)
        ]
    finally:
        await gateway.close()
    assert lines == expected
    assert json.loads(lines[-1])["provenance"] == {
        "kind": "a2a",
        "sessionKey": "agent:ops:main",
        "runId": "r-ü",
        "hops": 2,
    }
    assert json.loads(lines[-1])["content"][0]["text"] == text
