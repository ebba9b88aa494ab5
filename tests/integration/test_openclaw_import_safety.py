"""``import openclaw`` of a directory nobody vouches for: nothing outside it is read
(``sessionFile`` paths, ``../`` sessionIds, symlinks), files, lines, nesting and
timestamps are bounded, and every bad line is one reported problem, never a traceback
after some sessions were written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from audit_rig import run_cli
from sessionwire.adapters.importers import openclaw

SECRET = "TOP SECRET from outside the directory"
IDS = [f"8c3a7f4e-0000-4a1b-9c2d-00000000000{n}" for n in range(10)]
T = 1_775_037_600_000  # 2026-04-01 10:00 UTC, in milliseconds


def line(role: str, text: str, **message: Any) -> str:
    return json.dumps(
        {"type": "message", "message": {"role": role, "content": text, "timestamp": T, **message}}
    )


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def imported(
    capsys: pytest.CaptureFixture[str], store: str, directory: Path
) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(
        capsys, "--store", store, "--json", "import", "openclaw", str(directory)
    )
    assert out, err
    return code, json.loads(out)


def transcripts(capsys: pytest.CaptureFixture[str], store: str, keys: list[str]) -> str:
    texts = []
    for key in keys:
        code, out, err = run_cli(capsys, "--store", store, "--json", "sessions", "history", key)
        assert code == 0, err
        texts.append(out)
    return "\n".join(texts)


def test_nothing_outside_the_directory_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(line("user", SECRET) + "\n")
    (outside / f"{IDS[4]}.jsonl").write_text(line("user", SECRET) + "\n")
    elsewhere = outside / "agents" / "evil" / "sessions"
    elsewhere.mkdir(parents=True)
    (elsewhere / "sessions.json").write_text(
        json.dumps({"agent:evil:main": {"sessionId": IDS[4], "updatedAt": T}})
    )

    root = tmp_path / "state"
    sessions = root / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / f"{IDS[3]}.jsonl").symlink_to(outside / "secret.jsonl")
    (sessions / f"{IDS[5]}.jsonl").write_text(line("user", "an honest line") + "\n")
    entries = {
        "agent:main:absolute": {
            "sessionId": IDS[0],
            "updatedAt": T,
            "sessionFile": str(outside / "secret.jsonl"),
        },
        "agent:main:relative": {
            "sessionId": IDS[1],
            "updatedAt": T,
            "sessionFile": "../../../../outside/secret.jsonl",
        },
        "agent:main:dotdot": {"sessionId": "../../../../outside/secret", "updatedAt": T},
        "agent:main:symlink": {"sessionId": IDS[3], "updatedAt": T},
        "agent:main:honest": {"sessionId": IDS[5], "updatedAt": T},
    }
    (sessions / "sessions.json").write_text(json.dumps(entries))
    # A store and a whole agent folder that are links to somewhere else.
    (root / "agents" / "linked" / "sessions").mkdir(parents=True)
    (root / "agents" / "linked" / "sessions" / "sessions.json").symlink_to(
        elsewhere / "sessions.json"
    )
    (root / "agents" / "evil").symlink_to(outside / "agents" / "evil", target_is_directory=True)
    store = f"sqlite:///{tmp_path}/imported.db"

    code, report = imported(capsys, store, root)

    assert code == 0
    assert sorted(report["imported"]) == sorted(entries)
    assert SECRET not in transcripts(capsys, store, sorted(entries))
    assert "an honest line" in transcripts(capsys, store, ["agent:main:honest"])
    outside_reports = [p for p in report["problems"] if "leads outside" in p["reason"]]
    assert len(outside_reports) == 5, report["problems"]
    linked = str(root / "agents" / "linked" / "sessions" / "sessions.json")
    assert any(p["file"] == linked for p in outside_reports)
    assert not any("evil" in key for key in report["imported"])


def test_oversized_deep_and_out_of_range_lines_are_each_one_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openclaw, "MAX_LINE_BYTES", 2_000, raising=False)
    monkeypatch.setattr(openclaw, "MAX_FILE_BYTES", 200_000, raising=False)
    root = tmp_path / "state"
    sessions = root / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    lines = [
        line("user", "first"),  # 1
        line("user", "huge timestamp", timestamp=10**20),  # 2
        json.dumps(
            {
                "type": "message",
                "timestamp": "9999-12-31T23:59:59-23:59",
                "message": {"role": "user", "content": "past year 9999"},
            }
        ),  # 3
        "[" * 1_900,  # 4: deeper than the JSON parser's recursion limit
        json.dumps(
            {"message": {"role": "user", "content": "deep", "timestamp": T, "x": nested(80)}}
        ),  # 5: deeper than 64
        line("user", "x" * 5_000),  # 6: longer than a line may be
        line("assistant", "last"),  # 7
    ]
    (sessions / f"{IDS[0]}.jsonl").write_text("\n".join(lines) + "\n")
    (sessions / f"{IDS[1]}.jsonl").write_text((line("user", "y" * 1_000) + "\n") * 250)
    (sessions / "sessions.json").write_text(
        json.dumps(
            {
                "agent:main:lines": {"sessionId": IDS[0], "updatedAt": T},
                "agent:main:big": {"sessionId": IDS[1], "updatedAt": T},
                "agent:main:far": {"sessionId": IDS[2], "updatedAt": 10**20},
            }
        )
    )
    store = f"sqlite:///{tmp_path}/imported.db"

    code, report = imported(capsys, store, root)

    assert code == 0
    assert sorted(report["imported"]) == ["agent:main:big", "agent:main:far", "agent:main:lines"]
    transcript = str(sessions / f"{IDS[0]}.jsonl")
    reasons = {p["line"]: p["reason"] for p in report["problems"] if p["file"] == transcript}
    assert sorted(reasons) == [2, 3, 4, 5, 6]
    assert "out of range" in reasons[2]
    assert "out of range" in reasons[3] or "ISO 8601" in reasons[3]
    assert "nested deeper than 64" in reasons[4]
    assert "nested deeper than 64" in reasons[5]
    assert "longer than 2000 bytes" in reasons[6]
    big = [p for p in report["problems"] if p["file"].endswith(f"{IDS[1]}.jsonl")]
    assert [p["line"] for p in big] == [0]
    assert "more than the 200000 an import reads" in big[0]["reason"]
    assert any("updatedAt" in p["reason"] for p in report["problems"] if p["line"] == 0)
    history = transcripts(capsys, store, ["agent:main:lines"])
    assert "first" in history
    assert "last" in history
