"""Global options before or after the subcommand, and --version (issue 16, finding 12)."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
from sessionwire.adapters.cli.main import main


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/options.db"
    assert main(["--store", url, "record", "main", "hello"]) == 0
    return url


def test_store_and_json_after_the_subcommand(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["sessions", "list", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["key"] for row in listed["sessions"]] == ["main"]


def test_the_option_after_the_subcommand_wins(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = f"sqlite:///{tmp_path}/other.db"
    assert main(["--store", other, "record", "cron:nightly", "ran", "--store", store]) == 0
    capsys.readouterr()
    assert main(["--json", "sessions", "list", "--store", store]) == 0
    keys = {row["key"] for row in json.loads(capsys.readouterr().out)["sessions"]}
    assert "agent:main:cron:nightly" in keys
    assert not (tmp_path / "other.db").exists()


def test_nested_and_lazily_loaded_commands_take_them_too(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["audit", "timeline", "main", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["key"] == "agent:main:main"
    assert main(["agents", "list", "--json", "--store", store]) == 0
    assert "agents" in json.loads(capsys.readouterr().out)


def test_config_after_the_subcommand(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.json5"
    config.write_text("{ session: { scope: 42 } }")
    assert main(["sessions", "list", "--store", store, "--config", str(config)]) == 2


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"sessionwire {metadata.version('sessionwire')}\n"
