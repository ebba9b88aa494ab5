"""Importing an OpenClaw state directory: stores, transcripts, and the lines that are not
right (reported with file and line, never fatal). Imported sessions list, read and audit
like any other; importing again changes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sessionwire import Gateway
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.importers.history_import import import_sessions
from sessionwire.adapters.importers.openclaw import read_state_dir
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.store import RandomIds

T0 = datetime(2026, 4, 1, 10, 0, tzinfo=UTC)
MAIN_ID = "8c3a7f4e-1111-4a1b-9c2d-000000000001"
DEV_ID = "8c3a7f4e-2222-4a1b-9c2d-000000000002"
WORK_ID = "8c3a7f4e-3333-4a1b-9c2d-000000000003"


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def message_line(role: str, content: Any, at: datetime | None, **extra: Any) -> str:
    message = {"role": role, "content": content, **extra}
    if at is not None:
        message["timestamp"] = ms(at)
    return json.dumps({"type": "message", "id": "m", "message": message})


def write_state(root: Path) -> Path:
    """A small OpenClaw state directory: two agents' stores and their transcripts."""
    main_dir = root / "agents" / "main" / "sessions"
    work_dir = root / "agents" / "work" / "sessions"
    main_dir.mkdir(parents=True)
    work_dir.mkdir(parents=True)
    store = {
        "agent:main:main": {
            "sessionId": MAIN_ID,
            "updatedAt": ms(T0 + timedelta(minutes=5)),
            "lastChannel": "telegram",
            "deliveryContext": {"channel": "whatsapp", "to": "+1555", "accountId": "kev"},
            "model": "claude",
            "inputTokens": 120,
            "outputTokens": 30,
            "totalTokens": 150,
        },
        "agent:main:discord:group:dev": {
            "sessionId": DEV_ID,
            "updatedAt": ms(T0 + timedelta(minutes=1)),
            "channel": "discord",
            "chatType": "group",
            "displayName": "#dev",
            "label": "dev room",
            "thinkingLevel": "loud",
        },
        "agent:main:broken": "not an entry",
        "agent:main:nosid": {"updatedAt": 1},
    }
    (main_dir / "sessions.json").write_text(json.dumps(store))
    (main_dir / f"{MAIN_ID}.jsonl").write_text(
        "\n".join(
            [
                json.dumps({"type": "session", "version": 3, "id": MAIN_ID, "cwd": "/w"}),
                message_line("user", [{"type": "text", "text": "hello"}], T0),
                "{not json",
                message_line("assistant", "hi there", T0 + timedelta(minutes=1), model="claude"),
                message_line("system", "you are helpful", T0),
                json.dumps(
                    {
                        "type": "message",
                        "timestamp": "2026-04-01T10:03:00Z",
                        "message": {"role": "user", "content": "time on the line only"},
                    }
                ),
                message_line("toolResult", [{"type": "text"}], T0 + timedelta(minutes=4)),
                "",
            ]
        )
    )
    (work_dir / "sessions.json").write_text(
        json.dumps({"main": {"sessionId": WORK_ID, "updatedAt": ms(T0)}})
    )
    (work_dir / f"{WORK_ID}.jsonl").write_text(message_line("user", "work hello", T0) + "\n")
    return root


async def test_an_openclaw_directory_imports_into_every_store(
    gateway: Gateway, tmp_path: Path
) -> None:
    sessions, problems = read_state_dir(write_state(tmp_path / "state"))
    report = import_sessions(
        store_of(gateway),
        internals(gateway).rules,
        RandomIds(),
        sessions,
        source="openclaw",
        problems=problems,
    )

    assert sorted(report.imported) == [
        "agent:main:discord:group:dev",
        "agent:main:main",
        "agent:work:main",
    ]
    assert report.messages == 4
    main_file = str(tmp_path / "state/agents/main/sessions" / f"{MAIN_ID}.jsonl")
    store_file = str(tmp_path / "state/agents/main/sessions/sessions.json")
    reasons = {(p.file, p.line): p.reason for p in report.problems}
    assert reasons[(main_file, 3)].startswith("not JSON")
    assert reasons[(main_file, 5)] == "role 'system' is not one of user, assistant, toolResult"
    assert "text block without a string 'text'" in reasons[(main_file, 7)]
    entry_problems = {p.reason for p in report.problems if p.file == store_file}
    assert entry_problems == {
        "entry 'agent:main:broken': not an object",
        "entry 'agent:main:nosid': no sessionId",
        "agent:main:discord:group:dev: invalid thinkingLevel (use "
        "off|minimal|low|medium|high|xhigh)",
    }

    listed = await gateway.call_tool("main", "sessions_list", {})
    rows = {row["key"]: row for row in listed["sessions"]}
    main_row = rows["main"]
    assert main_row["sessionId"] == MAIN_ID
    assert main_row["updatedAt"] == ms(T0 + timedelta(minutes=5))
    assert (main_row["lastChannel"], main_row["lastTo"]) == ("whatsapp", "+1555")
    assert (main_row["model"], main_row["totalTokens"]) == ("claude", 150)
    dev = rows["agent:main:discord:group:dev"]
    assert (dev["channel"], dev["displayName"], dev["label"]) == ("discord", "#dev", "dev room")
    assert "thinkingLevel" not in dev or dev["thinkingLevel"] is None

    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    texts = [(m["role"], m["content"][0]["text"]) for m in history["messages"]]
    assert texts == [
        ("user", "hello"),
        ("assistant", "hi there"),
        ("user", "time on the line only"),
    ]
    assert history["messages"][2]["timestamp"] == ms(T0 + timedelta(minutes=3))

    # Imported history audits like recorded history: as it stood at 10:01:30.
    past = await gateway.session_as_of("main", at=T0 + timedelta(minutes=1, seconds=30))
    assert [m["content"][0]["text"] for m in past.transcript] == ["hello", "hi there"]
    events = [e.event for e in (await gateway.timeline("main")).entries]
    assert events == ["SessionOpened", *["MessageAppended"] * 3, "SessionImported"]


