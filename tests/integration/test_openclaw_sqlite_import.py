"""``import openclaw`` of a newer OpenClaw's per-agent SQLite store,
``agents/<agentId>/agent/openclaw-agent.sqlite``: ``session_entries`` holds each session's
entry JSON, ``transcript_events`` its JSONL records by ``seq``. The tables below are the
columns of OpenClaw's src/state/openclaw-agent-schema.sql that the reader relies on."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from audit_rig import run_cli

SCHEMA = """
CREATE TABLE sessions (
  session_id TEXT NOT NULL PRIMARY KEY,
  session_key TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_entries (
  session_key TEXT NOT NULL PRIMARY KEY,
  session_id TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  status TEXT,
  FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
) STRICT;
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq),
  FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
) STRICT;
"""
MAIN_ID = "5d1c0a7e-1111-4b2c-8d3e-000000000001"
CODER_ID = "5d1c0a7e-2222-4b2c-8d3e-000000000002"
T = 1_775_037_600_000  # 2026-04-01 10:00 UTC


def record(role: str, text: str, at: int) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": f"m{at}",
            "message": {"role": role, "content": text, "timestamp": at},
        }
    )


def database(
    root: Path, agent: str, sessions: dict[str, tuple[str, dict[str, Any], list[str]]]
) -> Path:
    path = root / "agents" / agent / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    for key, (session_id, entry, events) in sessions.items():
        updated = entry.get("updatedAt", T)
        connection.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?)", (session_id, key, T, updated)
        )
        connection.execute(
            "INSERT INTO session_entries VALUES (?, ?, ?, ?, NULL)",
            (key, session_id, json.dumps(entry), updated),
        )
        for seq, event in enumerate(events):
            connection.execute(
                "INSERT INTO transcript_events VALUES (?, ?, ?, ?)", (session_id, seq, event, T)
            )
    connection.commit()
    connection.close()
    return path


def test_a_newer_openclaw_sqlite_store_imports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "state"
    main_db = database(
        root,
        "main",
        {
            "agent:main:main": (
                MAIN_ID,
                {
                    "sessionId": MAIN_ID,
                    "updatedAt": T + 60_000,
                    "model": "claude",
                    "deliveryContext": {"channel": "telegram", "to": "42"},
                    "totalTokens": 99,
                },
                [
                    json.dumps({"type": "session", "id": MAIN_ID, "version": 3}),
                    record("user", "hello from sqlite", T),
                    "{not json",
                    record("assistant", "hi, stored in a table", T + 1_000),
                ],
            ),
        },
    )
    database(
        root,
        "coder",
        {
            "agent:coder:main": (
                CODER_ID,
                {"sessionId": CODER_ID, "updatedAt": T},
                [record("user", "compile it", T)],
            )
        },
    )
    store = f"sqlite:///{tmp_path}/imported.db"

    code, out, err = run_cli(capsys, "--store", store, "--json", "import", "openclaw", str(root))

    assert code == 0, err
    report = json.loads(out)
    assert sorted(report["imported"]) == ["agent:coder:main", "agent:main:main"]
    assert report["messages"] == 3
    assert [(p["file"], p["line"]) for p in report["problems"]] == [
        (f"{main_db}:transcript_events:{MAIN_ID}", 2)
    ]
    assert report["problems"][0]["reason"].startswith("not JSON")

    code, out, err = run_cli(capsys, "--store", store, "--json", "sessions", "history", "main")
    assert code == 0, err
    texts = [m["content"][0]["text"] for m in json.loads(out)["messages"]]
    assert texts == ["hello from sqlite", "hi, stored in a table"]
    code, out, err = run_cli(capsys, "--store", store, "--json", "sessions", "list")
    rows = {row["key"]: row for row in json.loads(out)["sessions"]}
    assert rows["main"]["sessionId"] == MAIN_ID
    assert (rows["main"]["model"], rows["main"]["lastTo"]) == ("claude", "42")
    assert rows["main"]["updatedAt"] == T + 60_000


def test_a_database_without_the_tables_is_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "state"
    path = root / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    connection = sqlite3.connect(path)
    # Views with the right names are not tables: a crafted file's SQL is never run.
    connection.executescript(
        "CREATE VIEW session_entries AS SELECT 1 AS x; "
        "CREATE VIEW transcript_events AS SELECT 1 AS x;"
    )
    connection.close()
    store = f"sqlite:///{tmp_path}/imported.db"
    code, out, err = run_cli(capsys, "--store", store, "--json", "import", "openclaw", str(root))
    assert code == 0, err
    report = json.loads(out)
    assert report["imported"] == []
    assert [p["reason"] for p in report["problems"]] == [
        "not an OpenClaw agent database: no session_entries and transcript_events tables"
    ]


# A crafted database (issue 27 finding 6) ------------------------------------------------

CRAFTED_TRANSCRIPT = (
    "CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, "
    "created_at INTEGER);"
)


def crafted(tmp_path: Path, script: str) -> Path:
    root = tmp_path / "state"
    path = root / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.commit()
    connection.close()
    return root


def imported(capsys: pytest.CaptureFixture[str], tmp_path: Path, root: Path) -> dict[str, Any]:
    store = f"sqlite:///{tmp_path}/imported.db"
    code, out, err = run_cli(capsys, "--store", store, "--json", "import", "openclaw", str(root))
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        ("session_id TEXT GENERATED ALWAYS AS ('" + MAIN_ID + "') VIRTUAL", "generated"),
        ("session_id TEXT GENERATED ALWAYS AS ('" + MAIN_ID + "') STORED", "generated"),
    ],
)
def test_a_generated_column_is_refused_before_any_row_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, column: str, kind: str
) -> None:
    """Reading a generated column evaluates its expression, whatever trusted_schema
    says: a 12 KB file took a gigabyte. Such a table is not OpenClaw's: refused whole."""
    entry = json.dumps({"sessionId": MAIN_ID, "updatedAt": T})
    root = crafted(
        tmp_path,
        f"CREATE TABLE session_entries (session_key TEXT, {column}, entry_json TEXT, "
        f"updated_at INTEGER); {CRAFTED_TRANSCRIPT} "
        f"INSERT INTO session_entries (session_key, entry_json, updated_at) "
        f"VALUES ('agent:main:main', '{entry}', {T});",
    )
    report = imported(capsys, tmp_path, root)
    assert report["imported"] == []
    [problem] = report["problems"]
    assert problem["reason"] == (
        f"database not read: session_entries.session_id is a {kind} column, not OpenClaw's"
    )


