"""The ReadModelMaintenance port's contract, on every store: the read models rebuilt from
the log are the live ones, and the store answers from them as before."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from sessionwire.application.ports.session_read_model import SessionQuery
from sessionwire.application.ports.store import Store
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _fill(store: Store) -> None:
    for n in range(3):
        session = Session.open(key=f"agent:main:s{n}", session_id=uuid4(), agent_id="main", at=NOW)
        session.patch({"label": f"label {n}"}, at=NOW)
        for m in range(n + 1):
            session.append_message(
                TranscriptMessage(
                    role="user", content=[{"type": "text", "text": f"{m}"}], timestamp=0
                ),
                at=NOW,
            )
        if n == 2:
            session.archive(reason="old", at=NOW)
        run = Run.start(
            run_id=uuid4(),
            session_key=session.state.key,
            agent_id="main",
            step="primary",
            message="hi",
            timeout_seconds=30,
            at=NOW,
        )
        store.save(session, run)


def test_an_empty_store_rebuilds_to_empty_read_models(event_store: Store) -> None:
    before = event_store.read_model_snapshot()
    event_store.rebuild_read_models()
    assert event_store.read_model_snapshot() == before
    assert all(rows == [] for rows in before.values())


def test_rebuilt_read_models_equal_the_live_ones(event_store: Store) -> None:
    _fill(event_store)
    live = event_store.read_model_snapshot()
    assert any(rows for rows in live.values())
    listed = event_store.list_sessions(SessionQuery(limit=10))
    event_store.rebuild_read_models()
    assert event_store.read_model_snapshot() == live
    assert event_store.list_sessions(SessionQuery(limit=10)) == listed
    stored = event_store.session("agent:main:s1")
    assert stored is not None
    assert len(event_store.transcript(stored.id, limit=10, include_tools=True)) == 2
