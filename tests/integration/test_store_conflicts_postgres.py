"""A save that loses a race on PostgreSQL is reported as a conflict, however the
database's answer arrives."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
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


# Round trips to the server, not a time limit: it has refused by the first few.
STATE_CHECKS = 10_000


def _until_refused(url: str, backend_pid: int) -> None:
    """Until the server has refused the events of the save on ``backend_pid`` (its
    transaction is then aborted), watched from another connection."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as watcher:
        for _ in range(STATE_CHECKS):
            row = watcher.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", (backend_pid,)
            ).fetchone()
            if row is not None and row[0] == "idle in transaction (aborted)":
                return
    raise AssertionError("the server never refused the conflicting events")


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

        def late_write(cursor: Any, changes: Any) -> None:
            _until_refused(postgres_url, cursor.connection.info.backend_pid)
            write(cursor, changes)

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
