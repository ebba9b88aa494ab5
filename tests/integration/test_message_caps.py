"""The 4 MiB message cap holds on every path into a transcript (issue 16, finding 7)."""

from __future__ import annotations

from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.domain.transcript import MAX_MESSAGE_BYTES

# A million control characters: within the tool's character limit, but six bytes each
# once JSON-escaped (a 5.99 MB message was stored before the cap counted bytes).
ESCAPED = "\x01" * 999_000


async def test_sessions_send_refuses_a_message_over_the_cap_as_json(gateway: Gateway) -> None:
    await gateway.record_message("agent:main:cron:target", role="user", content="hi")
    before = store_of(gateway).log_position()
    result = await gateway.call_tool(
        "main",
        "sessions_send",
        {"sessionKey": "agent:main:cron:target", "message": ESCAPED, "timeoutSeconds": 0},
    )
    assert result["status"] == "error"
    assert "message is too large" in result["error"]
    assert str(MAX_MESSAGE_BYTES - 4096) in result["error"]
    assert store_of(gateway).log_position() == before


async def test_sessions_spawn_refuses_a_task_over_the_cap_as_json(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="hi")
    before = store_of(gateway).log_position()
    result = await gateway.call_tool("main", "sessions_spawn", {"task": ESCAPED})
    assert result["status"] == "error"
    assert "task is too large" in result["error"]
    assert store_of(gateway).log_position() == before