async def test_importing_again_skips_what_is_there(gateway: Gateway, tmp_path: Path) -> None:
    state = write_state(tmp_path / "state")
    first = import_sessions(
        store_of(gateway),
        internals(gateway).rules,
        RandomIds(),
        read_state_dir(state)[0],
        source="openclaw",
    )
    position = store_of(gateway).log_position()
    again = import_sessions(
        store_of(gateway),
        internals(gateway).rules,
        RandomIds(),
        read_state_dir(state)[0],
        source="openclaw",
    )
    assert again.imported == []
    assert sorted(again.skipped) == sorted(first.imported)
    assert store_of(gateway).log_position() == position


def test_the_cli_reports_problems_and_carries_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = write_state(tmp_path / "state")
    store = f"sqlite:///{tmp_path}/imported.db"

    assert main(["--store", store, "import", "openclaw", str(state)]) == 0
    shown = capsys.readouterr().out
    assert "imported 3 session(s) with 4 message(s); 0 already in the store" in shown
    assert "role 'system' is not one of" in shown

    assert main(["--store", store, "--json", "import", "openclaw", str(state)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["imported"] == []
    assert len(report["skipped"]) == 3

    assert main(["--store", store, "--json", "sessions", "list"]) == 0
    keys = {row["key"] for row in json.loads(capsys.readouterr().out)["sessions"]}
    assert {"main", "agent:main:discord:group:dev"} <= keys


def test_the_cli_refuses_a_directory_without_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path}/imported.db"
    assert main(["--store", store, "import", "openclaw", str(tmp_path)]) == 1
    assert "no sessions.json found under" in capsys.readouterr().err
    assert main(["--store", store, "import", "openclaw", str(tmp_path / "missing")]) == 1
    assert "is not a directory" in capsys.readouterr().err


async def test_a_long_transcript_imports_in_batches_that_replay_message_by_message(
    gateway: Gateway, tmp_path: Path
) -> None:
    root = tmp_path / "state"
    sessions_dir = root / "agents" / "main" / "sessions"
    sessions_dir.mkdir(parents=True)
    last = T0 + timedelta(seconds=2_499)
    store = {"agent:main:main": {"sessionId": MAIN_ID, "updatedAt": ms(last)}}
    (sessions_dir / "sessions.json").write_text(json.dumps(store))
    lines = [message_line("user", f"line {n}", T0 + timedelta(seconds=n)) for n in range(2_500)]
    (sessions_dir / f"{MAIN_ID}.jsonl").write_text("\n".join(lines) + "\n")
    sessions, problems = read_state_dir(root)
    report = import_sessions(
        store_of(gateway),
        internals(gateway).rules,
        RandomIds(),
        sessions,
        source="openclaw",
        problems=problems,
    )
    assert (report.imported, report.messages, report.problems) == (["agent:main:main"], 2_500, [])
    stream = store_of(gateway).stream(store_of(gateway).session("agent:main:main").id)  # type: ignore[union-attr]
    # Imported in batches of 1,000 (one event each), stored one row per message
    # (storage v3, ADR 0036): the stream holds them as single appends.
    assert [(type(e).__name__, e.originator_version) for e in stream] == [
        ("SessionOpened", 1),
        *[("MessageAppended", version) for version in range(2, 2_502)],
        ("SessionImported", 2_502),
    ]
    # At an instant or a version inside a batch, as single appends would have stood.
    for n in (0, 999, 1_000, 1_234, 2_499):
        past = await gateway.session_as_of("main", at=T0 + timedelta(seconds=n, milliseconds=500))
        assert len(past.transcript) == n + 1
        assert past.transcript[-1]["content"][0]["text"] == f"line {n}"
        assert past.row.updated_at == ms(T0 + timedelta(seconds=n))
        assert past.recorded_at == T0 + timedelta(seconds=n)
        by_version = await gateway.session_as_of("main", version=n + 2)
        assert by_version.transcript == past.transcript
        assert by_version.row == past.row
    # The timeline shows each message at its own time, as single appends would.
    lines = [e for e in (await gateway.timeline("main")).entries if e.event == "MessageAppended"]
    assert [(e.version, e.timestamp) for e in lines] == [
        (n + 2, T0 + timedelta(seconds=n)) for n in range(2_500)
    ]
    history = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "limit": 1000}
    )
    assert [m["content"][0]["text"] for m in history["messages"]] == [
        f"line {n}" for n in range(1_500, 2_500)
    ]
