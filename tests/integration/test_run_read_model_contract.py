"""The RunReadModel port's contract, on every store: a run's row follows its events, and
runs are listed newest first, filtered, limited and keyset paged.

(The gateway's run tools over this port, visibility included: test_runs_read_model.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from sessionwire.application.ports.run_read_model import RunQuery
from sessionwire.application.ports.store import Store
from sessionwire.domain.run import Run
from store_sessions import started_run

NOW = datetime(2026, 1, 1, tzinfo=UTC)
A, B = "agent:main:a", "agent:main:b"


def _run(store: Store, session_key: str, *, minute: int, trace: str = "t-1") -> Run:
    run = started_run(session_key, at=NOW + timedelta(minutes=minute), trace=trace)
    store.save(run)
    return run


def test_a_runs_row_follows_its_events(event_store: Store) -> None:
    assert event_store.run(str(uuid4())) is None
    run = _run(event_store, A, minute=0)
    queued = event_store.run(run.state.run_id)
    assert queued is not None
    assert (queued.run_id, queued.status, queued.session_key, queued.trace_id) == (
        run.state.run_id,
        "queued",
        A,
        "t-1",
    )
    assert (queued.started_at, queued.ended) == (None, False)
    run.dispatch(at=NOW + timedelta(seconds=1))
    run.fail(error="the agent broke", at=NOW + timedelta(seconds=2))
    event_store.save(run)
    ended = event_store.run(run.state.run_id)
    assert ended is not None
    assert (ended.status, ended.attempt, ended.error) == ("error", 1, "the agent broke")
    assert ended.ended
    assert None not in (ended.started_at, ended.ended_at)


def test_runs_are_listed_newest_first_filtered_limited_and_paged(event_store: Store) -> None:
    first = _run(event_store, A, minute=0)
    second = _run(event_store, B, minute=1, trace="t-2")
    third = _run(event_store, A, minute=2)
    third.dispatch(at=NOW + timedelta(minutes=2))
    event_store.save(third)

    def ids(query: RunQuery) -> list[str]:
        return [run.run_id for run in event_store.list_runs(query)]

    everyone = [third.state.run_id, second.state.run_id, first.state.run_id]
    assert ids(RunQuery(limit=10)) == everyone
    assert ids(RunQuery(limit=2)) == everyone[:2]
    assert ids(RunQuery(limit=10, session_key=A)) == [third.state.run_id, first.state.run_id]
    assert ids(RunQuery(limit=10, status="running")) == [third.state.run_id]
    assert ids(RunQuery(limit=10, trace_id="t-2")) == [second.state.run_id]
    (last_of_page,) = event_store.list_runs(RunQuery(limit=1))
    after = (last_of_page.created_at, last_of_page.run_id)
    assert ids(RunQuery(limit=10, before=after)) == everyone[1:]
