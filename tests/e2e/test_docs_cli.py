"""docs/cli.md runs as written: every ``$ sessionwire …`` line, in order, in one scratch
directory holding the page's ``file=NAME`` blocks, against one store.

A line may end with ``# exits N``; otherwise it must exit 0. Each line runs through the
console script's ``main`` in this process (its own argv, environment, directory and
streams); tests/e2e/test_cli.py runs the same entry point as a real process.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from command_line import run_in_process

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
EXITS = re.compile(r"#\s*exits\s+(\d+)\s*$")


@dataclass(frozen=True)
class Example:
    line: str
    args: list[str]
    exit_code: int


def page_files(text: str) -> dict[str, str]:
    files = {}
    for block in FENCE.finditer(text):
        match = re.search(r"\bfile=(\S+)", block["info"])
        if match:
            files[match[1]] = block["body"]
    return files


def page_examples(text: str) -> list[Example]:
    examples = []
    for block in FENCE.finditer(text):
        if block["info"].strip() != "console":
            continue
        for line in block["body"].splitlines():
            if not line.startswith("$ "):
                continue
            command = line[2:]
            expected = EXITS.search(command)
            words = shlex.split(command, comments=True)
            assert words[0] == "sessionwire", f"not a sessionwire command: {line}"
            examples.append(Example(line, words[1:], int(expected[1]) if expected else 0))
    return examples


def test_the_page_has_examples_of_every_command() -> None:
    text = PAGE.read_text()
    commands = {
        " ".join(w for w in e.args if not w.startswith("-"))[:40] for e in page_examples(text)
    }
    for name in (
        "demo",
        "record",
        "sessions list",
        "sessions history",
        "sessions send",
        "sessions spawn",
        "agents list",
        "config check",
    ):
        assert any(command.startswith(name) for command in commands), name


def test_every_example_on_the_page_runs(tmp_path: Path) -> None:
    text = PAGE.read_text()
    for name, body in page_files(text).items():
        (tmp_path / name).write_text(body)
    # The demo's own stores in the scratch directory, not the user's data directory.
    env = {"SESSIONWIRE_STORE": f"sqlite:///{tmp_path}/docs.db", "XDG_DATA_HOME": str(tmp_path)}
    for example in page_examples(text):
        result = run_in_process(*example.args, env=env, cwd=tmp_path)
        assert result.returncode == example.exit_code, (
            f"{example.line}\nexit {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
