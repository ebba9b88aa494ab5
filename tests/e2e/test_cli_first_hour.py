"""What a new user's first commands print, as they print it (issue 37 §F): the history's
columns hold for a tool's output and a multi-line report, a listing shows no column it
has nothing for, the agents' title is one line, ``--json config check`` always says
what it found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from command_line import run_in_process


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/first.db"
    assert run_in_process("--store", url, "record", "main", "hello").returncode == 0
    report = "Status: ok\nResult: 3 tickets open\nNotes: none"
    assert run_in_process("--store", url, "record", "main", report).returncode == 0
    tool = ("record", "main", "tool output", "--role", "toolResult")
    assert run_in_process("--store", url, *tool).returncode == 0
    return url


def _history_lines(store: str) -> list[str]:
    shown = run_in_process("--store", store, "sessions", "history", "main", "--include-tools")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.splitlines()[1:]


def test_a_tool_result_is_spaced_from_its_text_and_labelled_a_tool(store: str) -> None:
    (line,) = [line for line in _history_lines(store) if "tool output" in line]
    assert "toolResult tool output" in line
    assert line.endswith("[tool result]")


def test_a_multi_line_report_stays_in_the_text_column(store: str) -> None:
    lines = _history_lines(store)
    first = next(index for index, line in enumerate(lines) if "Status: ok" in line)
    column = lines[first].index("Status: ok")
    assert lines[first + 1] == " " * column + "Result: 3 tickets open"
    assert lines[first + 2].startswith(" " * column + "Notes: none")
    # Every message's text starts in one column, whatever its role.
    starts = {
        line.index(text)
        for line in lines
        for text in ("hello", "Status", "tool output")
        if text in line
    }
    assert starts == {column}


def test_a_listing_without_messages_has_no_last_message_column(store: str) -> None:
    plain = run_in_process("--store", store, "sessions", "list")
    assert plain.returncode == 0
    assert "LAST MESSAGE" not in plain.stdout
    with_messages = run_in_process("--store", store, "sessions", "list", "--message-limit", "1")
    assert "LAST MESSAGE" in with_messages.stdout
    assert "Status: ok Result: 3 tickets open" in with_messages.stdout


def test_the_agents_title_is_one_line(store: str) -> None:
    shown = run_in_process("--store", store, "agents", "list")
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[0] == "requester agent: main (any agent: False)"


@pytest.mark.parametrize(
    ("text", "valid"),
    [('{"session": {"mainKey": "main"}}', True), ('{"session": {"scope": 3}}', False)],
)
def test_json_config_check_always_has_a_summary(tmp_path: Path, text: str, valid: bool) -> None:
    file = tmp_path / "c.json"
    file.write_text(text)
    shown = run_in_process("--json", "config", "check", str(file))
    report = json.loads(shown.stdout)
    assert report["valid"] is valid
    assert "summary" in report
    assert (report["summary"] is not None) is valid


def test_the_import_problems_table_keeps_each_file_name_whole() -> None:
    from rich.console import Console
    from sessionwire.adapters.cli.imports import import_view

    name = "/home/kim/.openclaw/agents/main/sessions/8c3a7f4e-1111-4a1b-9c2d-000000000001.jsonl"
    report = {
        "imported": [],
        "skipped": [],
        "messages": 0,
        "problems": [{"file": name, "line": 3, "reason": "not a JSON object"}],
    }
    out = Console(width=80, record=True)
    out.print(import_view(report))
    cells = [line.split("│")[1].strip() for line in out.export_text().splitlines() if "│" in line]
    assert "".join(cells) == name
