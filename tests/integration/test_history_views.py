"""History views rendered when messages are written (ADR 0054): what ``sessions_history``
answers from the stored views is what rendering the stored lines on read answers, for the
session's own reader and another session's, under a config that masks otherwise too."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from postgres_server import ON_CITUS, POSTGRES_URL
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.application import context as tool_context
from sessionwire.application.context import ToolContext
from sessionwire.testing import VirtualClock

OTHER = "agent:main:discord:group:ops"

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "[WhatsApp +1555 2026-01-01 10:00] hi there\n[message_id: a1]"},
    {"role": "assistant", "content": "the key is AKIAIOSFODNN7EXAMPLE, keep it"},
    {"role": "user", "content": "[w2-big#3] not an envelope, and no secret"},
    {"role": "toolResult", "content": "tool output with password=hunter2hunter2"},
    {"role": "assistant", "content": 'quote " and backslash \\ and é☃ \u2028 text'},
    {"role": "user", "content": "plain words only"},
    {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"n": 2**70}}],
    },
    {"role": "assistant", "content": "a float 1e-07 stays 1e-07", "usage": {"cost": 0.1}},
]
READS: list[dict[str, Any]] = [
    {},
    {"includeTools": True},
    {"limit": 3},
    {"offset": 0, "limit": 3},
    {"offset": 2, "limit": 2, "includeTools": True},
    {"offset": 6, "limit": 5},
]


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig.load(before_scopes())


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A store of its own that a test opens and reopens (under other configs)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/views.db"
    return str(request.getfixturevalue("postgres_url"))


def run_sql(store: str, *statements: str) -> None:
    """``statements`` run on ``store``'s tables directly (as another program would)."""
    if store.startswith("sqlite:///"):
        with sqlite3.connect(store.removeprefix("sqlite:///")) as connection:
            for statement in statements:
                connection.execute(statement)
        return
    schema = parse_qs(urlsplit(store).query)["schema"][0]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'SET search_path TO "{schema}"')
        for statement in statements:
            connection.execute(statement)


async def record(gateway: Gateway, key: str, messages: list[dict[str, Any]]) -> None:
    for message in messages:
        extra = {"usage": message["usage"]} if "usage" in message else {}
        await gateway.record_message(
            key, role=message["role"], content=message["content"], channel="discord", **extra
        )


async def rendered_on_read(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, requester: str, params: dict[str, Any]
) -> dict[str, Any]:
    """The answer with the views left aside: each stored line rendered on read."""
    with monkeypatch.context() as patched:
        patched.setattr(ToolContext, "view_wanted", lambda self, key, max_bytes: None)
        return await gateway.call_tool(requester, "sessions_history", params)


def keeps_views(store: str) -> bool:
    """Whether ``store`` keeps the views: all stores but Citus, whose saves are statements
    routed to a shard, not the save function that writes them (ADR 0054 amended, §4)."""
    return not (ON_CITUS and store.startswith("postgresql"))


def no_rendering_on_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any) -> Any:
        raise AssertionError("a line was rendered on read")

    monkeypatch.setattr(tool_context, "history_view", refused)


