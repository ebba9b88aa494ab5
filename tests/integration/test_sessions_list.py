"""sessions_list: rows from the read model, newest first, filtered, then limited."""

from __future__ import annotations

import pytest
from reader_trips import count_trips
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import VirtualClock

ROW_FIELDS = {
    "key",
    "kind",
    "channel",
    "label",
    "displayName",
    "updatedAt",
    "sessionId",
    "model",
    "contextTokens",
    "totalTokens",
    "thinkingLevel",
    "verboseLevel",
    "systemSent",
    "abortedLastRun",
    "sendPolicy",
    "lastChannel",
    "lastTo",
    "lastAccountId",
    "deliveryContext",
    "transcriptPath",
}


@pytest.fixture
def config() -> GatewayConfig:
    # Written before visibility scopes (decision 28): what every session reached then.
    return GatewayConfig.load(before_scopes())


async def seed_fixture(gateway: Gateway, clock: VirtualClock) -> None:
    """The conformance fixture (§B): main, a discord group, a cron job, global, unknown."""
    await gateway.record_message("main", role="user", content="hello", channel="whatsapp")
    await clock.advance(1)
    await gateway.record_message(
        "discord:group:dev", role="user", content="standup", channel="discord", chat_type="group"
    )
    await clock.advance(1)
    await gateway.record_message("cron:job-1", role="user", content="tick")
    await clock.advance(1)
    await gateway.record_message("global", role="user", content="g")
    await gateway.record_message("unknown", role="user", content="u")
    for key in ("main", "discord:group:dev", "cron:job-1"):
        await gateway.record_message(key, role="toolResult", content="tool output")
        await gateway.record_message(key, role="assistant", content="hi")


async def test_rows_carry_every_field_the_source_document_names(
    gateway: Gateway, clock: VirtualClock
) -> None:
    await seed_fixture(gateway, clock)
    result = await gateway.call_tool("main", "sessions_list", {})
    assert result["count"] == 3
    for row in result["sessions"]:
        assert set(row) == ROW_FIELDS
        assert "messages" not in row


async def test_global_and_unknown_are_never_listed(gateway: Gateway, clock: VirtualClock) -> None:
    await seed_fixture(gateway, clock)
    result = await gateway.call_tool("main", "sessions_list", {"messageLimit": 1})
    keys = [row["key"] for row in result["sessions"]]
    assert "global" not in keys
    assert "unknown" not in keys
    assert len(keys) == 3


async def test_main_row_shows_alias_kind_channel_and_last_message_without_tool_results(
    gateway: Gateway, clock: VirtualClock
) -> None:
    await seed_fixture(gateway, clock)
    result = await gateway.call_tool("main", "sessions_list", {"messageLimit": 1})
    main = next(row for row in result["sessions"] if row["key"] == "main")
    assert main["kind"] == "main"
    assert main["channel"] == "whatsapp"
    assert [m["role"] for m in main["messages"]] == ["assistant"]
    assert main["messages"][0]["content"] == [{"type": "text", "text": "hi"}]


async def test_canonical_keys_classify_on_their_rest(gateway: Gateway, clock: VirtualClock) -> None:
    await seed_fixture(gateway, clock)
    rows = (await gateway.call_tool("main", "sessions_list", {}))["sessions"]
    by_key = {row["key"]: row for row in rows}
    assert by_key["agent:main:cron:job-1"]["kind"] == "cron"
    assert by_key["agent:main:cron:job-1"]["channel"] == "internal"
    assert by_key["agent:main:discord:group:dev"]["kind"] == "group"
    assert by_key["agent:main:discord:group:dev"]["channel"] == "discord"


async def test_kinds_filter(gateway: Gateway, clock: VirtualClock) -> None:
    await seed_fixture(gateway, clock)
    result = await gateway.call_tool("main", "sessions_list", {"kinds": ["cron"]})
    assert [row["kind"] for row in result["sessions"]] == ["cron"]
    everything = await gateway.call_tool("main", "sessions_list", {"kinds": ["bogus"]})
    assert everything["count"] == 3


