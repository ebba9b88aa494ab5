"""Tables at a terminal 80 columns wide (issue 24): ``runs list`` wrapped a session key
over 12 lines, ``audit timeline`` shrank columns to zero width and ``sessions list`` ran
off the edge. Each is printed through click's CliRunner as to a terminal (COLUMNS=80)
and read back: no line wider than the terminal, every id whole, nothing squeezed away."""

from __future__ import annotations

import re

import click.testing
import pytest
from click.testing import CliRunner
from command_line import run_in_process
from sessionwire.adapters.cli.main import cli

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUBAGENT_KEY = re.compile(r"agent:research:subagent:[0-9a-f-]{36}")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The demo's store and config: sessions, an exchange, a spawn, runs of every step."""
    folder = tmp_path_factory.mktemp("width")
    url = f"sqlite:///{folder}/demo.db"
    played = run_in_process("--store", url, "--json", "demo")
    assert played.returncode == 0, played.stderr
    return ["--store", url, "--config", str(folder / "demo.config.json")]


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # CliRunner's stdout is a pipe to the CLI (the piped width, 160): here it is a terminal,
    # whose width rich reads from COLUMNS.
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True)


def at_80(store: list[str], *args: str) -> list[str]:
    result = CliRunner().invoke(
        cli, [*store, *args], env={"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"}
    )
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.output).splitlines()


def test_runs_list_fits_80_columns_with_run_ids_whole(store: list[str], terminal: None) -> None:
    lines = at_80(store, "runs", "list")
    assert max(len(line) for line in lines) <= 80
    listed = run_in_process(*store, "--json", "runs", "list")
    run_ids = re.findall(r'"runId": "([0-9a-f-]{36})"', listed.stdout)
    assert len(run_ids) == 7
    text = "\n".join(lines)
    for run_id in run_ids:
        assert run_id in text  # on one line, never folded
    # Each run is two lines, three for a subagent's long key: not twelve.
    body = [line for line in lines if line.startswith("│")]
    assert len(body) <= 3 * len(run_ids)
    folded = "".join(line.split("│")[1].strip() for line in body)
    assert SUBAGENT_KEY.search(folded), "the session key is folded, never cut"


def test_audit_timeline_fits_80_columns_and_keeps_every_column(
    store: list[str], terminal: None
) -> None:
    lines = at_80(store, "audit", "timeline", "main")
    assert max(len(line) for line in lines) <= 80
    header = "\n".join(lines[1:5])
    for title in ("#", "TIME (UTC)", "EVENT", "KIND", "WHAT HAPPENED", "TRACE/PARENT/HOP"):
        assert title in header
    text = "\n".join(lines)
    assert "SessionOpened" in text
    assert "ExchangeOpened" in text
    # The summary column has room: a word of it is on a line whole.
    assert "opened (agent" in text


def test_sessions_list_fits_80_columns(store: list[str], terminal: None) -> None:
    lines = at_80(store, "sessions", "list", "--message-limit", "1")
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "agent:ops:discord:group:ops" in text
    assert "LAST MESSAGE" in text
    assert "Deploy 42 checked" in text  # the last message, cut with an ellipsis
    # The last column's right edge is there: the table closes within the terminal.
    assert lines[-1].rstrip().endswith("┘")


def test_piped_output_keeps_the_wide_layout(store: list[str]) -> None:
    """Not a terminal: the piped width (160), one line a run, as scripts read it."""
    result = CliRunner().invoke(cli, [*store, "runs", "list"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "RUN" in line)
    assert "SESSION" in header
    assert "ENDED (UTC)" in header