@contextmanager
def read_from_views(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Reads within that come from the stored views (a line rendered on read fails them);
    on Citus, which keeps no views (ADR 0054 amended, §4), each of them renders its lines
    instead: the list counts those renderings, and no views table or span column is in
    the schema after them."""
    rendered: list[int] = []
    with monkeypatch.context() as patched:
        if keeps_views(store):
            no_rendering_on_read(patched)
        else:
            original = tool_context.history_view
            patched.setattr(
                tool_context, "history_view", lambda *args: rendered.append(1) or original(*args)
            )
        yield rendered
    if not keeps_views(store):
        assert rendered, "Citus renders the lines on read"
        assert stored_views(store) == set()


def stored_views(store: str) -> set[str]:
    """The views table and the session rows' span columns in ``store``'s schema."""
    schema = parse_qs(urlsplit(store).query)["schema"][0]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        found = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'sw_history_views' UNION ALL SELECT column_name "
            "FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'sw_sessions' AND column_name LIKE 'view%%'",
            (schema, schema),
        ).fetchall()
    return {str(row[0]) for row in found}


@pytest.mark.parametrize("requester", ["main", OTHER])
async def test_the_views_answer_what_rendering_on_read_answers(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, requester: str
) -> None:
    await record(gateway, OTHER, MESSAGES)
    for read in READS:
        params = {"sessionKey": OTHER, **read}
        expected = await rendered_on_read(gateway, monkeypatch, requester, params)
        assert await gateway.call_tool(requester, "sessions_history", params) == expected
    masked = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
    assert masked["contentRedacted"] is True
    assert "AKIAIOSFODNN7EXAMPLE" not in str(masked)


async def test_a_read_concatenates_the_stored_views(
    gateway: Gateway, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await record(gateway, OTHER, MESSAGES)
    expected = {
        requester: await rendered_on_read(
            gateway, monkeypatch, requester, {"sessionKey": OTHER, "offset": 0}
        )
        for requester in ("main", OTHER)
    }
    with read_from_views(store_url, monkeypatch):
        for requester, answer in expected.items():
            params = {"sessionKey": OTHER, "offset": 0}
            assert await gateway.call_tool(requester, "sessions_history", params) == answer
    assert expected["main"]["contentRedacted"] is True
    assert expected[OTHER]["contentRedacted"] is False
    assert expected["main"]["messages"][0]["content"][0]["text"] == "hi there"


async def test_views_rendered_under_other_patterns_are_rendered_again(
    store: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = GatewayConfig.load(before_scopes())
    gateway = await Gateway.open(config=plain, store=store, clock=clock)
    await gateway.record_message(OTHER, role="user", content="my pin is swordfish-4711 ok")
    answer = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
    assert answer["messages"][0]["content"][0]["text"] == "my pin is swordfish-4711 ok"
    await gateway.close()
    masking = GatewayConfig.load({**before_scopes(), "redaction": {"patterns": [r"swordfish-\d+"]}})
    gateway = await Gateway.open(config=masking, store=store, clock=clock)
    try:
        answer = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
        assert answer["messages"][0]["content"][0]["text"] == "my pin is [redacted:configured] ok"
        assert answer["contentRedacted"] is True
        own = await gateway.call_tool(OTHER, "sessions_history", {"sessionKey": OTHER})
        assert own["messages"][0]["content"][0]["text"] == "my pin is swordfish-4711 ok"
        # Written under these patterns, the next one is masked from its stored view.
        await gateway.record_message(OTHER, role="user", content="and swordfish-1 too")
        last = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
        assert [m["content"][0]["text"] for m in last["messages"]] == [
            "my pin is [redacted:configured] ok",
            "and [redacted:configured] too",
        ]
        with read_from_views(store, monkeypatch):
            newest = await gateway.call_tool(
                "main", "sessions_history", {"sessionKey": OTHER, "limit": 1}
            )
        assert newest["messages"] == last["messages"][-1:]
        assert newest["contentRedacted"] is True
    finally:
        await gateway.close()
    # Back under the first config: the masked views are not its, the lines are shown.
    gateway = await Gateway.open(config=plain, store=store, clock=clock)
    try:
        answer = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
        assert [m["content"][0]["text"] for m in answer["messages"]] == [
            "my pin is swordfish-4711 ok",
            "and swordfish-1 too",
        ]
        assert answer["contentRedacted"] is False
    finally:
        await gateway.close()


async def test_messages_written_before_the_views_are_rendered_on_read(
    store: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = GatewayConfig.load(before_scopes())
    gateway = await Gateway.open(config=config, store=store, clock=clock)
    await record(gateway, OTHER, MESSAGES)
    expected = await rendered_on_read(gateway, monkeypatch, "main", {"sessionKey": OTHER})
    await gateway.close()
    # As a store written before the views left it: no views, no span of them (a
    # PostgreSQL schema: not the table, the columns, nor the save function that writes
    # them, which the store adds when it opens it).
    if store.startswith("sqlite"):
        run_sql(
            store,
            "DELETE FROM sw_history_views",
            "UPDATE sw_sessions SET view_stamp = NULL, view_since = NULL",
        )
    elif not keeps_views(store):
        # Citus keeps none to drop (ADR 0054 amended, §4), nor adds them when it opens.
        assert stored_views(store) == set()
    else:
        run_sql(
            store,
            "DROP TABLE sw_history_views",
            "ALTER TABLE sw_sessions DROP COLUMN view_stamp, DROP COLUMN view_since, "
            "DROP COLUMN view_upto",
            "UPDATE sw_format SET value = 1 WHERE name = 'functions'",
        )
    gateway = await Gateway.open(config=config, store=store, clock=clock)
    try:
        assert await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER}) == (
            expected
        )
        await gateway.record_message(OTHER, role="user", content="new [message_id: x]")
        tail = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
        assert tail["messages"][:-1] == expected["messages"]
        # A window of messages written since: from their views.
        with read_from_views(store, monkeypatch):
            newest = await gateway.call_tool(
                "main", "sessions_history", {"sessionKey": OTHER, "limit": 1}
            )
        assert newest["messages"] == tail["messages"][-1:]
    finally:
        await gateway.close()


async def test_a_message_written_without_views_breaks_the_span(
    store: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An older sessionwire on the same store (a rolled-back deploy) writes its messages
    # and moves the session row's version, but keeps no views: none may be trusted then.
    # On PostgreSQL it calls the newer save function, with no views and no span.
    from sessionwire.adapters.store.read_models import SqlReadModel

    config = GatewayConfig.load(before_scopes())
    gateway = await Gateway.open(config=config, store=store, clock=clock)
    try:
        await gateway.record_message(OTHER, role="user", content="nothing to hide")
        with monkeypatch.context() as older:
            older.setattr(SqlReadModel, "_write_views", lambda self, cursor, stored: {})
            older.setattr(SqlReadModel, "_views_set", lambda self, row, since: ("", ()))
            older.setattr(SqlReadModel, "narrow_views", lambda self, row, stored: {})
            await gateway.record_message(OTHER, role="user", content="AKIAIOSFODNN7EXAMPLE")
        answer = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
        assert answer["messages"][1]["content"][0]["text"] == "[redacted:aws-access-key]"
        assert answer["contentRedacted"] is True
        # The next message written with its views starts the span again at itself.
        await gateway.record_message(OTHER, role="assistant", content="ok")
        rendered = []
        original = tool_context.history_view
        monkeypatch.setattr(
            tool_context, "history_view", lambda *args: rendered.append(1) or original(*args)
        )
        params = {"sessionKey": OTHER, "limit": 1}
        newest = await gateway.call_tool("main", "sessions_history", params)
        assert newest["messages"][0]["content"][0]["text"] == "ok"
        # Citus keeps no views (ADR 0054 amended, §4): each read renders its lines.
        views = keeps_views(store)
        assert rendered == ([] if views else [1])
        again = await gateway.call_tool("main", "sessions_history", {"sessionKey": OTHER})
        assert again["messages"] == [*answer["messages"], *newest["messages"]]
        assert rendered == ([1] if views else [1, 1])
    finally:
        await gateway.close()


async def test_a_batch_into_a_session_is_read_from_its_views(
    gateway: Gateway, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session that exists: the batch's save updates its row (PostgreSQL: one call of
    # the save function with every event, ``sw_append_many``).
    await gateway.record_message(OTHER, role="user", content="first", channel="discord")
    await gateway.record_many(OTHER, MESSAGES, channel="discord")
    expected = {
        requester: await rendered_on_read(
            gateway, monkeypatch, requester, {"sessionKey": OTHER, "includeTools": True}
        )
        for requester in ("main", OTHER)
    }
    with read_from_views(store_url, monkeypatch):
        for requester, answer in expected.items():
            params = {"sessionKey": OTHER, "includeTools": True}
            assert await gateway.call_tool(requester, "sessions_history", params) == answer
    assert len(expected["main"]["messages"]) == 1 + len(MESSAGES)
    assert expected["main"]["contentRedacted"] is True
