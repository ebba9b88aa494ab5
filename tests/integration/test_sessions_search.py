"""``sessions_search`` (decision 35) on every store: words found in the transcripts the
caller may list, newest first, redacted as history is, tool results only when asked;
what the caller may not list never shows, never counts and never sets ``truncated``;
bad input refused with the reason; the indexes built for stores made before them."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from mcp import Client
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.mcp.server import build_server
from sessionwire.testing import ScriptedRuntime, VirtualClock

AWS = "AKIAIOSFODNN7EXAMPLE"


async def opened(store_url: str, config: dict[str, Any]) -> Gateway:
    return await Gateway.open(
        config=GatewayConfig.load(config),
        store=store_url,
        clock=VirtualClock(),
        runtime=ScriptedRuntime.from_dict({"rules": [{"reply": "the needle report"}]}),
    )


@pytest.fixture
async def gateway(store_url: str) -> AsyncIterator[Gateway]:
    gw = await opened(store_url, before_scopes())
    yield gw
    await gw.close()


async def search(gw: Gateway, requester: str = "main", **params: Any) -> dict[str, Any]:
    answer: dict[str, Any] = await gw.call_tool(requester, "sessions_search", params)
    return answer


def found(answer: dict[str, Any]) -> list[tuple[str, int, str, str]]:
    return [
        (hit["sessionKey"], hit["messageIndex"], hit["role"], hit["snippet"])
        for hit in answer["results"]
    ]


async def test_finds_every_word_in_any_case_newest_first(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="Where is the Blue-Harbour file?")
    await gateway.record_message("main", role="assistant", content="blue skies only")
    await gateway.record_message(
        "discord:group:ops", role="user", content="the harbour: BLUE, on shelf 3.14"
    )

    answer = await search(gateway, query="harbour blue")
    assert found(answer) == [
        ("agent:main:discord:group:ops", 0, "user", "the harbour: BLUE, on shelf 3.14"),
        ("main", 0, "user", "Where is the Blue-Harbour file?"),
    ]
    assert answer["truncated"] is False
    assert all(isinstance(hit["timestamp"], int) for hit in answer["results"])
    # Words, not pieces of words; digits are words too.
    assert found(await search(gateway, query="harb")) == []
    assert [hit["sessionKey"] for hit in (await search(gateway, query="14"))["results"]] == [
        "agent:main:discord:group:ops"
    ]
    # The index in the session's transcript, as sessions_history counts messages.
    assert found(await search(gateway, query="skies")) == [
        ("main", 1, "assistant", "blue skies only")
    ]


async def test_the_answer_is_the_documented_model_field_for_field(gateway: Gateway) -> None:
    # The tool answers plain rows (a read builds no model, as list and history do); the
    # documented model, which the JSON Schema comes from, reads them back unchanged.
    from sessionwire.application.tools.read_result_models import SessionsSearchResult

    await gateway.record_message("main", role="user", content="the harbour is blue")
    answer = await search(gateway, query="harbour")
    assert SessionsSearchResult.model_validate(answer).to_json_dict() == answer
    assert list(answer["results"][0]) == list(
        SessionsSearchResult.model_fields["results"].annotation.__args__[0].model_fields  # type: ignore[union-attr]
    )


async def test_limit_and_truncated(gateway: Gateway) -> None:
    for n in range(5):
        await gateway.record_message(f"webchat:dm:u{n}", role="user", content=f"needle {n}")
    answer = await search(gateway, query="needle", limit=2)
    assert [hit["snippet"] for hit in answer["results"]] == ["needle 4", "needle 3"]
    assert answer["truncated"] is True
    assert (await search(gateway, query="needle", limit=5))["truncated"] is False


async def test_a_long_message_shows_a_snippet_around_the_word(gateway: Gateway) -> None:
    text = "filler " * 200 + "the needle is here " + "tail " * 200
    await gateway.record_message("main", role="user", content=text)
    (hit,) = (await search(gateway, query="needle"))["results"]
    assert "the needle is here" in hit["snippet"]
    assert hit["snippet"].startswith("…")
    assert hit["snippet"].endswith("…")
    assert len(hit["snippet"]) <= 170


async def test_a_batch_of_messages_is_searched_message_by_message(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="first")
    await gateway.record_many(
        "main",
        [
            {"role": "user", "content": "alpha needle"},
            {"role": "assistant", "content": "beta"},
            {"role": "user", "content": "gamma needle"},
        ],
    )
    assert found(await search(gateway, query="needle")) == [
        ("main", 3, "user", "gamma needle"),
        ("main", 1, "user", "alpha needle"),
    ]


async def test_tool_results_only_with_include_tools(gateway: Gateway) -> None:
    await gateway.record_message("main", role="toolResult", content="grep found the needle")
    await gateway.record_message("main", role="assistant", content="a needle, said the tool")
    assert [hit["role"] for hit in (await search(gateway, query="needle"))["results"]] == [
        "assistant"
    ]
    with_tools = await search(gateway, query="needle", includeTools=True)
    assert [hit["role"] for hit in with_tools["results"]] == ["assistant", "toolResult"]


async def test_another_sessions_secrets_are_masked_and_not_findable(gateway: Gateway) -> None:
    await gateway.record_message("discord:group:ops", role="user", content=f"deploy key {AWS}")
    await gateway.record_message("main", role="user", content=f"my deploy key {AWS}")

    answer = await search(gateway, query="deploy key")
    snippets = {hit["sessionKey"]: hit["snippet"] for hit in answer["results"]}
    assert snippets["agent:main:discord:group:ops"] == "deploy key [redacted:aws-access-key]"
    assert snippets["main"] == f"my deploy key {AWS}"  # its own, as stored
    # The secret itself finds only the caller's own message.
    assert [hit["sessionKey"] for hit in (await search(gateway, query=AWS))["results"]] == ["main"]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({}, "query required"),
        ({"query": "   "}, "query required"),
        ({"query": "?!"}, "query has no words to search for (letters or digits)"),
        ({"query": "w" * 513}, "query is too long (513 characters, max 512)"),
        (
            {"query": " ".join(f"w{n}" for n in range(17))},
            "query has too many words (17, max 16)",
        ),
        ({"query": 5}, "query must be a string"),
        ({"query": "x", "includeTools": "yes"}, "includeTools must be true or false"),
        ({"query": "x", "kinds": 3}, "kinds must be a list of strings"),
        ({"query": "x", "limit": "many"}, "limit must be a number"),
        ({"query": "x", "offset": 1}, "unknown parameter 'offset'"),
    ],
)
async def test_bad_input_is_refused_with_the_reason(
    gateway: Gateway, params: dict[str, Any], error: str
) -> None:
    answer = await gateway.call_tool("main", "sessions_search", params)
    assert answer["status"] == "error"
    assert answer["error"].startswith(error)


async def test_the_limit_is_clamped(gateway: Gateway) -> None:
    for n in range(3):
        await gateway.record_message("main", role="user", content=f"needle {n}")
    assert len((await search(gateway, query="needle", limit=0))["results"]) == 1
    assert len((await search(gateway, query="needle", limit=10**9))["results"]) == 3


async def test_kinds_and_session_key_narrow_it(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="needle main")
    await gateway.record_message("discord:group:ops", role="user", content="needle group")
    groups = await search(gateway, query="needle", kinds=["group"])
    assert [hit["snippet"] for hit in groups["results"]] == ["needle group"]
    one = await search(gateway, query="needle", sessionKey="main")
    assert [hit["snippet"] for hit in one["results"]] == ["needle main"]
    missing = await search(gateway, query="needle", sessionKey="webchat:dm:nobody")
    assert missing["status"] == "error"


async def world(store_url: str, config: dict[str, Any]) -> Gateway:
    """Sessions of two agents, a group, and a session main spawned, each saying
    'needle' (the hidden ones several times)."""
    gw = await opened(store_url, config)
    await gw.record_message("main", role="user", content="needle in main")
    spawned = await gw.call_tool("main", "sessions_spawn", {"task": "find the needle"})
    assert spawned["status"] == "accepted", spawned
    await gw.wait_idle()
    for n in range(3):
        await gw.record_message("discord:group:ops", role="user", content=f"needle ops {n}")
        await gw.record_message("agent:research:main", role="user", content=f"needle r {n}")
    return gw


SCOPES = {
    "self": before_scopes(visibility="self"),
    "tree": before_scopes(visibility="tree"),
    "agent": before_scopes(visibility="agent"),
    "all": before_scopes(visibility="all"),
    "all+a2a": before_scopes({"tools": {"agentToAgent": {"enabled": True}}}),
    "sandboxed": {
        **before_scopes(visibility="all"),
        "agents": {"defaults": {"sandbox": {"mode": "all", "sessionToolsVisibility": "spawned"}}},
    },
}


@pytest.mark.parametrize("scope", sorted(SCOPES))
async def test_search_shows_exactly_what_sessions_list_lists(store_url: str, scope: str) -> None:
    gw = await world(store_url, SCOPES[scope])
    try:
        for requester in ("main", "discord:group:ops"):
            listed = await gw.call_tool(requester, "sessions_list", {"limit": 200})
            keys = {row["key"] for row in listed["sessions"]}
            answer = await search(gw, requester, query="needle", limit=100)
            shown = {hit["sessionKey"] for hit in answer["results"]}
            # Every listed session said 'needle' (the spawned child's task too).
            assert shown == keys, (requester, listed)
            assert answer["truncated"] is False
            # A limit the visible matches fit is not truncated, whatever is hidden.
            visible = len(answer["results"])
            fitted = await search(gw, requester, query="needle", limit=visible)
            assert fitted["truncated"] is False
            assert len(fitted["results"]) == visible
    finally:
        await gw.close()


async def test_under_self_the_hidden_never_show_nor_count(store_url: str) -> None:
    gw = await world(store_url, SCOPES["self"])
    try:
        answer = await search(gw, "discord:group:ops", query="needle", limit=3)
        assert [hit["snippet"] for hit in answer["results"]] == [
            "needle ops 2",
            "needle ops 1",
            "needle ops 0",
        ]
        assert answer["truncated"] is False
        hidden = await search(gw, "discord:group:ops", query="needle", sessionKey="main")
        missing = await search(
            gw, "discord:group:ops", query="needle", sessionKey="webchat:dm:nobody"
        )
        assert hidden["status"] == missing["status"] == "forbidden"
        assert (
            hidden["error"]
            == missing["error"]
            == ("Session not found, or not visible under tools.sessions.visibility=self.")
        )
    finally:
        await gw.close()


async def test_over_http_and_mcp(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="needle over the wire")
    token = "main-token-0123456789abcdefghijklmnopqrstu"
    tokens = TokenSet.from_data({"tokens": [{"token": token, "session": "main"}]})
    transport = httpx.ASGITransport(app=create_app(gateway, tokens))
    headers = {"Authorization": f"Bearer {token}", "X-Sessionwire-Session": "main"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        answer = await http.post(
            "/v1/tools/sessions_search", json={"query": "needle"}, headers=headers
        )
        bad = await http.post("/v1/tools/sessions_search", json={"query": ""}, headers=headers)
    assert answer.status_code == 200
    assert [hit["snippet"] for hit in answer.json()["results"]] == ["needle over the wire"]
    assert bad.json()["error"] == "query required"
    async with Client(build_server(gateway, "main")) as client:
        called = await client.call_tool("sessions_search", {"query": "wire needle"})
    assert called.structured_content is not None
    assert [hit["snippet"] for hit in called.structured_content["results"]] == [
        "needle over the wire"
    ]


async def test_a_store_made_before_the_index_is_indexed_when_opened(store_url: str) -> None:
    gw = await opened(store_url, before_scopes())
    await gw.record_message("main", role="user", content="an old needle")
    await gw.close()
    if store_url == "memory":
        pytest.skip("a memory store is new at every open")
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite://")) as db:
            db.execute("DROP TRIGGER sw_search_index")
            db.execute("DROP TABLE sw_search")
            db.execute("DELETE FROM sw_format WHERE name = 'search'")
    else:
        schema = dict(
            part.split("=") for part in store_url.partition("?")[2].split("&") if part
        ).get("schema", "public")
        with psycopg.connect(store_url.partition("?")[0], autocommit=True) as db:
            db.execute(f'DROP FUNCTION "{schema}".sw_search_text CASCADE')
    gw = await opened(store_url, before_scopes())
    try:
        await gw.record_message("main", role="user", content="a new needle")
        answer = await search(gw, query="needle")
        assert [hit["snippet"] for hit in answer["results"]] == ["a new needle", "an old needle"]
    finally:
        await gw.close()


async def test_a_message_holding_a_nul_is_recorded_and_found(gateway: Gateway) -> None:
    # JSON's \u0000: PostgreSQL's jsonb refuses it and SQLite's text ends at it; the
    # index reads it as a space, and never fails the append (it failed on PostgreSQL).
    await gateway.record_message("main", role="user", content="alpha\x00beta gamma")
    for word in ("alpha", "beta", "gamma"):
        answer = await search(gateway, query=word)
        assert [hit["snippet"] for hit in answer["results"]] == ["alpha\x00beta gamma"], word


async def test_rows_held_back_and_indexed_rows_answer_as_one(gateway: Gateway) -> None:
    # SQLite's index takes message rows in 64 at a time; the newest wait beside it. A
    # search spans both, in order, and pages across them (150 rows: two flushes, 22 held).
    for n in range(150):
        word = "needle" if n % 3 == 0 else "hay"
        await gateway.record_message(f"webchat:dm:u{n % 7}", role="user", content=f"{word} {n}")
    wanted = [f"needle {n}" for n in reversed(range(0, 150, 3))]
    answer = await search(gateway, query="needle", limit=100)
    assert [hit["snippet"] for hit in answer["results"]] == wanted
    assert answer["truncated"] is False
    first = await search(gateway, query="needle", limit=30)
    assert [hit["snippet"] for hit in first["results"]] == wanted[:30]
    assert first["truncated"] is True
    assert found(await search(gateway, query="needle 3")) == [
        ("agent:main:webchat:dm:u3", 0, "user", "needle 3")
    ]
