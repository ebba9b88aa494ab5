"""``audit import`` and ``import openclaw`` show how far they are on stderr, as ``audit
verify`` does: a bar for people at a terminal, nothing with ``--json`` (stdout stays the
JSON alone)."""

from __future__ import annotations

import json
from pathlib import Path

from command_line import run_in_process
from sessionwire import SyncGateway

# What rich reads to treat a captured stream as an interactive terminal.
TERMINAL = {"TTY_INTERACTIVE": "1", "TTY_COMPATIBLE": "1"}


def export_of(tmp_path: Path, messages: int) -> Path:
    source = f"sqlite:///{tmp_path}/source.db"
    with SyncGateway.open(store=source) as gateway:
        gateway.record_many("main", [{"role": "user", "content": f"m{n}"} for n in range(messages)])
    exported = tmp_path / "log.jsonl"
    assert run_in_process("--store", source, "audit", "export", "-o", str(exported)).returncode == 0
    return exported


def openclaw_dir(root: Path, messages: int) -> Path:
    sessions = root / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    session_id = "8c3a7f4e-1111-4a1b-9c2d-000000000001"
    store = {"agent:main:main": {"sessionId": session_id, "updatedAt": 1_777_000_000_000}}
    (sessions / "sessions.json").write_text(json.dumps(store))
    lines = [
        json.dumps(
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": f"m{n}"}],
                    "timestamp": 1_777_000_000_000 + n,
                },
            }
        )
        for n in range(messages)
    ]
    (sessions / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_audit_import_shows_progress_at_a_terminal_and_none_with_json(tmp_path: Path) -> None:
    exported = export_of(tmp_path, 30)

    shown = run_in_process(
        "--store", f"sqlite:///{tmp_path}/a.db", "audit", "import", str(exported), env=TERMINAL
    )
    assert shown.returncode == 0
    assert "importing" in shown.stderr
    assert "100%" in shown.stderr
    assert "importing" not in shown.stdout

    quiet = run_in_process(
        "--store",
        f"sqlite:///{tmp_path}/b.db",
        "--json",
        "audit",
        "import",
        str(exported),
        env=TERMINAL,
    )
    assert quiet.returncode == 0
    assert "importing" not in quiet.stderr
    # SessionOpened, and the batch's 30 messages: one row each (storage v3, ADR 0036).
    assert json.loads(quiet.stdout)["imported"] == 31


def test_import_openclaw_shows_progress_at_a_terminal_and_none_with_json(tmp_path: Path) -> None:
    state = openclaw_dir(tmp_path / "state", 25)

    shown = run_in_process(
        "--store", f"sqlite:///{tmp_path}/a.db", "import", "openclaw", str(state), env=TERMINAL
    )
    assert shown.returncode == 0
    assert "reading" in shown.stderr
    assert "importing" in shown.stderr
    assert "25/25" in shown.stderr
    assert "imported 1 session(s) with 25 message(s)" in shown.stdout

    quiet = run_in_process(
        "--store",
        f"sqlite:///{tmp_path}/b.db",
        "import",
        "openclaw",
        "--json",
        str(state),
        env=TERMINAL,
    )
    assert quiet.returncode == 0
    assert "reading" not in quiet.stderr
    assert "importing" not in quiet.stderr
    assert json.loads(quiet.stdout)["messages"] == 25
