"""An import decodes each record in one pydantic pass from its bytes when that gives what
the mapper gives (adapters/store/audit.py ``_one_pass``); whatever it does not take, the
mapper decodes, or refuses with its reason."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest
from console_scenario import record_scenario
from eventsourcing.persistence import MapperDeserialisationError
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.ports.audit_log import StoredRecord
from sessionwire.domain.base import DomainEvent
from sessionwire.domain.hash_chain import RecordContent

APPENDED = "sessionwire.domain.session:Session.MessageAppended"
OPENED = "sessionwire.domain.session:Session.SessionOpened"


def opened_store(url: str) -> EventSourcedStore:
    return EventSourcedStore(
        url, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key, state.chat_type)
    )


def by_mapper(log: StoredRecord, audit: StoreAuditLog) -> DomainEvent | str:
    content = log.content
    from eventsourcing.persistence import StoredEvent

    try:
        return audit.store.app.mapper.to_domain_event(  # type: ignore[no-any-return]
            StoredEvent(
                originator_id=content.originator_id,
                originator_version=content.originator_version,
                topic=content.topic,
                state=content.state,
            )
        )
    except (MapperDeserialisationError, ValueError) as error:
        return f"{type(error).__name__}: {error}"


def same(a: DomainEvent, b: DomainEvent) -> bool:
    # repr, not ==: NaN is not equal to itself.
    return (
        type(a) is type(b)
        and repr(a) == repr(b)
        and a.model_fields_set == b.model_fields_set
        and a.model_dump_json() == b.model_dump_json()
    )


async def test_every_event_of_a_recorded_store_decodes_as_the_mapper_decodes_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/scenario.db"
    await record_scenario(url)
    gateway = await Gateway.open(config=GatewayConfig(), store=url)
    try:
        await gateway.record_many("agent:main:bulk", [{"role": "user", "content": "a"}] * 3)
    finally:
        await gateway.close()
    store = opened_store(url)
    try:
        audit = StoreAuditLog(store)
        records = [record for record, _ in audit.stored_records(audit.log_bounds())]
        taken = 0
        for record in records:
            fast = audit._one_pass(record.content)
            slow = by_mapper(record, audit)
            assert not isinstance(slow, str), slow
            if fast is not None:
                taken += 1
                assert same(fast, slow), record.content.topic
            assert same(audit.decode(record), slow)
        topics = {record.content.topic for record in records}
    finally:
        store.close()
    assert len(topics) >= 10  # the scenario's runs, exchanges, spawns, refusals, messages
    assert taken == len(records)  # every event sessionwire writes takes the one pass


@pytest.mark.parametrize(
    ("topic", "state", "refused"),
    [
        # The record's coordinates win over the same keys in the bytes, as the mapper's.
        (
            OPENED,
            b'{"timestamp":"2026-05-01T12:00:00Z","originator_topic":'
            b'"sessionwire.domain.session:Session","key":"agent:main:main",'
            b'"session_id":"s","agent_id":"main","originator_version":7}',
            False,
        ),
        # A class_version the event does not have: the mapper drops it.
        (
            APPENDED,
            b'{"timestamp":"2026-05-01T12:00:00Z","class_version":1,"message":'
            b'{"role":"user","content":[],"timestamp":5}}',
            False,
        ),
        (
            APPENDED,
            b'{"timestamp":"2026-05-01T12:00:00","message":{"role":"user",'
            b'"content":[{"type":"text","text":"a\\ud800"}],"timestamp":5}}',
            True,
        ),
        (
            APPENDED,
            b'{"timestamp":"2026-05-01T12:00:00Z","message":{"role":"user",'
            b'"content":[],"timestamp":5,"x":NaN}}',
            False,
        ),
        (APPENDED, b"{}", True),
        (APPENDED, b"[]", True),
        (APPENDED, b"  {}  ", True),
        (APPENDED, b'{"timestamp":"2026-05-01T12:00:00Z"} {}', True),
        # Not sessionwire's aggregate: refused by the mapper, never taken here.
        (
            OPENED,
            b'{"timestamp":"2026-05-01T12:00:00Z","originator_topic":"os:system",'
            b'"key":"agent:main:main","session_id":"s","agent_id":"main"}',
            True,
        ),
        ("os:system", b'{"timestamp":"2026-05-01T12:00:00Z"}', True),
    ],
)
def test_odd_records_decode_as_the_mapper_decodes_them(
    tmp_path: Path, topic: str, state: bytes, refused: bool
) -> None:
    store = opened_store(f"sqlite:///{tmp_path}/empty.db")
    try:
        audit = StoreAuditLog(store)
        record = StoredRecord(
            notification_id=1,
            content=RecordContent(
                originator_id=uuid4(), originator_version=1, topic=topic, state=state
            ),
        )
        slow = by_mapper(record, audit)
        fast = audit._one_pass(record.content)
        assert isinstance(slow, str) == refused, slow
        if fast is not None:
            assert not isinstance(slow, str), slow
            assert same(fast, slow)
        if refused:
            with pytest.raises((MapperDeserialisationError, ValueError)):
                audit.decode(record)
        else:
            assert not isinstance(slow, str)
            assert same(audit.decode(record), slow)
    finally:
        store.close()
