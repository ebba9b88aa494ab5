"""The demo is a good first hour (issue 16, finding 14): its own store, closing commands
that work as printed with the config it used, and readable at 80 columns."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from sessionwire.adapters.cli.main import main

Capture = pytest.CaptureFixture[str]
HINT = "  sessionwire "


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("SESSIONWIRE_PROG", raising=False)
    return home


def play(capsys: Capture, *args: str) -> str:
    capsys.readouterr()
    code = main([*args, "demo", "--pace", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_the_demo_plays_in_its_own_store_not_the_users(
    data_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capture,
) -> None:
    monkeypatch.setenv("SESSIONWIRE_STORE", f"sqlite:///{tmp_path}/mine.db")
    play(capsys)
    assert not (tmp_path / "mine.db").exists()
    assert (data_home / "sessionwire" / "demo.db").exists()
    assert (data_home / "sessionwire" / "demo.config.json").exists()


def test_store_still_chooses(data_home: Path, tmp_path: Path, capsys: Capture) -> None:
    play(capsys, "--store", f"sqlite:///{tmp_path}/chosen.db")
    assert (tmp_path / "chosen.db").exists()
    assert not (data_home / "sessionwire" / "demo.db").exists()


def test_the_closing_commands_work_as_printed_and_see_what_the_demo_showed(
    data_home: Path, tmp_path: Path, capsys: Capture
) -> None:
    out = play(capsys, "--store", f"sqlite:///{tmp_path}/demo.db")
    hints = [line.strip() for line in out.splitlines() if line.startswith(HINT)]
    assert len(hints) == 3, out
    shown = int(out.split(" session(s)")[0].split()[-1])
    for hint in hints:
        capsys.readouterr()
        args = shlex.split(hint)[1:]
        assert main([*args, "--json"] if "audit" not in hint else args) == 0, hint
        printed = capsys.readouterr().out
        if " sessions list" in hint:
            assert json.loads(printed)["count"] == shown == 2
        if " sessions history main" in hint:
            assert json.loads(printed)["messages"]
    assert (tmp_path / "demo.config.json").exists()


def test_the_demo_reads_well_at_80_columns(
    data_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capture,
) -> None:
    # What an 80-column terminal gets (piped output is otherwise 160 wide).
    monkeypatch.setattr("sessionwire.adapters.cli.context.PIPED_WIDTH", 80)
    out = play(capsys, "--store", f"sqlite:///{tmp_path}/narrow.db")
    too_wide = [
        line
        for line in out.splitlines()
        if len(line) > 80 and not line.startswith("  sessionwire ")
    ]
    assert too_wide == []
    # Event lines wrap instead of being cut, and the table keeps whole session keys.
    assert "agent:ops:discord:group:ops" in out
    assert "ExchangeOpened" in out


PAIR = """
{
  name: "Pair of agents",
  config: { tools: { agentToAgent: { enabled: true }, sessions: { visibility: "all" } } },
  steps: [ { message: { session: "main", text: "hello" } } ],
}
"""


def test_each_scenario_plays_in_its_own_store_and_config(
    data_home: Path, tmp_path: Path, capsys: Capture
) -> None:
    play(capsys)
    home = data_home / "sessionwire"
    team_config = (home / "demo.config.json").read_text()
    scenario = tmp_path / "pair.json5"
    scenario.write_text(PAIR)
    capsys.readouterr()
    assert main(["demo", "--pace", "0", "--scenario", str(scenario)]) == 0
    # The team's store and config are as it left them; the pair has its own.
    assert (home / "demo.config.json").read_text() == team_config
    pair_config = json.loads((home / "demo-pair-of-agents.config.json").read_text())
    assert pair_config["tools"]["agentToAgent"] == {"enabled": True}
    assert (home / "demo-pair-of-agents.db").exists()


def test_fresh_empties_the_demos_own_store_first(data_home: Path, capsys: Capture) -> None:
    play(capsys)
    # At once again: its hour would run past the real time, so it is refused...
    capsys.readouterr()
    assert main(["demo", "--pace", "0"]) == 2
    assert "demo --fresh starts it again" in capsys.readouterr().err
    # ...and --fresh plays it on an emptied store: its first event is the log's first.
    capsys.readouterr()
    assert main(["--json", "demo", "--fresh"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["events"][0]["position"] == 1


def test_fresh_never_empties_a_store_the_user_named(tmp_path: Path, capsys: Capture) -> None:
    mine = tmp_path / "mine.db"
    assert main(["--store", f"sqlite:///{mine}", "record", "main", "keep me"]) == 0
    capsys.readouterr()
    assert main(["--store", f"sqlite:///{mine}", "demo", "--fresh"]) == 2
    assert "never empties a --store" in capsys.readouterr().err
    assert main(["--store", f"sqlite:///{mine}", "sessions", "history", "main"]) == 0
    assert "keep me" in capsys.readouterr().out


def test_demo_help_lists_no_config_option(capsys: Capture) -> None:
    capsys.readouterr()
    assert main(["demo", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--config" not in shown
    assert "--fresh" in shown
