"""--runtime FILE, one name on every command that runs agents (issue 16, finding 13)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from sessionwire.adapters.cli.main import cli, main

RUNS_AGENTS = ["serve", "mcp", "demo", "sessions send", "sessions spawn"]


def command(path: str) -> click.Command:
    found: click.Command | None = cli
    for name in path.split():
        assert isinstance(found, click.Group)
        found = found.get_command(click.Context(found), name)
    assert found is not None
    return found


@pytest.mark.parametrize("path", RUNS_AGENTS)
def test_every_command_that_runs_agents_takes_runtime(path: str) -> None:
    shown = [p for p in command(path).params if isinstance(p, click.Option) and not p.hidden]
    options = {opt for param in shown for opt in param.opts}
    assert "--runtime" in options
    assert "--script" not in options  # the older name is a hidden alias only


def test_the_demo_plays_with_the_given_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        "rules:\n"
        "  - {step: primary, reply: 'From the runtime file.'}\n"
        "  - {step: reply_back, reply: REPLY_SKIP}\n"
        "  - {step: announce, reply: ANNOUNCE_SKIP}\n"
        "  - {step: subagent_task, reply: done}\n"
        "  - {step: subagent_announce, reply: ANNOUNCE_SKIP}\n"
    )
    store = f"sqlite:///{tmp_path}/demo.db"
    capsys.readouterr()
    code = main(["--store", store, "--json", "demo", "--runtime", str(agents)])
    out = capsys.readouterr().out
    assert code == 0, out
    gists = [event.get("gist", "") for event in json.loads(out)["events"]]
    assert any("From the runtime file." in gist for gist in gists)


def test_serve_names_a_bad_runtime_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SESSIONWIRE_TOKEN", "a-token-long-enough-for-anyone")
    capsys.readouterr()
    missing = tmp_path / "none.yaml"
    code = main(["--store", f"sqlite:///{tmp_path}/s.db", "serve", "--runtime", str(missing)])
    assert code == 2
    assert f"cannot read runtime file {missing}" in capsys.readouterr().err
