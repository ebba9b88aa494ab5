"""``sessions_spawn`` with ``context: "fork"`` over MCP (decision 34): the server started
through the real CLI (``sessionwire mcp``), driven by the official ``mcp`` client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_stdio import payload, stdio_session
from sessionwire import SyncGateway

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/mcp.db"
    with SyncGateway.open(store=url) as gateway:
        gateway.record_message("main", role="user", content="what the child should know")
    return url


async def test_a_child_spawned_with_context_fork_over_mcp_shows_the_inherited_lines(
    store: str, tmp_path: Path
) -> None:
    script = tmp_path / "agents.json"
    script.write_text(json.dumps(SCRIPT))

    async with stdio_session(store, "--session", "main", "--runtime", str(script)) as client:
        forked = payload(
            await client.call_tool("sessions_spawn", {"task": "go on", "context": "fork"})
        )
        isolated = payload(await client.call_tool("sessions_spawn", {"task": "go on"}))
        seen = payload(
            await client.call_tool("sessions_history", {"sessionKey": forked["childSessionKey"]})
        )
        alone = payload(
            await client.call_tool("sessions_history", {"sessionKey": isolated["childSessionKey"]})
        )

    assert forked["status"] == "accepted", forked
    messages = seen["messages"]
    assert isinstance(messages, list)
    assert messages[0]["content"][0]["text"] == "what the child should know"
    assert messages[0]["forkedFrom"] == "agent:main:main"
    assert all("forkedFrom" not in m for m in alone["messages"])  # type: ignore[union-attr]
