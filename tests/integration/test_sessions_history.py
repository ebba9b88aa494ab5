"""sessions_history: a session's messages, by key or sessionId, from the transcript table."""

from __future__ import annotations

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.tools.sessions_history import cap_bytes
from sessionwire.testing import VirtualClock


@pytest.fixture
def config() -> GatewayConfig:
    # Written before visibility scopes (decision 28): what every session reached then.
    return GatewayConfig.load(before_scopes())


async def test_tool_results_are_filtered_unless_asked_for(gateway: Gateway) -> None:
    await gateway.record_message("main", role="toolResult", content="tool output")
    await gateway.record_message("main", role="assistant", content="ok")
    plain = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert plain["sessionKey"] == "main"
    assert [m["role"] for m in plain["messages"]] == ["assistant"]
    full = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "includeTools": True}
    )
    assert [m["role"] for m in full["messages"]] == ["toolResult", "assistant"]


async def test_messages_are_raw_transcript_objects(gateway: Gateway, clock: VirtualClock) -> None:
    await gateway.record_message(
        "main",
        role="assistant",
        content=[
            {"type": "text", "text": "calling"},
            {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"cmd": "ls"}},
        ],
        usage={"input": 3, "output": 4},
    )
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert history["messages"] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"cmd": "ls"}},
            ],
            "timestamp": int(clock.now().timestamp() * 1000),
            "usage": {"input": 3, "output": 4},
            # Additive (decision 18): a recorded line is its role's default kind.
            "provenance": {"kind": "agent"},
        }
    ]


async def test_a_session_id_resolves_to_its_session(gateway: Gateway) -> None:
    await gateway.record_message(
        "discord:channel:1457165743010611293", role="user", content="hey", channel="discord"
    )
    row = (await gateway.call_tool("main", "sessions_list", {}))["sessions"][0]
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": row["sessionId"]})
    assert history["sessionKey"] == "agent:main:discord:channel:1457165743010611293"
    assert len(history["messages"]) == 1


@pytest.mark.parametrize(
    "reference", ["main", "MAIN", "  main  ", "agent:main:main", "AGENT:Main:MAIN"]
)
async def test_every_way_of_naming_main_reads_the_same_session(
    gateway: Gateway, reference: str
) -> None:
    await gateway.record_message("main", role="user", content="hi")
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": reference})
    assert history["sessionKey"] == "main"
    assert len(history["messages"]) == 1


async def test_unknown_key_is_an_error_not_an_empty_list(gateway: Gateway) -> None:
    result = await gateway.call_tool("main", "sessions_history", {"sessionKey": "cron:nope"})
    assert result == {
        "status": "error",
        "tool": "sessions_history",
        "error": "Session not found: cron:nope",
    }


async def test_unknown_session_id_is_an_error(gateway: Gateway) -> None:
    raw = "aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa"
    result = await gateway.call_tool("main", "sessions_history", {"sessionKey": raw})
    assert result["status"] == "error"
    assert (
        result["error"] == f"Session not found: {raw} (use the full sessionKey from sessions_list)"
    )


async def test_missing_session_key_is_required(gateway: Gateway) -> None:
    result = await gateway.call_tool("main", "sessions_history", {})
    assert result == {"status": "error", "tool": "sessions_history", "error": "sessionKey required"}


@pytest.mark.parametrize(("limit", "expected"), [(3, 3), (0, 1), (-5, 1), (2.7, 2), (5000, 30)])
async def test_limit_is_clamped_never_refused(
    gateway: Gateway, limit: float, expected: int
) -> None:
    for index in range(30):
        await gateway.record_message("main", role="user", content=f"m{index}")
    history = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "limit": limit}
    )
    texts = [m["content"][0]["text"] for m in history["messages"]]
    assert texts == [f"m{i}" for i in range(30 - expected, 30)]


