"""A save that loses a race on PostgreSQL is reported as a conflict, however the
database's answer arrives."""

from __future__ import annotations

import select
from datetime import UTC, datetime
from typing import Any

import pytest
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.ports.store import StoreConflict
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "agent:main:main"


def _message(text: str) -> TranscriptMessage:
    return TranscriptMessage(role="user", content=[{"type": "text", "text": text}], timestamp=0)


def _other(_: Any) -> str:
    return "other"


def _until_answered(connection: Any) -> None:
    """Push the save's queued statements (its events) to the server and wait, on the
    connection's socket, until the server's answer (the refusal) has come back."""
    pgconn = connection.pgconn
    pgconn.flush()
    while pgconn.is_busy():
        readable, _, _ = select.select([pgconn.socket], [], [], 60)
        assert readable, "the server never answered the conflicting events"
        pgconn.consume_input()


def test_a_conflict_answered_while_the_save_is_still_sending_is_a_conflict(
    postgres_url: str,
) -> None:
    first = EventSourcedStore(postgres_url, kind_of=_other)
    second = EventSourcedStore(postgres_url, kind_of=_other)
    try:
        first.save(Session.open(key=KEY, session_id="s", agent_id="main", at=NOW))
        stored = second.session(KEY)
        assert stored is not None
        stale = stored.to_aggregate()
        fresh = stored.to_aggregate()
        fresh.append_message(_message("first writer"), at=NOW)
        first.save(fresh)

        # Hold the read-model statements back until the server has refused the events:
        # psycopg then reads the refusal while sending them, as on a loaded machine.
        write = second.read_model.write

        def late_write(cursor: Any, changes: Any, stored: Any = ()) -> None:
            # The save runs in one pipeline: the refusal of its events is back before
            # the rest is sent.
            _until_answered(cursor.connection)
            write(cursor, changes, stored)

        second.read_model.write = late_write  # type: ignore[method-assign]
        stale.append_message(_message("second writer"), at=NOW)
        with pytest.raises(StoreConflict):
            second.save(stale)
        second.read_model.write = write  # type: ignore[method-assign]

        # The connection is fine afterwards: the retry from fresh state is saved.
        stored = second.session(KEY)
        assert stored is not None
        retry = stored.to_aggregate()
        retry.append_message(_message("second writer"), at=NOW)
        second.save(retry)
        texts = second.transcript(retry.id, limit=10, include_tools=True)
        assert len(texts) == 2
    finally:
        second.close()
        first.close()