async def test_newest_first_and_limit_applies_after_filtering(
    gateway: Gateway, clock: VirtualClock
) -> None:
    for index in range(6):
        await gateway.record_message(f"cron:job-{index}", role="user", content="tick")
        await clock.advance(1)
        await gateway.record_message(f"hook:h-{index}", role="user", content="hook")
        await clock.advance(1)
    result = await gateway.call_tool("main", "sessions_list", {"kinds": ["cron"], "limit": 5})
    assert [row["key"] for row in result["sessions"]] == [
        f"agent:main:cron:job-{index}" for index in (5, 4, 3, 2, 1)
    ]


@pytest.mark.parametrize(
    ("limit", "expected"), [(0.5, 1), (-3, 1), (2.9, 2), (10_000, 12), (float("inf"), 12)]
)
async def test_limit_is_floored_and_clamped(
    gateway: Gateway, clock: VirtualClock, limit: float, expected: int
) -> None:
    for index in range(12):
        await gateway.record_message(f"cron:job-{index}", role="user", content="tick")
    result = await gateway.call_tool("main", "sessions_list", {"limit": limit})
    assert result["count"] == expected


async def test_limit_is_capped_at_200(gateway: Gateway) -> None:
    for index in range(205):
        await gateway.record_message(f"cron:job-{index}", role="user", content="tick")
    result = await gateway.call_tool("main", "sessions_list", {"limit": 1000})
    assert result["count"] == 200


async def test_message_limit_is_clamped_to_20(gateway: Gateway) -> None:
    for index in range(25):
        await gateway.record_message("main", role="user", content=f"m{index}")
    result = await gateway.call_tool("main", "sessions_list", {"messageLimit": 50})
    messages = result["sessions"][0]["messages"]
    assert [m["content"][0]["text"] for m in messages] == [f"m{i}" for i in range(5, 25)]


async def test_active_minutes_keeps_recently_updated_sessions(
    gateway: Gateway, clock: VirtualClock
) -> None:
    await gateway.record_message("cron:old", role="user", content="old")
    await clock.advance(15 * 60)
    await gateway.record_message("cron:new", role="user", content="new")
    await clock.advance(60)
    result = await gateway.call_tool("main", "sessions_list", {"activeMinutes": 5})
    assert [row["key"] for row in result["sessions"]] == ["agent:main:cron:new"]


async def test_routing_fields_and_tokens(gateway: Gateway) -> None:
    await gateway.record_message(
        "main", role="user", content="hi", channel="whatsapp", to="+1555", account_id="work"
    )
    await gateway.record_message(
        "main", role="assistant", content="yo", usage={"input": 10, "output": 20}, model="m-1"
    )
    row = (await gateway.call_tool("main", "sessions_list", {}))["sessions"][0]
    assert row["totalTokens"] == 30
    assert row["model"] == "m-1"
    assert row["lastTo"] == "+1555"
    assert row["lastAccountId"] == "work"
    assert row["deliveryContext"] == {"channel": "whatsapp", "to": "+1555", "accountId": "work"}
    assert row["transcriptPath"].endswith(f"#{row['sessionId']}")


async def test_display_name_falls_back_to_label(gateway: Gateway) -> None:
    await gateway.record_message("cron:x", role="user", content="hi", label="nightly")
    await gateway.record_message(
        "discord:group:ops", role="user", content="hi", display_name="#ops", label="ops"
    )
    rows = {r["key"]: r for r in (await gateway.call_tool("main", "sessions_list", {}))["sessions"]}
    assert rows["agent:main:cron:x"]["displayName"] == "nightly"
    assert rows["agent:main:discord:group:ops"]["displayName"] == "#ops"


