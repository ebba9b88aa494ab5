"""A send steered into a busy session's run over MCP (``session.agentToAgent.busy:
steer``): the server started through the real CLI (``sessionwire mcp``), driven by the
official ``mcp`` client. The answer is the send tool's, unchanged by the transport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp import types
from mcp_stdio import stdio_session
from sessionwire import Gateway

SCRIPT = {
    "rules": [
        # "long" keeps the target's run in flight while the test sends into it again.
        {"step": "primary", "match": "^long", "reply": "late", "delaySeconds": 600},
        {"step": "primary", "reply": "pong"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
TARGET = "agent:main:discord:group:ops"


def payload(result: types.CallToolResult) -> dict[str, Any]:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    data = json.loads(block.text)
    assert isinstance(data, dict)
    return data


async def test_a_send_into_a_busy_session_is_steered_over_mcp(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/mcp.db"
    seeding = await Gateway.open(store=store)
    await seeding.record_message("main", role="user", content="hello")
    await seeding.record_message(TARGET, role="user", content="standup")
    await seeding.close()
    script = tmp_path / "agents.json"
    script.write_text(json.dumps(SCRIPT))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"session": {"agentToAgent": {"busy": "steer"}}}))
    async with stdio_session(
        store, "--session", "main", "--runtime", str(script), config=config
    ) as client:
        send = {"sessionKey": TARGET, "timeoutSeconds": 0}
        first = payload(await client.call_tool("sessions_send", {**send, "message": "long job"}))
        steered = await client.call_tool("sessions_send", {**send, "message": "be quick"})
        # End the long run rather than wait ten minutes for it.
        cancelled = payload(await client.call_tool("runs_cancel", {"runId": first["runId"]}))

    assert first["delivery"] == {"status": "started", "mode": "announce"}
    assert not steered.is_error
    assert payload(steered) == {
        "runId": first["runId"],
        "status": "accepted",
        "sessionKey": TARGET,
        "delivery": {"status": "steered", "runId": first["runId"]},
    }
    assert cancelled["status"] == "ok", cancelled
    reading = await Gateway.open(store=store)
    try:
        history = await reading.call_tool("main", "sessions_history", {"sessionKey": TARGET})
    finally:
        await reading.close()
    steer = history["messages"][-1]
    assert steer["content"][0]["text"] == "be quick"
    assert steer["provenance"]["sessionKey"] == "agent:main:main"
