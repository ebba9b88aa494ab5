"""``sessionwire sessions send`` and ``sessions spawn`` through the real command line.

Without ``--runtime`` the CLI has no agent runtime: the commands refuse before writing
anything (exit 2). With ``--runtime FILE`` (or the older, hidden ``--script FILE``)
scripted agents answer. Commands run through ``main`` in this process; the ones
using ``cli_process`` run as a real process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from command_line import Ran, run_in_process, run_process

AGENTS = """
rules:
  - {step: primary, reply: "On it."}
  - {step: reply_back, reply: REPLY_SKIP}
  - {step: announce, reply: ANNOUNCE_SKIP}
  - {step: subagent_task, reply: "3 open tickets"}
  - {step: subagent_announce, reply: "Result: 3 open tickets\\nNotes: none urgent"}
"""
NO_RUNTIME = "no agent runtime is configured for this gateway"


def cli(*args: str, store: str) -> Ran:
    return run_in_process(*args, env={"SESSIONWIRE_STORE": store})


def cli_process(*args: str, store: str) -> Ran:
    return run_process(*args, env={"SESSIONWIRE_STORE": store})


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/tools.db"
    for args in (
        ("record", "main", "hi", "--channel", "webchat", "--to", "user:kim"),
        ("record", "discord:group:ops", "standup", "--channel", "discord", "--chat-type", "group"),
    ):
        assert cli(*args, store=url).returncode == 0
    return url


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "agents.yaml"
    path.write_text(AGENTS)
    return str(path)


def test_send_with_scripted_agents_shows_the_reply_and_the_exchange(
    store: str, script: str
) -> None:
    result = cli_process(
        "sessions", "send", "discord:group:ops", "Deploy done?", "--script", script, store=store
    )
    assert result.returncode == 0, result.stderr
    assert "ok: reply 'On it.'" in result.stdout
    assert "recorded:" in result.stdout
    for gist in ("reply: On it.", "REPLY_SKIP, the loop ends", "announce skipped: ANNOUNCE_SKIP"):
        assert gist in result.stdout
    history = cli("--json", "sessions", "history", "discord:group:ops", store=store)
    texts = [m["content"][0]["text"] for m in json.loads(history.stdout)["messages"]]
    assert texts[1:3] == ["Deploy done?", "On it."]


def recorded(store: str) -> list[str]:
    exported = cli("audit", "export", store=store)
    assert exported.returncode == 0, exported.stderr
    return exported.stdout.splitlines()


@pytest.mark.parametrize(
    "command",
    [
        ("sessions", "send", "discord:group:ops", "Deploy done?"),
        ("sessions", "send", "discord:group:ops", "later", "--timeout-seconds", "0"),
        ("sessions", "spawn", "Count open tickets"),
    ],
    ids=["send", "send-no-wait", "spawn"],
)
def test_without_a_runtime_it_refuses_before_writing(store: str, command: tuple[str, ...]) -> None:
    before = recorded(store)
    result = cli(*command, store=store)
    assert result.returncode == 2
    assert "there is no agent runtime: pass --runtime FILE" in result.stderr
    assert NO_RUNTIME not in result.stdout
    assert recorded(store) == before


def test_runtime_file_answers_and_script_is_its_alias(store: str, script: str) -> None:
    for option in ("--runtime", "--script"):
        result = cli(
            "sessions", "send", "discord:group:ops", "Deploy?", option, script, store=store
        )
        assert result.returncode == 0, result.stderr
        assert "ok: reply 'On it.'" in result.stdout


def test_send_that_does_not_wait_is_accepted(store: str, script: str) -> None:
    result = cli(
        "sessions",
        "send",
        "discord:group:ops",
        "later",
        "--timeout-seconds",
        "0",
        "--runtime",
        script,
        store=store,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("accepted")


def test_send_json_prints_the_tool_result(store: str, script: str) -> None:
    result = cli(
        "--json",
        "sessions",
        "send",
        "discord:group:ops",
        "hi",
        "--as",
        "main",
        "--script",
        script,
        store=store,
    )
    assert result.returncode == 0, result.stderr
    sent = json.loads(result.stdout)
    assert (sent["status"], sent["reply"], sent["sessionKey"]) == (
        "ok",
        "On it.",
        "agent:main:discord:group:ops",
    )


def test_send_to_a_session_that_does_not_exist_exits_1(store: str, script: str) -> None:
    result = cli("sessions", "send", "discord:group:nope", "hi", "--runtime", script, store=store)
    assert result.returncode == 1
    assert "Session not found: discord:group:nope" in result.stderr


def test_spawn_reports_back_into_the_requester_chat(store: str, script: str) -> None:
    result = cli(
        "sessions",
        "spawn",
        "Count open tickets",
        "--label",
        "tickets",
        "--script",
        script,
        store=store,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("accepted: child agent:main:subagent:")
    assert "report delivered to webchat user:kim (archive due " in result.stdout
    assert "): Status: ok" in result.stdout
    listed = json.loads(cli("--json", "sessions", "list", store=store).stdout)
    children = [row for row in listed["sessions"] if ":subagent:" in row["key"]]
    # The child stays listed until its archive is due, an hour after its run ended.
    assert [child["label"] for child in children] == ["tickets"]


def test_spawn_with_cleanup_delete_removes_the_child(store: str, script: str) -> None:
    result = cli(
        "--json",
        "sessions",
        "spawn",
        "one-off",
        "--cleanup",
        "delete",
        "--script",
        script,
        store=store,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "accepted"
    listed = json.loads(cli("--json", "sessions", "list", store=store).stdout)
    assert not [row for row in listed["sessions"] if ":subagent:" in row["key"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "ops"), "agentId is not allowed for sessions_spawn (allowed: none)"),
        (("--model", "gpt-nope"), "gpt-nope"),
        (("--as", "agent::x"), "invalid requester session"),
    ],
)
def test_spawn_refusals_exit_1_with_the_reason(
    store: str, script: str, args: tuple[str, ...], message: str
) -> None:
    result = cli("sessions", "spawn", "task", *args, "--runtime", script, store=store)
    assert result.returncode == 1
    assert message in result.stderr


def test_a_bad_script_exits_2_naming_the_rule(store: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {step: primry}\n")
    for option in ("--script", "--runtime"):
        result = cli("sessions", "spawn", "task", option, str(bad), store=store)
        assert result.returncode == 2
        assert "invalid script: rules[0].step:" in result.stderr
        assert "unknown step 'primry'" in result.stderr
