"""``subagents``, ``session_status`` and a trace budget over real HTTP (uvicorn on a
loopback port, SQLite): POST /v1/tools/subagents, /v1/tools/session_status, and a
spawn refused by ``session.agentToAgent.budget``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live_http import LiveServer, live_server
from scopes import before_scopes
from sessionwire import GatewayConfig, SyncGateway
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        # A sub-agent whose task says "long" works for ten minutes: it is in flight while
        # the test lists, steers and cancels it (the cancel ends it, no test waits).
        {"step": "subagent_task", "match": "^long", "reply": "late", "delaySeconds": 600},
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "primary", "reply": "pong"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


def seed(store: str) -> None:
    with SyncGateway.open(store=store) as gateway:
        gateway.record_message("main", role="user", content="hello")
        gateway.record_message("agent:main:work:other", role="user", content="other")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    store = f"sqlite:///{tmp_path_factory.mktemp('subagents')}/sessions.db"
    seed(store)
    with live_server(store, runtime=ScriptedRuntime.from_dict(SCRIPT)) as live:
        yield live


@pytest.fixture(scope="module")
def spent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A gateway whose traces may spawn nothing (maxSpawns 0)."""
    store = f"sqlite:///{tmp_path_factory.mktemp('budget')}/sessions.db"
    seed(store)
    config = GatewayConfig.load(
        before_scopes({"session": {"agentToAgent": {"budget": {"maxSpawns": 0}}}})
    )
    with live_server(store, runtime=ScriptedRuntime.from_dict(SCRIPT), config=config) as live:
        yield live


def tool(client: httpx.Client, name: str, body: dict[str, object]) -> dict[str, Any]:
    response = client.post(f"/v1/tools/{name}", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert isinstance(answer, dict)
    return answer


def test_list_steer_and_cancel_a_child_over_http(server: LiveServer) -> None:
    with server.client() as main, server.client("agent:main:work:other") as other:
        spawned = tool(main, "sessions_spawn", {"task": "long research", "label": "research"})
        assert spawned["status"] == "accepted"
        run_id = str(spawned["runId"])

        listed = tool(main, "subagents", {"action": "list"})
        assert [row["runId"] for row in listed["active"]] == [run_id]
        assert tool(other, "subagents", {})["total"] == 0

        steered = tool(
            main, "subagents", {"action": "steer", "target": "research", "message": "be brief"}
        )
        assert steered["status"] == "ok"
        assert steered["runId"] == run_id
        assert steered["steers"] == 1
        hidden = tool(other, "subagents", {"action": "cancel", "target": run_id})
        assert hidden == {
            "status": "error",
            "tool": "subagents",
            "error": f"no sub-agent run or session {run_id!r} in this session's spawn tree",
        }

        status = tool(main, "session_status", {})
        assert status["status"] == "ok"
        assert [child["runId"] for child in status["children"]] == [run_id]

        cancelled = tool(main, "subagents", {"action": "cancel", "target": run_id})
        assert cancelled["runs"] == [
            {
                "runId": run_id,
                "sessionKey": spawned["childSessionKey"],
                "cancelled": True,
                "cascaded": [],
            }
        ]
        late = tool(main, "subagents", {"action": "steer", "target": run_id, "message": "hi"})
        assert late["status"] == "error"
        assert late["error"] == (
            f"run {run_id} has already ended (cancelled): a steer reaches only a queued or "
            "running run"
        )


def test_the_tools_are_listed_with_their_schemas(server: LiveServer) -> None:
    with server.client() as main:
        names = [entry["name"] for entry in main.get("/v1/tools").json()["tools"]]
    assert {"subagents", "session_status"} <= set(names)


def test_a_spawn_over_budget_is_refused_with_the_recorded_reason(spent: LiveServer) -> None:
    with spent.client() as main:
        refused = tool(main, "sessions_spawn", {"task": "anything"})
        sent = tool(main, "sessions_send", {"sessionKey": "agent:main:work:other", "message": "hi"})
    assert refused == {
        "status": "forbidden",
        "error": "trace budget exceeded: maxSpawns 0 reached (0 spawns in this trace)",
    }
    assert sent["status"] == "ok"
