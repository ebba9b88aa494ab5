"""docs/runs.md runs as written: its Python example prints what the page shows, and
every ``$ sessionwire …`` line exits as the page says, in order, against one store."""

from __future__ import annotations

import json
from pathlib import Path

from command_line import run_in_process
from test_docs_cli import page_examples, page_files
from test_docs_examples import DOCS, blocks, run_python

PAGE = DOCS / "runs.md"


def test_the_python_example_prints_what_the_page_shows() -> None:
    assert run_python("runs.md") == "".join(blocks("runs.md", "text"))


def test_every_command_line_example_runs(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name, body in page_files(text).items():
        (tmp_path / name).write_text(body)
    env = {"SESSIONWIRE_STORE": f"sqlite:///{tmp_path}/runs.db"}
    examples = page_examples(text)
    assert {" ".join(e.args[:2]) for e in examples} >= {"runs list", "runs show", "runs cancel"}
    for example in examples:
        result = run_in_process(*example.args, env=env, cwd=tmp_path)
        assert result.returncode == example.exit_code, (
            f"{example.line}\nexit {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    listed = run_in_process("runs", "list", "--status", "ok", env=env, cwd=tmp_path)
    assert "agent:main:discord:group:dev" in listed.stdout
    # On a fresh store, nothing the example did failed (issue 24: the requester main did
    # not exist yet, and the exchange's reply-back run in it failed).
    failed = run_in_process("--json", "runs", "list", "--status", "error", env=env, cwd=tmp_path)
    assert json.loads(failed.stdout)["runs"] == []


def test_a_send_from_a_session_never_recorded_is_refused_writing_nothing(tmp_path: Path) -> None:
    (tmp_path / "agents.yaml").write_text(
        page_files(PAGE.read_text(encoding="utf-8"))["agents.yaml"]
    )
    env = {"SESSIONWIRE_STORE": f"sqlite:///{tmp_path}/fresh.db"}
    run_in_process("record", "discord:group:dev", "standup", env=env, cwd=tmp_path)
    args = ("sessions", "send", "discord:group:dev", "live?", "--runtime", "agents.yaml")
    refused = run_in_process(*args, env=env, cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith("sessionwire: the requester main has no session yet")
    listed = run_in_process("--json", "runs", "list", env=env, cwd=tmp_path)
    assert json.loads(listed.stdout)["runs"] == []
    spawned = run_in_process(
        "sessions",
        "spawn",
        "count",
        "--as",
        "discord:group:nobody",
        "--runtime",
        "agents.yaml",
        env=env,
        cwd=tmp_path,
    )
    assert spawned.returncode == 1
    assert "the requester discord:group:nobody has no session yet" in spawned.stderr
