"""``sessionwire demo``: a scripted team plays a scenario on a real store, shown live.

Every test goes through the real command line: ``main`` in this process, and the first
one as a real process (``cli_process``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from command_line import Ran, run_in_process, run_process
from sessionwire.adapters.cli.main import main


def cli(*args: str) -> Ran:
    return run_in_process(*args, env={"SESSIONWIRE_STORE": "memory"})


def cli_process(*args: str) -> Ran:
    return run_process(*args, env={"SESSIONWIRE_STORE": "memory"})


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/demo.db"


def demo_json(*args: str) -> dict[str, Any]:
    result = cli(*args, "--json", "demo")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def names(document: dict[str, Any]) -> list[str]:
    return [event["event"] for event in document["events"]]


def test_the_demo_shows_each_part_of_the_exchange_as_it_is_recorded(store: str) -> None:
    result = cli_process("--store", store, "demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # A user message, the send and its reply, the ping-pong loop, the announce.
    assert "user: Is deploy 42 healthy? And what happened yesterday?" in out
    assert "ExchangeOpened" in out
    assert "reply: Deploy 42 is green: error rate 0.1%, p95 latency 180 ms." in out
    assert "turn 1 (requester): Thanks. Any alerts since the rollout?" in out
    assert "turn 3 (requester): REPLY_SKIP, the loop ends" in out
    assert "posted to discord channel:ops: Deploy 42 checked for Atlas" in out
    # The spawn, the child's report back to the user's chat, the archive an hour later.
    assert "→ accepted: child agent:research:subagent:" in out
    report = re.search(
        r"report delivered to webchat user:kim \(archive due (\S+)\): Status: ok", out
    )
    assert report is not None
    [archived] = [line for line in out.splitlines() if "SubagentArchived" in line]
    assert archived.strip().startswith(report[1])  # archived when the report said it would be
    assert "archiveAfterMinutes elapsed" in out
    # The sessions_list table (the archived child is gone from it) and the store.
    assert "2 session(s)" in out
    assert "agent:ops:discord:group:ops" in out
    assert "agent:research:subagent" not in out.split("2 session(s)")[1]
    assert f"store: {store.removeprefix('sqlite:///')}" in out
    config = store.removeprefix("sqlite:///").removesuffix(".db") + ".config.json"
    assert f"sessionwire --store {store} --config {config} sessions history main" in out


def test_events_come_in_log_order_and_in_the_order_the_story_happens(store: str) -> None:
    document = demo_json("--store", store)
    positions = [event["position"] for event in document["events"]]
    assert positions == sorted(positions) == list(range(1, len(positions) + 1))
    story = [
        "ExchangeOpened",
        "RoundOneReplied",
        "PingPongTurn",
        "ReplySkipped",
        "AnnounceDelivered",
        "ExchangeClosed",
        "SubagentSpawned",
        "SubagentRunEnded",
        "SubagentAnnounced",
        "SubagentArchived",
    ]
    seen = names(document)
    assert [name for name in seen if name in story and name != "PingPongTurn"] == [
        name for name in story if name != "PingPongTurn"
    ]
    assert seen.count("PingPongTurn") == 2
    archived = next(e for e in document["events"] if e["event"] == "SubagentArchived")
    reported = next(e for e in document["events"] if e["event"] == "SubagentAnnounced")
    minutes = (_time(archived["time"]) - _time(reported["time"])) / 60
    assert minutes == 60


def _time(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


def test_json_output_holds_steps_events_and_the_final_list(store: str) -> None:
    document = demo_json("--store", store)
    assert document["scenario"] == "team"
    assert document["store"].endswith("demo.db")
    assert document["failure"] is None
    kinds = [step["kind"] for step in document["steps"]]
    assert kinds == ["message", "message", "call", "call", "message", "advance", "advance"]
    send = document["steps"][2]["result"]
    assert send["status"] == "ok"
    assert send["reply"] == "Deploy 42 is green: error rate 0.1%, p95 latency 180 ms."
    assert document["steps"][3]["result"]["status"] == "accepted"
    listed = document["sessions"]
    assert [row["key"] for row in listed["sessions"]] == ["main", "agent:ops:discord:group:ops"]


def test_a_second_demo_on_the_same_store_adds_to_the_same_sessions(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first played three hours ago (its simulated hour long over): the second starts
    # after it and still ends before the real time.
    from sessionwire.adapters.cli.demo import command

    earlier = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    with monkeypatch.context() as patched:
        patched.setattr(command, "real_now", lambda: earlier)
        first = demo_json("--store", store)
    second = demo_json("--store", store)

    # The second run shows only what it recorded, after everything the first one did.
    last_of_first = first["events"][-1]
    assert second["events"][0]["position"] == last_of_first["position"] + 1
    assert second["events"][0]["time"] > last_of_first["time"]
    # Its sessions already exist, so they are not opened again; its messages still name them.
    opened = [e["session"] for e in second["events"] if e["event"] == "SessionOpened"]
    assert opened == [next(s for s in opened if s.startswith("agent:research:subagent:"))]
    appended = {e["session"] for e in second["events"] if e["event"] == "MessageAppended"}
    assert {"main", "agent:ops:discord:group:ops"} <= appended
    # A fresh exchange and a fresh child, which is archived in its turn.
    assert names(second).count("ExchangeClosed") == 1
    assert names(second).count("SubagentArchived") == 1
    assert [row["key"] for row in second["sessions"]["sessions"]] == [
        "main",
        "agent:ops:discord:group:ops",
    ]
    assert second["events"][-1]["time"] <= datetime.now(UTC).isoformat()


def test_a_demo_never_records_an_event_after_the_real_time(store: str) -> None:
    played = demo_json("--store", store)
    assert played["events"][-1]["time"] <= datetime.now(UTC).isoformat()
    # Again at once, it could only stamp its hour after now: refused, saying why.
    again = cli("--store", store, "demo")
    assert again.returncode == 2
    assert "this demo would record events after the real time" in again.stderr


CUSTOM = """
// A two-agent scenario in JSON5: a fire-and-forget send, silent announce.
{
  name: "pair",
  start: "2026-03-01T08:00:00Z",
  config: { tools: { agentToAgent: { enabled: true }, sessions: { visibility: "all" } } },
  replies: [
    { agent: "helper", step: "primary", reply: "on it", delaySeconds: 30 },
    { step: "reply_back", reply: "REPLY_SKIP" },
    { step: "announce", reply: "ANNOUNCE_SKIP" },
  ],
  steps: [
    { message: { session: "agent:helper:main", text: "ready" } },
    { message: { session: "main", text: "hello", channel: "telegram", to: "42" } },
    { note: "Ask the helper, without waiting",
      call: { tool: "sessions_send", as: "main",
              params: { sessionKey: "agent:helper:main", message: "tidy up",
                        timeoutSeconds: 0 } } },
    { advance: { seconds: 30 } },
    { call: { tool: "sessions_history", params: { sessionKey: "agent:helper:main" } } },
  ],
}
"""


def test_a_scenario_file_of_ones_own(tmp_path: Path, store: str) -> None:
    scenario = tmp_path / "pair.json5"
    scenario.write_text(CUSTOM)
    result = cli("--store", store, "demo", "--scenario", str(scenario))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "sessionwire demo: pair" in out
    assert "Ask the helper, without waiting" in out
    assert "→ accepted" in out
    assert "08:00:30" in out  # the helper's reply, 30 simulated seconds later
    assert "reply: on it" in out
    assert "AnnounceSkipped" in out
    assert "2 session(s)" in out


def test_a_bad_scenario_exits_2_naming_the_field(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(
        "name: bad\n"
        "steps:\n"
        "  - message: {session: main, text: hi}\n"
        "  - advance: {minutes: soon}\n"
        "  - call: {tool: sessions_send, params: {sessionKey: main}}\n"
        "  - wait: 5\n"
    )
    result = cli("demo", "--scenario", str(scenario))
    assert result.returncode == 2
    assert f"invalid scenario {scenario}" in result.stderr
    assert "steps[1].advance.minutes: Input should be a valid number" in result.stderr
    assert "steps[2].call: params do not fit sessions_send: message required" in result.stderr
    assert "steps[3].wait: Extra inputs are not permitted" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("name: x\nsteps: []\n", "steps: List should have at least 1 item"),
        ("name: x\nsteps:\n  - {}\n", "steps[0]: a step needs exactly one of"),
        ("steps: [{advance: {hours: 1}}]\n", "name: Field required"),
        ("name: [unclosed\n", "cannot be parsed"),
        (
            "name: x\nconfig: {session: {scope: 42}}\nsteps: [{advance: {hours: 1}}]\n",
            "config.session.scope",
        ),
        (
            "name: x\nreplies: [{step: primry}]\nsteps: [{advance: {hours: 1}}]\n",
            "replies[0].step: unknown step 'primry'",
        ),
    ],
)
def test_scenario_mistakes_are_named(tmp_path: Path, content: str, expected: str) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(content)
    result = cli("demo", "--scenario", str(scenario))
    assert result.returncode == 2
    assert expected in result.stderr


def test_a_missing_scenario_file_exits_2(tmp_path: Path) -> None:
    result = cli("demo", "--scenario", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "cannot read scenario" in result.stderr


REFUSED = """
name: refused
steps:
  - message: {session: main, text: hi}
  - call: {tool: sessions_history, params: {sessionKey: "cron:nope"}}
  - message: {session: main, text: never played}
