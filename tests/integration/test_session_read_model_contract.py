"""The SessionReadModel port's contract, on every store: rows and transcripts follow the
events saved, lookups see active sessions only, listing filters then limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from sessionwire.application.ports.session_read_model import (
    SessionListing,
    SessionPage,
    SessionQuery,
    StoredSession,
    TranscriptWindow,
)
from sessionwire.application.ports.store import Store
from sessionwire.domain.session import MessageOrigin, Session, session_uuid, to_millis
from sessionwire.domain.transcript import Role, TranscriptMessage, Usage

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _message(text: str, role: Role = "user") -> TranscriptMessage:
    return TranscriptMessage(role=role, content=[{"type": "text", "text": text}], timestamp=0)


def _save(
    store: Store,
    key: str,
    *,
    at: datetime = NOW,
    label: str | None = None,
    spawned_by: str | None = None,
) -> Session:
    agent = key.split(":")[1]
    session = Session.open(
        key=key, session_id=uuid4(), agent_id=agent, at=at, spawned_by=spawned_by
    )
    if label is not None:
        session.patch({"label": label}, at=at)
    store.save(session)
    return session


def test_a_row_follows_the_sessions_events(event_store: Store) -> None:
    assert event_store.session("agent:main:a") is None
    session = _save(event_store, "agent:main:a", label="first")
    session.append_message(_message("hello"), at=NOW + timedelta(seconds=1))
    event_store.save(session)
    stored = event_store.session("agent:main:a")
    assert stored is not None
    assert stored.id == session_uuid("agent:main:a")
    assert stored.version == session.version
    assert stored.state == session.state
    assert stored.to_aggregate().state == session.state
    assert event_store.session_for_update("agent:main:a") == stored


def test_closed_sessions_keep_their_row_but_leave_the_lookups(event_store: Store) -> None:
    session = _save(event_store, "agent:main:a", label="team")
    _save(event_store, "agent:main:b")
    assert [s.state.key for s in event_store.sessions_by_label("team")] == ["agent:main:a"]
    by_id = event_store.sessions_by_session_id(session.state.session_id)
    assert [s.state.key for s in by_id] == ["agent:main:a"]

    session.archive(reason="done", at=NOW)
    event_store.save(session)
    assert event_store.sessions_by_label("team") == []
    assert event_store.sessions_by_session_id(session.state.session_id) == []
    stored = event_store.session("agent:main:a")
    assert stored is not None
    assert stored.state.status == "archived"


def test_listing_is_newest_first_filtered_then_limited(event_store: Store) -> None:
    for minute, key in enumerate(["agent:main:a", "agent:ops:b", "agent:main:c", "agent:main:d"]):
        _save(event_store, key, at=NOW + timedelta(minutes=minute))
    _save(event_store, "agent:main:subagent:x", at=NOW, spawned_by="agent:main:a")

    def keys(query: SessionQuery) -> list[str]:
        return [s.state.key for s in event_store.list_sessions(query)]

    assert keys(SessionQuery(limit=2)) == ["agent:main:d", "agent:main:c"]
    assert keys(SessionQuery(limit=10, agent_ids=frozenset({"ops"}))) == ["agent:ops:b"]
    assert keys(SessionQuery(limit=10, agent_ids=frozenset())) == []
    excluded = frozenset({"agent:main:d", "agent:main:subagent:x"})
    assert keys(SessionQuery(limit=10, exclude_keys=excluded)) == [
        "agent:main:c",
        "agent:ops:b",
        "agent:main:a",
    ]
    since = to_millis(NOW + timedelta(minutes=2))
    assert keys(SessionQuery(limit=10, updated_since_ms=since)) == ["agent:main:d", "agent:main:c"]
    assert keys(SessionQuery(limit=10, spawned_by="agent:main:a")) == ["agent:main:subagent:x"]
    newest_of_main = SessionQuery(limit=1, agent_ids=frozenset({"main"}), updated_since_ms=since)
    assert keys(newest_of_main) == ["agent:main:d"]
    # Only the named sessions (a visibility scope's spawn tree), with the other filters.
    tree = frozenset({"agent:main:a", "agent:main:subagent:x", "agent:ops:b", "agent:main:none"})
    assert keys(SessionQuery(limit=10, keys=tree)) == [
        "agent:ops:b",
        "agent:main:a",
        "agent:main:subagent:x",
    ]
    assert keys(SessionQuery(limit=10, keys=tree, agent_ids=frozenset({"main"}))) == [
        "agent:main:a",
        "agent:main:subagent:x",
    ]
    assert keys(SessionQuery(limit=10, keys=frozenset())) == []
    spawners = frozenset({"agent:main:a", "agent:main:nobody"})
    assert keys(SessionQuery(limit=10, spawned_by_any=spawners)) == ["agent:main:subagent:x"]


def test_a_nested_spawn_keeps_its_lineage(event_store: Store) -> None:
    child = Session.open(
        key="agent:main:subagent:grandkid",
        session_id=uuid4(),
        agent_id="main",
        at=NOW,
        spawned_by="agent:main:subagent:kid",
        lineage=("agent:main:main",),
    )
    event_store.save(child)
    stored = event_store.session("agent:main:subagent:grandkid")
    assert stored is not None
    assert stored.state.spawn_ancestors() == ("agent:main:subagent:kid", "agent:main:main")
    replayed = list(event_store.stream(stored.id))
    assert replayed[0].lineage == ("agent:main:main",)  # type: ignore[attr-defined]


def test_agent_ids_are_those_with_active_sessions(event_store: Store) -> None:
    _save(event_store, "agent:ops:a")
    _save(event_store, "agent:main:b")
    gone = _save(event_store, "agent:zed:c")
    gone.delete(reason="cleanup", at=NOW)
    event_store.save(gone)
    assert event_store.agent_ids() == ["main", "ops"]


def test_a_transcript_is_the_last_messages_oldest_first(event_store: Store) -> None:
    session = _save(event_store, "agent:main:a")
    for n in range(5):
        session.append_message(_message(f"m{n}"), at=NOW)
    session.append_message(_message("tool output", role="toolResult"), at=NOW)
    event_store.save(session)

    def texts(limit: int, *, include_tools: bool) -> list[str]:
        found = event_store.transcript(session.id, limit=limit, include_tools=include_tools)
        return [TranscriptMessage.model_validate_json(text).text() for text in found]

    assert texts(3, include_tools=True) == ["m3", "m4", "tool output"]
    assert texts(3, include_tools=False) == ["m2", "m3", "m4"]
    assert texts(100, include_tools=False) == [f"m{n}" for n in range(5)]
    assert event_store.transcript(uuid4(), limit=5, include_tools=True) == []


def test_a_transcript_page_counts_back_from_the_newest_message(event_store: Store) -> None:
    session = _save(event_store, "agent:main:a")
    for n in range(1205):
        session.append_message(_message(f"m{n}"), at=NOW)
        if n % 100 == 0:
            session.append_message(_message(f"tool {n}", role="toolResult"), at=NOW)
    event_store.save(session)

    def page(offset: int, limit: int, *, include_tools: bool = False) -> tuple[list[str], int]:
        found = event_store.transcript_page(
            session.id, offset=offset, limit=limit, include_tools=include_tools
        )
        texts = [TranscriptMessage.model_validate_json(text).text() for text in found.messages]
        return texts, found.total

    assert page(0, 3) == (["m1202", "m1203", "m1204"], 1205)
    assert page(3, 2) == (["m1200", "m1201"], 1205)
    # With tool results the view is larger, and the offsets count them.
    assert page(0, 3, include_tools=True) == (["m1202", "m1203", "m1204"], 1218)
    assert page(4, 2, include_tools=True) == (["m1200", "tool 1200"], 1218)
    # The last window holds what is left; past the end, however far, none.
    assert page(1200, 10) == ([f"m{n}" for n in range(5)], 1205)
    assert page(1205, 10) == ([], 1205)
    assert page(2**70, 10) == ([], 1205)
    # Paging back by the page's own length reaches the first message, once each.
    seen: list[str] = []
    offset = 0
    while True:
        texts, _ = page(offset, 1000)
        if not texts:
            break
        seen = texts + seen
        offset += len(texts)
    assert seen == [f"m{n}" for n in range(1205)]
    assert (
        event_store.transcript_page(uuid4(), offset=0, limit=5, include_tools=True).messages == []
    )


def test_a_session_and_its_transcript_are_read_together_when_wanted(event_store: Store) -> None:
    session = _save(event_store, "agent:main:a")
    for n in range(5):
        session.append_message(_message(f"m{n}"), at=NOW)
    session.append_message(_message("tool output", role="toolResult"), at=NOW)
    event_store.save(session)
    asked: list[StoredSession] = []

    def read(
        window: TranscriptWindow, *, wanted: bool = True
    ) -> tuple[list[str] | None, int | None]:
        found = event_store.session_transcript(
            "agent:main:a", window, lambda stored: asked.append(stored) is None and wanted
        )
        assert found.session == event_store.session("agent:main:a")
        if found.messages is None:
            return None, found.total
        texts = [TranscriptMessage.model_validate_json(text).text() for text in found.messages]
        return texts, found.total

    # The tail, as ``transcript`` reads it (no total); a page, as ``transcript_page`` does.
    assert read(TranscriptWindow(limit=3, include_tools=True)) == (
        ["m3", "m4", "tool output"],
        None,
    )
    assert read(TranscriptWindow(limit=2, include_tools=False, offset=1)) == (["m2", "m3"], 5)
    # Not wanted (the caller's access check said no): the row only, the check saw it.
    assert read(TranscriptWindow(limit=3, include_tools=True), wanted=False) == (None, None)
    assert [stored.state.key for stored in asked] == ["agent:main:a"] * 3
    # No such session: nothing to ask about.
    missing = event_store.session_transcript(
        "agent:main:none",
        TranscriptWindow(limit=3, include_tools=True),
        lambda stored: asked.append(stored) is None,
    )
    assert missing.session is None
    assert missing.messages is None
    assert len(asked) == 3


def test_a_session_page_is_keyset_paged_filtered_and_searched(event_store: Store) -> None:
    keys = [f"agent:main:s{n:02d}" for n in range(7)]
    for n, key in enumerate(keys):
        _save(event_store, key, at=NOW + timedelta(minutes=n // 2), label=f"Team_{n}%")
    archived = _save(event_store, "agent:ops:old", at=NOW, label="team_x")
    archived.archive(reason="done", at=NOW + timedelta(hours=1))
    event_store.save(archived)
    # Newest first, then by key; page after page by the last row's (updatedAt, key).
    newest_first = sorted(keys, key=lambda k: (-(int(k[-2:]) // 2), k))
    seen: list[str] = []
    after = None
    while True:
        page = event_store.session_page(SessionPage(limit=3, after=after))
        if not page:
            break
        seen += [s.state.key for s in page]
        after = (page[-1].state.updated_at, page[-1].state.key)
    assert seen == newest_first
    # Any status; an agent; a piece of the key or label, any case, % and _ taken literally.
    every = event_store.session_page(SessionPage(limit=20, status=None))
    assert "agent:ops:old" in {s.state.key for s in every}
    ops = event_store.session_page(SessionPage(limit=20, status=None, agent_id="ops"))
    assert [s.state.key for s in ops] == ["agent:ops:old"]
    found = event_store.session_page(SessionPage(limit=20, search="TEAM_3%"))
    assert [s.state.key for s in found] == ["agent:main:s03"]
    assert event_store.session_page(SessionPage(limit=20, search="team_%x")) == []
    by_key = event_store.session_page(SessionPage(limit=20, search="S0"))
    assert len(by_key) == 7


def test_listings_are_the_rows_fields_read_from_their_columns(event_store: Store) -> None:
    # Every field a listing has, set: by a patch, an import, a message's origin and usage.
    full = _save(event_store, "agent:main:discord:group:dev", label="team")
    full.patch(
        {"model": "m1", "thinkingLevel": "high", "verboseLevel": "on", "sendPolicy": "deny"},
        at=NOW,
    )
    full.import_fields(
        {"context_tokens": 9000, "system_sent": True, "aborted_last_run": True},
        source="test",
        at=NOW,
    )
    full.append_message(
        TranscriptMessage(
            role="assistant",
            content=[{"type": "text", "text": "hi"}],
            timestamp=0,
            model="m2",
            usage=Usage(input=3, output=4),
        ),
        at=NOW + timedelta(minutes=2),
        origin=MessageOrigin(
            channel="discord", chat_type="group", display_name="Dev", to="#dev", account_id="a1"
        ),
    )
    event_store.save(full)
    _save(event_store, "agent:main:plain", at=NOW + timedelta(minutes=1), label="team")
    _save(event_store, "agent:ops:other", at=NOW + timedelta(minutes=3))

    query = SessionQuery(limit=10, exclude_keys=frozenset({"agent:ops:other"}))
    listings = event_store.list_listings(query)
    assert listings == [SessionListing.of(s) for s in event_store.list_sessions(query)]
    assert [each.key for each in listings] == ["agent:main:discord:group:dev", "agent:main:plain"]
    shown = listings[0]
    assert (shown.model, shown.thinking_level, shown.send_policy) == ("m2", "high", "deny")
    assert (shown.context_tokens, shown.total_tokens) == (9000, 7)
    assert shown.system_sent is True
    assert shown.aborted_last_run is True
    assert (shown.channel, shown.last_to, shown.last_account_id) == ("discord", "#dev", "a1")
    assert shown.stream == session_uuid("agent:main:discord:group:dev").hex
    assert listings[1].system_sent is False

    page = SessionPage(limit=2, status=None)
    assert event_store.listing_page(page) == [
        SessionListing.of(s) for s in event_store.session_page(page)
    ]
    assert event_store.listings_by_label("team") == [
        SessionListing.of(s) for s in event_store.sessions_by_label("team")
    ]
