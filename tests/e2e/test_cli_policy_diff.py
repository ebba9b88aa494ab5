"""``sessionwire policy diff --config NEW`` through the real command line, on SQLite and
PostgreSQL: every recorded tool call's access decision asked again of a candidate
config, the flips listed both ways (a table for people, ``--json`` for scripts), a bad
candidate exit 2.

The store records, under the default scope (``tree``): main reading and sending into its
agent's group (granted), the group reading and sending into main (refused: outside its
tree), main sending to another agent (refused: cross-agent needs ``all``), and a spawn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from command_line import run_in_process, run_process
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "ok"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
MAIN = "agent:main:main"
GROUP = "agent:main:discord:group:dev"
OTHER = "agent:other:main"
A2A_ON = {"tools": {"agentToAgent": {"enabled": True}}}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/policy.db"
    return str(request.getfixturevalue("postgres_url"))


async def record_calls(store: str) -> None:
    gw = await Gateway.open(
        config=GatewayConfig.load(A2A_ON),
        store=store,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    try:
        for key in (MAIN, GROUP, OTHER):
            await gw.record_message(key, role="user", content="hi")
        send = {"message": "hello", "timeoutSeconds": 0}
        assert (await gw.call_tool(MAIN, "sessions_send", {"sessionKey": GROUP, **send}))[
            "status"
        ] == "accepted"
        refused = await gw.call_tool(GROUP, "sessions_history", {"sessionKey": MAIN})
        assert refused["status"] == "forbidden", refused
        refused = await gw.call_tool(GROUP, "sessions_send", {"sessionKey": MAIN, **send})
        assert refused["status"] == "forbidden", refused
        refused = await gw.call_tool(MAIN, "sessions_send", {"sessionKey": OTHER, **send})
        assert refused["status"] == "forbidden", refused
        assert (await gw.call_tool(MAIN, "sessions_spawn", {"task": "t"}))["status"] == "accepted"
        await gw.wait_idle()
    finally:
        await gw.close()


def candidate(tmp_path: Path, config: dict[str, Any], name: str = "new.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


def diff(store: str, path: str, *more: str) -> dict[str, Any]:
    ran = run_in_process(
        "policy", "diff", "--config", path, "--json", *more, env={"SESSIONWIRE_STORE": store}
    )
    assert ran.returncode == 0, ran.stderr
    result: dict[str, Any] = json.loads(ran.stdout)
    return result


def flips(result: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (change["flip"], change["requester"], change["tool"], change["target"])
        for change in result["changes"]
    }


async def test_widening_to_agent_shows_what_the_group_would_reach(
    store: str, tmp_path: Path
) -> None:
    await record_calls(store)
    widened = {**A2A_ON, "tools": {**A2A_ON["tools"], "sessions": {"visibility": "agent"}}}
    result = diff(store, candidate(tmp_path, widened))
    assert flips(result) == {
        ("refused->granted", GROUP, "sessions_history", MAIN),
        ("refused->granted", GROUP, "sessions_send", MAIN),
    }
    assert result["refusedToGranted"] == 2
    assert result["grantedToRefused"] == 0
    # 5 decisions recorded: 1 send and 1 spawn granted, 3 refusals.
    assert result["decisions"] == 5
    assert result["unjudged"] == 0


async def test_all_opens_the_cross_agent_send_too(store: str, tmp_path: Path) -> None:
    await record_calls(store)
    every = {**A2A_ON, "tools": {**A2A_ON["tools"], "sessions": {"visibility": "all"}}}
    result = diff(store, candidate(tmp_path, every))
    assert ("refused->granted", MAIN, "sessions_send", OTHER) in flips(result)
    assert result["refusedToGranted"] == 3


async def test_narrowing_to_self_shows_what_main_would_lose(store: str, tmp_path: Path) -> None:
    await record_calls(store)
    strict = {"tools": {"sessions": {"visibility": "self"}}}
    result = diff(store, candidate(tmp_path, strict))
    assert flips(result) == {("granted->refused", MAIN, "sessions_send", GROUP)}
    change = result["changes"][0]
    assert change["candidateRule"] == "tools.sessions.visibility"
    assert change["candidateError"] == (
        "Session not found, or not visible under tools.sessions.visibility=self."
    )


async def test_the_same_config_flips_nothing_and_the_table_says_so(
    store: str, tmp_path: Path
) -> None:
    await record_calls(store)
    same = candidate(tmp_path, A2A_ON)
    assert diff(store, same)["changes"] == []
    ran = run_process("policy", "diff", "--config", same, env={"SESSIONWIRE_STORE": store})
    assert ran.returncode == 0, ran.stderr
    assert "5 recorded decision(s) replayed: 0 would flip" in ran.stdout


async def test_a_send_policy_in_the_candidate_is_replayed_too(store: str, tmp_path: Path) -> None:
    await record_calls(store)
    deny = {
        **A2A_ON,
        "session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"chatType": "group"}}]}},
    }
    result = diff(store, candidate(tmp_path, deny))
    assert flips(result) == {("granted->refused", MAIN, "sessions_send", GROUP)}
    assert result["changes"][0]["candidateRule"] == "session.sendPolicy.rules[0]"


def test_a_bad_candidate_is_a_usage_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/empty.db"
    bad = candidate(tmp_path, {"tools": {"sessions": {"visibility": "everyone"}}})
    ran = run_in_process("policy", "diff", "--config", bad, env={"SESSIONWIRE_STORE": store})
    assert ran.returncode == 2
    assert "visibility" in ran.stderr