"""


def test_a_refused_call_stops_the_demo_with_exit_1_naming_the_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "refused.yaml"
    scenario.write_text(REFUSED)
    assert main(["--store", "memory", "demo", "--scenario", str(scenario)]) == 1
    captured = capsys.readouterr()
    assert "step 2 (sessions_history as main): error: Session not found: cron:nope" in (
        captured.err
    )
    assert "never played" not in captured.out
    assert "1 session(s)" in captured.out  # the table still shows what was recorded


def test_a_refusal_the_scenario_expects_is_part_of_the_story(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "expected.yaml"
    scenario.write_text(REFUSED.replace('"cron:nope"}}', '"cron:nope"}, expect: error}'))
    assert main(["--store", "memory", "demo", "--scenario", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert "→ error: Session not found: cron:nope" in out
    assert "user: never played" in out


def test_the_demo_plays_on_every_store(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", store_url, "--json", "demo"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["failure"] is None
    assert names(document).count("SubagentArchived") == 1
    assert document["sessions"]["count"] == 2


def test_config_keys_the_scenario_misspells_are_pointed_out(tmp_path: Path) -> None:
    scenario = tmp_path / "typo.yaml"
    scenario.write_text(
        "name: typo\nconfig: {tools: {agentToAgnt: {enabled: true}}}\n"
        "steps: [{message: {session: main, text: hi}}]\n"
    )
    result = cli("demo", "--scenario", str(scenario))
    # Config fails closed (issue 16, finding 8): a near-miss is an error naming the key meant.
    assert result.returncode == 2, result.stderr
    assert "config.tools: unknown key 'agentToAgnt': did you mean 'agentToAgent'?" in result.stderr
