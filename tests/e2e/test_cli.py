"""The sessionwire command line, through its real entry point: ``main`` in this process,
and as a real process (``cli_process``) for the round trip and an exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from command_line import Ran, run_in_process, run_process
from sessionwire.adapters.cli.main import default_store, main


def cli(*args: str) -> Ran:
    return run_in_process(*args)


def cli_process(*args: str) -> Ran:
    return run_process(*args)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


def test_record_list_and_history_round_trip(store: str) -> None:
    assert (
        cli_process("--store", store, "record", "main", "hello", "--channel", "whatsapp").returncode
        == 0
    )
    listed = cli_process("--store", store, "--json", "sessions", "list", "--message-limit", "1")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["sessions"]
    assert [(r["key"], r["channel"]) for r in rows] == [("main", "whatsapp")]
    history = cli_process("--store", store, "sessions", "history", "main")
    assert history.returncode == 0
    assert "hello" in history.stdout
    table = cli_process("--store", store, "sessions", "list")
    assert "main" in table.stdout
    assert "1 session(s)" in table.stdout


def test_a_refused_tool_call_exits_1_with_the_reason(store: str) -> None:
    assert cli("--store", store, "record", "main", "hello").returncode == 0
    result = cli("--store", store, "sessions", "history", "cron:nope")
    assert result.returncode == 1
    assert "Session not found: cron:nope" in result.stderr


def test_a_bad_store_url_exits_2(tmp_path: Path) -> None:
    result = cli_process("--store", "redis://x", "sessions", "list")
    assert result.returncode == 2
    assert "unknown store 'redis://x'" in result.stderr


def test_a_bad_config_exits_2_naming_the_key(tmp_path: Path, store: str) -> None:
    config = tmp_path / "bad.json5"
    config.write_text("{ session: { scope: 42 } }")
    result = cli("--store", store, "--config", str(config), "sessions", "list")
    assert result.returncode == 2
    assert "session.scope" in result.stderr


def test_bad_record_input_exits_1(store: str) -> None:
    result = cli("--store", store, "record", "agent::x", "hello")
    assert result.returncode == 1
    assert "invalid session key" in result.stderr


def test_demo_plays_the_team_scenario_and_lists_its_sessions(store: str) -> None:
    result = cli("--store", store, "demo")
    assert result.returncode == 0, result.stderr
    assert "agent:ops:discord:group:ops" in result.stdout
    assert "Deploy 42 checked for Atlas: green, no alerts since the rollout." in result.stdout
    assert "store:" in result.stdout


def test_agents_list_in_process(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", store, "record", "main", "hello"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "--json", "agents", "list"]) == 0
    assert json.loads(capsys.readouterr().out)["requester"] == "main"


def test_default_store_is_a_file_in_the_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SESSIONWIRE_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "/data")
    assert default_store() == "sqlite:////data/sessionwire/sessions.db"
    monkeypatch.setenv("SESSIONWIRE_STORE", "memory")
    assert default_store() == "memory"


def test_history_pages_back_with_offset(store: str) -> None:
    for n in range(5):
        assert cli("--store", store, "record", "main", f"m{n}").returncode == 0
    page = cli(
        "--store", store, "--json", "sessions", "history", "main", "--limit", "2", "--offset", "1"
    )
    assert page.returncode == 0, page.stderr
    answer = json.loads(page.stdout)
    assert [m["content"][0]["text"] for m in answer["messages"]] == ["m2", "m3"]
    assert (answer["offset"], answer["nextOffset"], answer["totalMessages"]) == (1, 3, 5)
    shown = cli("--store", store, "sessions", "history", "main", "--limit", "2", "--offset", "0")
    assert "5 messages; older ones: --offset 2" in shown.stdout
    last = cli("--store", store, "sessions", "history", "main", "--limit", "2", "--offset", "4")
    assert "m0" in last.stdout
    assert "--offset" not in last.stdout
    refused = cli("--store", store, "sessions", "history", "main", "--offset", "-1")
    assert refused.returncode == 2
    assert "-1 is not in the range x>=0" in refused.stderr


def test_list_filters_by_label_agent_search_and_archived(store: str) -> None:
    assert cli("--store", store, "record", "main", "hi", "--label", "home").returncode == 0
    assert cli("--store", store, "record", "cron:nightly", "tick").returncode == 0

    def keys(*options: str) -> list[str]:
        listed = cli("--store", store, "--json", "sessions", "list", *options)
        assert listed.returncode == 0, listed.stderr
        return [row["key"] for row in json.loads(listed.stdout)["sessions"]]

    assert keys("--label", "home") == ["main"]
    assert keys("--search", "NIGHT") == ["agent:main:cron:nightly"]
    assert keys("--agent-id", "main") == ["agent:main:cron:nightly", "main"]
    assert keys("--agent-id", "ops") == []
    assert keys("--archived") == []
