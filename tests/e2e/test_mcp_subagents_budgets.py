"""``subagents``, ``session_status`` and a trace budget over MCP: the server started
through the real CLI (``sessionwire mcp``), driven by the official ``mcp`` client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp_stdio import payload, stdio_session
from sessionwire import SyncGateway

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "match": "^long", "reply": "late", "delaySeconds": 600},
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/mcp.db"
    with SyncGateway.open(store=url) as gateway:
        gateway.record_message("main", role="user", content="hello")
    return url


@asynccontextmanager
async def session(
    tmp_path: Path, budget: dict[str, Any] | None = None
) -> AsyncIterator[ClientSession]:
    store = f"sqlite:///{tmp_path}/mcp.db"
    script = tmp_path / "agents.json"
    script.write_text(json.dumps(SCRIPT))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"session": {"agentToAgent": {"budget": budget or {}}}}))
    async with stdio_session(
        store, "--session", "main", "--runtime", str(script), config=config
    ) as client:
        yield client


async def test_subagents_and_session_status_over_mcp(store: str, tmp_path: Path) -> None:
    async with session(tmp_path) as client:
        spawned = payload(await client.call_tool("sessions_spawn", {"task": "long job"}))
        listed = payload(await client.call_tool("subagents", {}))
        steered = await client.call_tool(
            "subagents", {"action": "steer", "target": spawned["runId"], "message": "hurry"}
        )
        status = payload(await client.call_tool("session_status", {}))
        cancelled = payload(
            await client.call_tool("subagents", {"action": "cancel", "target": "all"})
        )
        late = await client.call_tool(
            "subagents", {"action": "steer", "target": spawned["runId"], "message": "hi"}
        )

    assert [row["runId"] for row in listed["active"]] == [spawned["runId"]]
    assert not steered.is_error
    assert payload(steered)["steers"] == 1
    assert status["sessionKey"] == "main"
    assert [child["runId"] for child in status["children"]] == [spawned["runId"]]
    assert [run["cancelled"] for run in cancelled["runs"]] == [True]
    assert late.is_error
    assert "has already ended (cancelled)" in payload(late)["error"]


async def test_a_budget_refusal_over_mcp_is_an_error_result(store: str, tmp_path: Path) -> None:
    async with session(tmp_path, {"maxRuns": 0}) as client:
        refused = await client.call_tool("sessions_spawn", {"task": "anything"})
    assert refused.is_error
    assert payload(refused) == {
        "status": "forbidden",
        "error": "trace budget exceeded: maxRuns 0 reached (0 runs in this trace)",
    }


async def test_a_child_spawned_with_context_fork_over_mcp_shows_the_inherited_lines(
    store: str, tmp_path: Path
) -> None:
    # Decision 34: the child starts from main's transcript, by reference.
    async with session(tmp_path) as client:
        forked = payload(
            await client.call_tool("sessions_spawn", {"task": "go", "context": "fork"})
        )
        isolated = payload(await client.call_tool("sessions_spawn", {"task": "go"}))
        seen = payload(
            await client.call_tool("sessions_history", {"sessionKey": forked["childSessionKey"]})
        )
        alone = payload(
            await client.call_tool("sessions_history", {"sessionKey": isolated["childSessionKey"]})
        )

    assert forked["status"] == "accepted", forked
    assert seen["messages"][0]["content"][0]["text"] == "hello"
    assert seen["messages"][0]["forkedFrom"] == "agent:main:main"
    assert all("forkedFrom" not in message for message in alone["messages"])
