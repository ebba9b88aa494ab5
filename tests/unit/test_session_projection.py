"""The session row's projection on an append: which fields changed, and what is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from sessionwire.application.projection import changed_fields, project
from sessionwire.domain.session import MessageOrigin, Session, SessionState
from sessionwire.domain.spawn import Spawn
from sessionwire.domain.transcript import TranscriptMessage

OPENED = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = "agent:main:bench:group:s1"


def _opened() -> Session:
    return Session.open(key=KEY, session_id=UUID(int=7), agent_id="main", at=OPENED)


def _restored(session: Session) -> Session:
    # As the store hands it to a command: from its row, remembering that row's state.
    return Session.from_state(
        id=session.id,
        version=session.version,
        state=session.state,
        created_on=session.created_on,
        modified_on=session.modified_on,
    )


def _message(text: str, **fields: object) -> TranscriptMessage:
    return TranscriptMessage.model_validate(
        {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1, **fields}
    )


def _differing(before: SessionState, after: SessionState) -> frozenset[str]:
    old, new = before.model_dump(), after.model_dump()
    return frozenset(name for name in new if old[name] != new[name])


def test_an_append_projects_its_transcript_entry_and_exactly_the_fields_it_changed() -> None:
    session = _restored(_opened())
    before = session.state
    session.append_message(
        _message("hello", model="m1"),
        at=OPENED + timedelta(seconds=5),
        origin=MessageOrigin(channel="bench", chat_type="group"),
    )
    events = session.collect_events()

    changes = project([session], events)

    (entry,) = changes.transcript
    assert (entry.session, entry.seq, entry.role) == (session.id, 2, "user")
    assert entry.message_json == _message("hello", model="m1").to_json()
    row = changes.rows[session.id]
    assert not row.is_new
    assert row.version == 2
    assert row.changed == _differing(before, session.state)
    assert {"updated_at", "message_count", "model", "channel"} <= row.changed
    assert changes.members == []
    assert changes.run_links == []
    assert changes.transcript_rows == []


def test_a_session_opened_with_its_first_message_is_a_new_row() -> None:
    session = _opened()
    session.append_message(_message("first"), at=OPENED)
    events = session.collect_events()

    changes = project([session], events)

    assert len(changes.transcript) == 1
    row = changes.rows[session.id]
    assert row.is_new
    assert row.changed is None


def test_changed_fields_compares_values_not_identity() -> None:
    state = _opened().state
    equal_copy = state.model_copy(update={"message_count": 0, "label": None})
    moved = state.model_copy(update={"message_count": 3})
    rebuilt = SessionState.model_validate({**state.model_dump(), "label": "ops"})

    assert changed_fields(state, state) == frozenset()
    assert changed_fields(state, equal_copy) == frozenset()
    assert changed_fields(state, moved) == {"message_count"}
    assert changed_fields(state, rebuilt) == {"label"}
    assert changed_fields(None, state) is None


def test_a_spawns_run_links_name_the_childs_session_the_runs_run_in() -> None:
    # Its rows (sw_runs) are the child's: a store sharded by session key updates them in
    # the child's shard (ADR 0062), for the child's first run and its announce run alike.
    child = "agent:main:subagent:c1"
    spawn = Spawn.spawn(
        run_id=UUID(int=1),
        child_key=child,
        agent_id="main",
        requester_key="agent:main:main",
        requester_display="main",
        task="sum up",
        label=None,
        model=None,
        run_timeout_seconds=0,
        cleanup="keep",
        archive_after_minutes=60,
        at=OPENED,
    )
    opened = project([spawn], spawn.collect_events())
    spawn.request_announce(UUID(int=2), at=OPENED + timedelta(seconds=5))
    announced = project([spawn], spawn.collect_events())
    assert [(link.run_id, link.session_key) for link in opened.run_links] == [
        (str(UUID(int=1)), child)
    ]
    assert [(link.run_id, link.session_key) for link in announced.run_links] == [
        (str(UUID(int=2)), child)
    ]