def test_a_virtual_table_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no fts5 module")
    finally:
        probe.close()
    root = crafted(
        tmp_path,
        "CREATE VIRTUAL TABLE session_entries USING fts5(session_key, session_id, entry_json, "
        f"updated_at); {CRAFTED_TRANSCRIPT}",
    )
    report = imported(capsys, tmp_path, root)
    assert report["imported"] == []
    [problem] = report["problems"]
    assert (
        problem["reason"] == "database not read: session_entries is a virtual table, not OpenClaw's"
    )


def test_a_database_larger_than_the_file_bound_is_not_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionwire.adapters.importers import openclaw

    root = tmp_path / "state"
    path = database(root, "main", {"agent:main:main": (MAIN_ID, {"sessionId": MAIN_ID}, [])})
    monkeypatch.setattr(openclaw, "MAX_FILE_BYTES", path.stat().st_size - 1)
    report = imported(capsys, tmp_path, root)
    assert report["imported"] == []
    [problem] = report["problems"]
    assert problem["file"] == str(path)
    assert problem["reason"].startswith("database not read: ")
    assert "more than the" in problem["reason"]


def test_an_oversized_key_is_never_fetched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "state"
    database(
        root,
        "main",
        {
            "agent:main:" + "k" * 5000: (MAIN_ID, {"sessionId": MAIN_ID}, []),
            "agent:main:main": (CODER_ID, {"sessionId": CODER_ID}, [record("user", "hi", T)]),
        },
    )
    report = imported(capsys, tmp_path, root)
    assert report["imported"] == ["agent:main:main"]
    assert [p["reason"] for p in report["problems"]] == [
        "a row without its keys (text of at most 4096 bytes)"
    ]
