"""``sessionwire config check FILE``: every problem named with its key and what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sessionwire.adapters.cli.main import main

GOOD = """
// The team's gateway: comments and trailing commas are fine in JSON5.
{
  session: { mainKey: "Main", agentToAgent: { maxPingPongTurns: 9 } },
  tools: { agentToAgent: { enabled: true, allow: ["ops"] } },
  agents: {
    list: [{ id: "main", default: true }, { id: "ops", name: "Ops bot" }],
    defaults: { subagents: { archiveAfterMinutes: 30 } },
  },
  gateway: { port: 18789 },
}
"""

BAD = """
{
  session: { scope: "everyone", agentToAgent: { maxPingPongTurns: "3" } },
  tools: { agentToAgent: { enabled: "yes" } },
  agents: { list: [{ name: "no id" }, { id: " " }] },
}
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionwire.adapters.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SESSIONWIRE_STORE": "memory"},
        check=False,
    )


def write(tmp_path: Path, text: str, name: str = "openclaw.json5") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def check_json(path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["--json", "config", "check", path])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, report


def test_a_valid_config_exits_0_and_says_what_the_gateway_will_do(tmp_path: Path) -> None:
    result = cli("config", "check", write(tmp_path, GOOD))
    assert result.returncode == 0, result.stderr
    assert "is a valid config" in result.stdout
    assert "note: gateway is not a key sessionwire uses; it is ignored" in result.stdout


def test_the_summary_shows_effective_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = check_json(write(tmp_path, GOOD), capsys)
    assert code == 0
    assert report["valid"] is True
    assert report["errors"] == []
    assert report["ignoredKeys"] == ["gateway"]
    summary = report["summary"]
    assert summary["agents"] == ["main", "ops"]
    assert summary["mainKey"] == "main"  # lower-cased, as OpenClaw does
    assert summary["maxPingPongTurns"] == 5  # 9 is clamped to the 0..5 range
    assert summary["archiveAfterMinutes"] == 30
    assert summary["agentToAgent"] == {"enabled": True, "allow": ["ops"]}
    assert summary["visibility"] == {"default": "tree", "perAgent": {}}


def test_an_invalid_config_exits_2_with_each_problem_its_key_and_a_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = check_json(write(tmp_path, BAD), capsys)
    assert code == 2
    assert report["valid"] is False
    assert report["summary"] is None  # nothing the gateway would do: it refuses it
    assert {problem["path"]: problem["fix"] for problem in report["errors"]} == {
        "session.scope": "use one of: 'per-sender' or 'global'",
        "session.agentToAgent.maxPingPongTurns": "write a number, without quotes",
        "tools.agentToAgent.enabled": "write true or false, without quotes",
        "agents.list[0].id": "add this key; it is required here",
        "agents.list[1].id": "change the value as the problem says",
    }
    problems = {problem["path"]: problem["problem"] for problem in report["errors"]}
    assert problems["agents.list[1].id"] == "agent id is empty"


def test_the_table_for_people_names_the_keys(tmp_path: Path) -> None:
    result = cli("config", "check", write(tmp_path, BAD))
    assert result.returncode == 2
    assert "5 problem(s)" in result.stdout
    for key in ("session.scope", "tools.agentToAgent.enabled", "agents.list[0].id"):
        assert key in result.stdout


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        ('{ session: { scope: "global", }', "(syntax)", "line 1 Unexpected end of input"),
        ("[1, 2]", "(top level)", "the file must hold an object"),
    ],
)
def test_syntax_and_shape_mistakes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, path: str, problem: str
) -> None:
    code, report = check_json(write(tmp_path, text), capsys)
    assert code == 2
    [found] = report["errors"]
    assert found["path"] == path
    assert problem in found["problem"]


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = check_json(str(tmp_path / "nope.json5"), capsys)
    assert code == 2
    assert report["errors"][0]["problem"].startswith("cannot read")


def test_a_near_miss_key_fails_check_naming_the_intended_key(tmp_path: Path) -> None:
    result = cli(
        "config", "check", write(tmp_path, '{ agents: { defaults: { sandBox: {mode: "all"} } } }')
    )
    assert result.returncode == 2
    assert "did you mean 'sandbox'?" in result.stdout + result.stderr
    assert "rename the key" in result.stdout + result.stderr


def test_check_explains_invalid_utf8_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.json5"
    path.write_bytes(b'{"session": {"mainKey": "\xff"}}')
    result = cli("--json", "config", "check", str(path))
    assert result.returncode == 2
    assert "is not UTF-8" in result.stdout
    assert "Traceback" not in result.stderr
