"""sessions_history: a session's messages, by key or sessionId, from the transcript table."""

from __future__ import annotations

import json
from typing import Any

import pytest
from reader_trips import count_trips
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


# Paging back (decision 27) ---------------------------------------------------------------

FLAGS = ("truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes")


async def record_texts(gateway: Gateway, key: str, count: int) -> None:
    messages = [{"role": "user", "content": f"m{n}"} for n in range(count)]
    await gateway.record_many(key, messages)


def texts_of(answer: dict[str, Any]) -> list[str]:
    return [m["content"][0]["text"] for m in answer["messages"]]


async def test_paging_back_reaches_the_first_message_of_a_long_session(gateway: Gateway) -> None:
    await record_texts(gateway, "main", 1234)
    seen: list[str] = []
    offsets: list[int] = []
    params: dict[str, Any] = {"sessionKey": "main", "offset": 0}
    while True:
        page = await gateway.call_tool("main", "sessions_history", params)
        offsets.append(page["offset"])
        assert page["totalMessages"] == 1234
        seen = texts_of(page) + seen
        if "nextOffset" not in page:
            assert page["hasMore"] is False
            break
        assert page["hasMore"] is True
        params = {"sessionKey": "main", "offset": page["nextOffset"]}
    # 200 a page (the default limit), oldest first within each, none twice, none missed.
    assert offsets == [0, 200, 400, 600, 800, 1000, 1200]
    assert seen == [f"m{n}" for n in range(1234)]


async def test_a_page_is_chronological_and_says_where_the_next_one_starts(
    gateway: Gateway,
) -> None:
    await record_texts(gateway, "main", 10)
    newest = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": 0, "limit": 4}
    )
    assert texts_of(newest) == ["m6", "m7", "m8", "m9"]
    assert {k: newest[k] for k in ("offset", "totalMessages", "hasMore", "nextOffset")} == {
        "offset": 0,
        "totalMessages": 10,
        "hasMore": True,
        "nextOffset": 4,
    }
    last = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": 8, "limit": 4}
    )
    assert texts_of(last) == ["m0", "m1"]
    assert last["hasMore"] is False
    assert "nextOffset" not in last
    assert {k: last[k] for k in FLAGS} == {
        "truncated": False,
        "droppedMessages": False,
        "contentTruncated": False,
        "contentRedacted": False,
        "bytes": len(json.dumps(last["messages"], separators=(",", ":")).encode()),
    }


async def test_without_offset_the_tail_carries_the_flags_and_no_paging(gateway: Gateway) -> None:
    await record_texts(gateway, "main", 5)
    tail = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main", "limit": 2})
    assert texts_of(tail) == ["m3", "m4"]
    assert list(tail) == ["sessionKey", "messages", *FLAGS]
    assert tail["truncated"] is False


async def test_offsets_count_the_view_asked_for(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="first")
    await gateway.record_message("main", role="toolResult", content="tool output")
    await gateway.record_message("main", role="assistant", content="last")
    plain = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": 1, "limit": 1}
    )
    assert texts_of(plain) == ["first"]
    assert plain["totalMessages"] == 2
    tools = await gateway.call_tool(
        "main",
        "sessions_history",
        {"sessionKey": "main", "offset": 1, "limit": 1, "includeTools": True},
    )
    assert texts_of(tools) == ["tool output"]
    assert tools["totalMessages"] == 3
    assert tools["nextOffset"] == 2


async def test_messages_the_byte_cap_leaves_out_open_the_next_page(gateway: Gateway) -> None:
    big = "x" * (1024 * 1024)
    for n in range(8):
        await gateway.record_message("main", role="user", content=f"{n}{big}")
    first = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main", "offset": 0})
    assert [t[0] for t in texts_of(first)] == ["3", "4", "5", "6", "7"]
    assert first["truncated"] is True
    assert first["droppedMessages"] is True
    assert first["nextOffset"] == 5
    assert first["bytes"] <= 6 * 1024 * 1024
    rest = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": first["nextOffset"]}
    )
    assert [t[0] for t in texts_of(rest)] == ["0", "1", "2"]
    assert rest["droppedMessages"] is False
    assert "nextOffset" not in rest
    # The tail says it dropped the oldest too.
    tail = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert tail["droppedMessages"] is True


async def test_another_sessions_masked_secret_is_flagged(gateway: Gateway) -> None:
    await gateway.record_message(
        "discord:group:ops", role="user", content="key AKIAIOSFODNN7EXAMPLE", channel="discord"
    )
    params = {"sessionKey": "discord:group:ops", "offset": 0}
    other = await gateway.call_tool("main", "sessions_history", params)
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(other)
    assert other["contentRedacted"] is True
    own = await gateway.call_tool("discord:group:ops", "sessions_history", params)
    assert "AKIAIOSFODNN7EXAMPLE" in json.dumps(own)
    assert own["contentRedacted"] is False


@pytest.mark.parametrize("offset", [3, 4, 1000, 2**70, 1e300, 1e400])
async def test_an_offset_at_or_past_the_first_message_reads_an_empty_page(
    gateway: Gateway, offset: float
) -> None:
    await record_texts(gateway, "main", 3)
    page = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": offset}
    )
    assert page["messages"] == []
    assert page["totalMessages"] == 3
    assert page["hasMore"] is False
    assert "nextOffset" not in page
    assert page["bytes"] == 2


@pytest.mark.parametrize(
    ("offset", "error"),
    [
        (-1, "offset must be a non-negative integer"),
        (-0.5, "offset must be a non-negative integer"),
        (-1e400, "offset must be a non-negative integer"),
        ("5", "offset must be a number"),
        (True, "offset must be a number"),
        (float("nan"), "offset must be a number, not NaN"),
    ],
)
async def test_a_bad_offset_is_a_clear_error(gateway: Gateway, offset: Any, error: str) -> None:
    await record_texts(gateway, "main", 3)
    result = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": offset}
    )
    assert result == {"status": "error", "tool": "sessions_history", "error": error}


async def test_a_fractional_offset_is_floored(gateway: Gateway) -> None:
    await record_texts(gateway, "main", 3)
    page = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "main", "offset": 1.9, "limit": 1}
    )
    assert texts_of(page) == ["m1"]
    assert page["offset"] == 1


async def test_a_read_by_key_takes_one_trip_to_a_reader_thread(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's row, the access check and the messages in one trip (ADR 0036 §4):
    # each trip is a hand-off to a thread and back, most of a short read's cost.
    await gateway.record_message("agent:main:other", role="user", content="hi")
    trips = count_trips(gateway, monkeypatch)
    history = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": "agent:main:other", "offset": 0}
    )
    assert [m["content"] for m in history["messages"]] == [[{"type": "text", "text": "hi"}]]
    assert history["totalMessages"] == 1
    tail = await gateway.call_tool("main", "sessions_history", {"sessionKey": "agent:main:other"})
    assert tail["messages"] == history["messages"]
    assert len(trips) == 2
