"""Events are stored without their default-valued fields (a message's null usage, model and
origin fields), on every store; they read back whole, records stored in full before still
read the same, and the log verifies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from sessionwire import Gateway
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.serialisation import known_event_class
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.audit.verify import verify
from sessionwire.domain.session import MessageOrigin, Session
from sessionwire.domain.transcript import TranscriptMessage, Usage

KEY = "agent:main:main"


async def test_a_message_event_is_stored_without_its_defaults_and_reads_back_whole(
    gateway: Gateway,
) -> None:
    await gateway.record_message(KEY, role="user", content="hello")
    await gateway.record_message(
        KEY, role="assistant", content="hi", usage={"input": 0, "output": 3}, model="m1"
    )
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    store.seal()  # PostgreSQL seals behind its writers
    with store.reading() as cursor:
        records = [record for _, record in store.chain.records_after(cursor, 0, 10)]
    appended = [r for r in records if known_event_class(r.content.topic) is Session.MessageAppended]
    assert len(appended) == 2
    plain, with_usage = (bytes(r.content.state) for r in appended)
    assert b"null" not in plain
    assert b"sender_is_owner" not in plain
    assert b'"model":"m1"' in with_usage
    assert b'"output":3' in with_usage

    events = [event for _, event in store.records_after(0, 10)]
    messages = [e for e in events if isinstance(e, Session.MessageAppended)]
    assert messages[0].message.usage is None
    assert messages[0].sender_is_owner is False
    assert messages[0].provenance is None
    assert messages[1].message.usage == Usage(input=0, output=3)
    # What readers get is built from the event as before: zero token counts included.
    history = await gateway.call_tool(KEY, "sessions_history", {"sessionKey": KEY})
    assert history["messages"][1]["usage"] == {"input": 0, "output": 3}
    assert "usage" not in history["messages"][0]

    report = verify(StoreAuditLog(store))
    assert report.clean, report.findings
    assert report.checked == len(records)


def test_a_record_stored_in_full_reads_as_the_compact_one(
    event_store: EventSourcedStore,
) -> None:
    event = Session.MessageAppended(
        originator_id=UUID(int=7),
        originator_version=2,
        timestamp=datetime(2026, 11, 23, 12, 0, tzinfo=UTC),
        message=TranscriptMessage(
            role="user", content=[{"type": "text", "text": "x"}], timestamp=1
        ),
        origin=MessageOrigin(channel="bench"),
    )
    mapper = event_store.app.mapper
    compact = mapper.to_stored_event(event)
    # The form records had before defaults were left out: every field present.
    full = StoredEvent(
        originator_id=compact.originator_id,
        originator_version=compact.originator_version,
        topic=compact.topic,
        state=event.model_dump_json(exclude={"originator_id", "originator_version"}).encode(),
    )
    assert len(compact.state) < len(full.state)
    assert mapper.to_domain_event(compact) == event
    assert mapper.to_domain_event(full) == event


def test_a_message_keeps_its_time_and_origin_compact_and_reads_back_whole(
    event_store: EventSourcedStore,
) -> None:
    # Beside every message (ADR 0036, amendment): the time as integer microseconds, the
    # origin under one-letter keys, the code "Msg"; a time not in UTC keeps its ISO form.
    mapper = event_store.app.mapper
    at = datetime(2026, 11, 23, 12, 0, 1, 234567, tzinfo=UTC)
    origin = MessageOrigin(channel="bench", chat_type="group", display_name="#ops", to="c:1")
    line = TranscriptMessage(role="user", content=[{"type": "text", "text": "x"}], timestamp=1)
    event = Session.MessageAppended(
        originator_id=UUID(int=7), originator_version=2, timestamp=at, message=line, origin=origin
    )
    stored = mapper.to_stored_event(event)
    assert stored.topic == "Msg"
    assert stored.state.endswith(
        b',"t":1795435201234567,"o":{"c":"bench","t":"group","n":"#ops","to":"c:1"}}'
    )
    assert mapper.to_domain_event(stored) == event

    elsewhere = datetime(2026, 11, 23, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    plain = event.model_copy(update={"timestamp": elsewhere, "origin": None})
    stored = mapper.to_stored_event(plain)
    assert stored.state.endswith(b',"t":"2026-11-23T13:00:00+01:00"}')
    assert mapper.to_domain_event(stored) == plain
    assert mapper.to_domain_event(stored).timestamp.utcoffset() == timedelta(hours=1)


async def test_the_audit_reads_compact_messages_in_one_pass(gateway: Gateway) -> None:
    await gateway.record_message(KEY, role="user", content="hi", channel="bench", to="c:1")
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    store.seal()
    audit = StoreAuditLog(store)
    with store.reading() as cursor:
        records = [record for _, record in store.chain.records_after(cursor, 0, 10)]
    message = next(r for r in records if r.content.topic == "Msg")
    fast = audit._one_pass(message.content)
    assert isinstance(fast, Session.MessageAppended)
    assert fast.origin == MessageOrigin(channel="bench", to="c:1")
    assert fast == audit.decode(message)
