"""docs/runs.md runs as written: its Python example prints what the page shows, and
every ``$ sessionwire …`` line exits as the page says, in order, against one store."""

from __future__ import annotations

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
