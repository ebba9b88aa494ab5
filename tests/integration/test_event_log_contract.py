"""The EventLog port's contract, on every store: what is saved is read back, in order,
and a save that lost a race records nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.ports.event_log import EventLog, StoreConflict
from sessionwire.application.ports.store import Store
from sessionwire.domain.session import Session, session_uuid
from sessionwire.domain.transcript import TranscriptMessage

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _message(text: str) -> TranscriptMessage:
    return TranscriptMessage(role="user", content=[{"type": "text", "text": text}], timestamp=0)


def _opened(key: str, *texts: str) -> Session:
    session = Session.open(key=key, session_id=uuid4(), agent_id="main", at=NOW)
    for index, text in enumerate(texts):
        session.append_message(_message(text), at=NOW + timedelta(seconds=index + 1))
    return session


def test_an_empty_log_has_no_events(event_store: EventLog) -> None:
    assert event_store.log_position() == 0
    assert list(event_store.events()) == []


def test_saved_events_come_back_in_order_at_their_positions(event_store: EventLog) -> None:
    event_store.save(_opened("agent:main:a", "one", "two"))
    event_store.save(_opened("agent:main:b", "three"))
    assert event_store.log_position() == 5
    recorded = list(event_store.events())
    assert [position for position, _ in recorded] == [1, 2, 3, 4, 5]
    assert [(e.originator_id, e.originator_version) for _, e in recorded] == [
        (session_uuid("agent:main:a"), 1),
        (session_uuid("agent:main:a"), 2),
        (session_uuid("agent:main:a"), 3),
        (session_uuid("agent:main:b"), 1),
        (session_uuid("agent:main:b"), 2),
    ]
    assert [position for position, _ in event_store.events(start=4)] == [4, 5]


def test_records_after_a_position_come_in_the_sealed_order_once_sealed(
    event_store: EventLog,
) -> None:
    event_store.save(_opened("agent:main:a", "one", "two"))
    event_store.save(_opened("agent:main:b", "three"))
    event_store.seal()  # the audit commands and followers seal before they read
    assert event_store.sealed_position() == 5
    first = event_store.records_after(0, 2)
    rest = event_store.records_after(2, 10)
    assert [position for position, _ in [*first, *rest]] == [1, 2, 3, 4, 5]
    assert [(e.originator_id, e.originator_version) for _, e in rest] == [
        (session_uuid("agent:main:a"), 3),
        (session_uuid("agent:main:b"), 1),
        (session_uuid("agent:main:b"), 2),
    ]
    assert event_store.records_after(5, 10) == []


def test_the_log_streams_past_one_page(event_store: EventLog) -> None:
    event_store.save(_opened("agent:main:long", *(f"m{n}" for n in range(600))))
    positions = [position for position, _ in event_store.events(start=2)]
    assert positions == list(range(2, 602))


def test_a_stream_holds_one_aggregates_events_up_to_a_version(event_store: EventLog) -> None:
    event_store.save(_opened("agent:main:a", "one", "two"))
    event_store.save(_opened("agent:main:b", "other"))
    stream = event_store.stream(session_uuid("agent:main:a"))
    assert [event.originator_version for event in stream] == [1, 2, 3]
    assert isinstance(stream[0], Session.SessionOpened)
    early = event_store.stream(session_uuid("agent:main:a"), up_to_version=2)
    assert [event.originator_version for event in early] == [1, 2]
    assert list(event_store.stream(uuid4())) == []


def test_a_save_with_nothing_new_records_nothing(event_store: EventLog) -> None:
    session = _opened("agent:main:a", "one")
    event_store.save(session)
    event_store.save(session)
    event_store.save()
    assert event_store.log_position() == 2


def test_a_save_that_lost_a_race_records_nothing_of_any_aggregate(event_store: Store) -> None:
    event_store.save(_opened("agent:main:a"))
    stored = event_store.session("agent:main:a")
    assert stored is not None
    first, stale = stored.to_aggregate(), stored.to_aggregate()
    first.append_message(_message("first"), at=NOW)
    event_store.save(first)
    before = event_store.log_position()

    stale.append_message(_message("second"), at=NOW)
    bystander = _opened("agent:main:bystander", "saved with the loser")
    with pytest.raises(StoreConflict):
        event_store.save(bystander, stale)
    assert event_store.log_position() == before
    assert event_store.session("agent:main:bystander") is None
    row = event_store.session("agent:main:a")
    assert row is not None
    assert row.version == 2


def test_a_streams_hash_at_a_version_is_the_chain_row_recorded_there(
    event_store: EventSourcedStore,
) -> None:
    event_store.save(_opened("agent:main:a", "one", "two"))
    event_store.save(_opened("agent:main:b", "other"))
    audit = StoreAuditLog(event_store)
    chained = {
        (record.content.originator_id, record.content.originator_version): link.stream_hash
        for record, link in audit.stored_records(audit.log_bounds())
        if link is not None
    }
    stream = session_uuid("agent:main:a")

    found = {version: event_store.stream_hash(stream, version) for version in (1, 2, 3)}

    assert found == {version: chained[(stream, version)] for version in (1, 2, 3)}
    assert len(set(found.values())) == 3
    assert event_store.stream_hash(stream, 4) is None
    assert event_store.stream_hash(uuid4(), 1) is None