async def test_limit_default_is_200_and_max_1000(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="first")
    session = store_of(gateway).session("agent:main:main")
    assert session is not None
    aggregate = session.to_aggregate()
    from sessionwire.domain.transcript import TranscriptMessage

    for index in range(1100):
        message = TranscriptMessage(
            role="user", content=[{"type": "text", "text": f"m{index}"}], timestamp=index
        )
        aggregate.append_message(message, at=internals(gateway).clock.now())
    store_of(gateway).save(aggregate)
    default = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert len(default["messages"]) == 200
    assert default["messages"][-1]["content"][0]["text"] == "m1099"
    most = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main", "limit": 1e9})
    assert len(most["messages"]) == 1000


def test_six_mib_cap_drops_the_oldest_and_keeps_at_least_one() -> None:
    texts = ["a" * 10, "b" * 10, "c" * 10]
    # [aaaaaaaaaa,bbbbbbbbbb,cccccccccc] is 2 brackets + 30 + 2 commas = 34 bytes.
    assert cap_bytes(texts, 34) == texts
    assert cap_bytes(texts, 33) == texts[1:]
    assert cap_bytes(texts, 23) == texts[1:]
    assert cap_bytes(texts, 22) == texts[2:]
    assert cap_bytes(texts, 1) == texts[2:]
    assert cap_bytes([], 1) == []


async def test_a_large_history_is_capped_at_six_mib(gateway: Gateway) -> None:
    big = "x" * (1024 * 1024)
    for _ in range(8):
        await gateway.record_message("main", role="user", content=big)
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert len(history["messages"]) == 5


async def test_user_envelopes_are_cleaned_for_readers(gateway: Gateway) -> None:
    await gateway.record_message(
        "main",
        role="user",
        content="[WhatsApp +1555 2026-01-01 10:00] hi there\n[message_id: abc123]",
    )
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert history["messages"][0]["content"][0]["text"] == "hi there"


async def test_cross_agent_history_is_forbidden_by_default(gateway: Gateway) -> None:
    await gateway.record_message("agent:other:main", role="user", content="secret")
    result = await gateway.call_tool(
        "agent:main:main", "sessions_history", {"sessionKey": "agent:other:main"}
    )
    assert result == {
        "status": "forbidden",
        "tool": "sessions_history",
        "error": "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true "
        "to allow cross-agent access.",
    }


async def test_cross_agent_history_outside_the_allow_list_is_denied(
    store_url: str, clock: VirtualClock
) -> None:
    config = GatewayConfig.load(
        before_scopes({"tools": {"agentToAgent": {"enabled": True, "allow": ["main"]}}})
    )
    gateway = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        await gateway.record_message("agent:other:main", role="user", content="secret")
        result = await gateway.call_tool(
            "agent:main:main", "sessions_history", {"sessionKey": "agent:other:main"}
        )
        assert result["status"] == "forbidden"
        assert result["error"] == "Agent-to-agent history denied by tools.agentToAgent.allow."
    finally:
        await gateway.close()


async def test_archived_and_deleted_sessions_leave_the_tools(gateway: Gateway) -> None:
    for key in ("cron:a", "cron:b"):
        await gateway.record_message(key, role="user", content="x")
    for key, verb in (("agent:main:cron:a", "archive"), ("agent:main:cron:b", "delete")):
        stored = store_of(gateway).session(key)
        assert stored is not None
        aggregate = stored.to_aggregate()
        getattr(aggregate, verb)(reason="test", at=internals(gateway).clock.now())
        store_of(gateway).save(aggregate)
    listed = await gateway.call_tool("main", "sessions_list", {})
    assert listed["count"] == 0
    result = await gateway.call_tool("main", "sessions_history", {"sessionKey": "cron:a"})
    assert result["error"] == "Session not found: cron:a"
    events = [type(e).__name__ for e in store_of(gateway).stream(stored.id)]
    assert events == ["SessionOpened", "MessageAppended", "SessionDeleted"]