async def test_other_agents_are_hidden_without_agent_to_agent(gateway: Gateway) -> None:
    await gateway.record_message("agent:main:main", role="user", content="mine")
    await gateway.record_message("agent:other:main", role="user", content="theirs")
    result = await gateway.call_tool("agent:main:main", "sessions_list", {})
    assert result == {"count": 1, "sessions": [result["sessions"][0]]}
    assert result["sessions"][0]["key"] == "main"


@pytest.mark.parametrize(
    ("allow", "visible"),
    [
        ([], {"main", "agent:other:main", "agent:third:main"}),
        (["*"], {"main", "agent:other:main", "agent:third:main"}),
        (["main", "other"], {"main", "agent:other:main"}),
        (["ma*", "oth*"], {"main", "agent:other:main"}),
        (["other"], {"main"}),
    ],
)
async def test_agent_to_agent_allow_list_decides_which_agents_are_listed(
    store_url: str,
    clock: VirtualClock,
    allow: list[str],
    visible: set[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = GatewayConfig.load(
        before_scopes({"tools": {"agentToAgent": {"enabled": True, "allow": allow}}})
    )
    gateway = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        for agent in ("main", "other", "third"):
            await gateway.record_message(f"agent:{agent}:main", role="user", content="x")
        trips = count_trips(gateway, monkeypatch)
        result = await gateway.call_tool("agent:main:main", "sessions_list", {})
        assert {row["key"] for row in result["sessions"]} == visible
        # The agents present (which an allow list needs) are read on the rows' trip to a
        # reader thread (ADR 0036 §4): each trip is a hand-off and back.
        assert len(trips) == 1
    finally:
        await gateway.close()


async def test_global_scope_lists_global_as_main(store_url: str, clock: VirtualClock) -> None:
    config = GatewayConfig.load(before_scopes({"session": {"scope": "global"}}))
    gateway = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        await gateway.record_message("main", role="user", content="hi")
        rows = (await gateway.call_tool("main", "sessions_list", {}))["sessions"]
        assert [(r["key"], r["kind"]) for r in rows] == [("main", "main")]
    finally:
        await gateway.close()


async def test_main_of_another_agent_shows_its_full_key(gateway: Gateway) -> None:
    await gateway.record_message("agent:main:main", role="user", content="x")
    rows = (await gateway.call_tool("agent:main:cron:job", "sessions_list", {}))["sessions"]
    assert [r["key"] for r in rows] == ["main"]


# The filters agents use: label, agentId, search, archived (OpenClaw's) -----------------


async def archive(gateway: Gateway, key: str) -> None:
    from sessionwire.adapters.testkit.internals import internals, store_of

    stored = store_of(gateway).session(key)
    assert stored is not None
    aggregate = stored.to_aggregate()
    aggregate.archive(reason="test", at=internals(gateway).clock.now())
    store_of(gateway).save(aggregate)


async def listed(gateway: Gateway, requester: str = "main", **params: object) -> list[str]:
    result = await gateway.call_tool(requester, "sessions_list", params)
    assert "error" not in result, result
    assert result["count"] == len(result["sessions"])
    return [row["key"] for row in result["sessions"]]


async def seed_labelled(gateway: Gateway, clock: VirtualClock) -> None:
    await gateway.record_message("main", role="user", content="hi", label="home")
    await clock.advance(1)
    await gateway.record_message(
        "discord:group:dev",
        role="user",
        content="standup",
        channel="discord",
        chat_type="group",
        display_name="Dev Room Ünïcode",
        label="team",
    )
    await clock.advance(1)
    await gateway.record_message("cron:nightly", role="user", content="tick", label="Team")
    await clock.advance(1)
    await gateway.record_message("cron:weekly", role="user", content="tick")


async def test_label_is_an_exact_match(gateway: Gateway, clock: VirtualClock) -> None:
    await seed_labelled(gateway, clock)
    assert await listed(gateway, label="team") == ["agent:main:discord:group:dev"]
    assert await listed(gateway, label=" Team ") == ["agent:main:cron:nightly"]
    assert await listed(gateway, label="tea") == []
    # With the other filters, and the limit after them all.
    assert await listed(gateway, label="team", kinds=["cron"]) == []
    assert await listed(gateway, label="home") == ["main"]


async def test_search_matches_key_session_id_label_and_display_name_in_any_case(
    gateway: Gateway, clock: VirtualClock
) -> None:
    await seed_labelled(gateway, clock)
    every = await gateway.call_tool("main", "sessions_list", {})
    session_id = {row["key"]: row["sessionId"] for row in every["sessions"]}[
        "agent:main:cron:weekly"
    ]
    assert await listed(gateway, search="CRON") == [
        "agent:main:cron:weekly",
        "agent:main:cron:nightly",
    ]
    assert await listed(gateway, search="team") == [
        "agent:main:cron:nightly",
        "agent:main:discord:group:dev",
    ]
    assert await listed(gateway, search="room üNÏ") == ["agent:main:discord:group:dev"]
    assert await listed(gateway, search=session_id[:13].upper()) == ["agent:main:cron:weekly"]
    assert await listed(gateway, search="cron", limit=1) == ["agent:main:cron:weekly"]
    assert await listed(gateway, search="nothing like it") == []
    assert await listed(gateway, search="   ") == await listed(gateway)  # empty: no filter


async def test_agent_id_lists_that_agents_sessions_if_visible(
    store_url: str, clock: VirtualClock
) -> None:
    config = GatewayConfig.load(
        before_scopes({"tools": {"agentToAgent": {"enabled": True, "allow": ["main", "ops"]}}})
    )
    gateway = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        for agent in ("main", "ops", "hidden"):
            await gateway.record_message(f"agent:{agent}:main", role="user", content="x")
            await gateway.record_message(f"agent:{agent}:cron:job", role="user", content="x")
        assert await listed(gateway, agentId="OPS") == ["agent:ops:cron:job", "agent:ops:main"]
        assert await listed(gateway, agentId="ops", search="cron") == ["agent:ops:cron:job"]
        assert await listed(gateway, agentId="hidden") == []  # not the requester's to see
        assert await listed(gateway, agentId="nobody") == []
    finally:
        await gateway.close()


async def test_archived_lists_archived_sessions_instead(
    gateway: Gateway, clock: VirtualClock
) -> None:
    await seed_labelled(gateway, clock)
    await archive(gateway, "agent:main:cron:nightly")
    await archive(gateway, "agent:main:discord:group:dev")
    assert await listed(gateway) == ["agent:main:cron:weekly", "main"]
    assert await listed(gateway, archived=True) == [
        "agent:main:cron:nightly",
        "agent:main:discord:group:dev",
    ]
    assert await listed(gateway, archived=True, label="team") == ["agent:main:discord:group:dev"]
    assert await listed(gateway, archived=True, kinds=["cron"]) == ["agent:main:cron:nightly"]
    assert await listed(gateway, archived=False, label="team") == []
    result = await gateway.call_tool("main", "sessions_list", {"archived": "yes"})
    assert result == {
        "status": "error",
        "tool": "sessions_list",
        "error": "archived must be true or false",
    }


async def test_a_filtered_walk_pages_through_many_sessions(
    gateway: Gateway, clock: VirtualClock
) -> None:
    # More sessions than one page of the walk: the matches past the first page are found,
    # newest first, and the activity window ends the walk.
    for n in range(450):
        await gateway.record_message(f"cron:job-{n:03d}", role="user", content="x")
        await clock.advance(1)
    found = await listed(gateway, search="job-00", limit=200)
    assert found == [f"agent:main:cron:job-{n:03d}" for n in range(9, -1, -1)]
    recent = await listed(gateway, search="job", activeMinutes=2, limit=200)
    assert len(recent) == 120
    assert recent[0] == "agent:main:cron:job-449"
