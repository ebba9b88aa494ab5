"""The WorkQueue port's contract, on every store: runs and exchanges by id, and the
pending ones of a kind in the order they were created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from sessionwire.application.ports.store import Store
from sessionwire.domain.exchange import Exchange, ExchangeState
from sessionwire.domain.run import Run, RunState
from store_sessions import started_run

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PENDING = ("queued", "running")


def _run(store: Store, *, minute: int = 0, session_key: str = "agent:main:main") -> Run:
    run = started_run(session_key, at=NOW + timedelta(minutes=minute))
    store.save(run)
    return run


def test_work_is_found_by_id_as_saved(event_store: Store) -> None:
    assert event_store.work(uuid4()) is None
    run = _run(event_store)
    run.dispatch(at=NOW)
    event_store.save(run)
    stored = event_store.work(run.id)
    assert stored is not None
    assert (stored.id, stored.kind, stored.version) == (run.id, "run", run.version)
    restored = stored.to_aggregate(Run, RunState)
    assert restored.state == run.state
    assert restored.version == run.version


def test_pending_work_is_one_kind_in_those_statuses_in_creation_order(event_store: Store) -> None:
    first, second, third, done = (_run(event_store, minute=m) for m in range(4))
    second.dispatch(at=NOW)
    done.dispatch(at=NOW)
    done.complete(reply="ok", usage=None, model=None, at=NOW)
    event_store.save(second, done)
    primary: UUID = first.id
    exchange = Exchange.open(
        primary_run_id=primary,
        requester_key="agent:main:main",
        requester_display="main",
        requester_channel=None,
        target_key="agent:ops:main",
        target_display="ops",
        target_channel=None,
        original_message="hello",
        max_turns=2,
        at=NOW,
    )
    event_store.save(exchange)

    pending = event_store.pending_work("run", PENDING)
    assert [work.id for work in pending] == [first.id, second.id, third.id]
    assert [w.id for w in event_store.pending_work("run", ("running",))] == [second.id]
    assert [w.id for w in event_store.pending_work("run", ("ok",))] == [done.id]
    exchanges = event_store.pending_work("exchange", ("open",))
    assert [w.to_aggregate(Exchange, ExchangeState).id for w in exchanges] == [exchange.id]


def test_pending_work_of_one_session(event_store: Store) -> None:
    mine = _run(event_store, minute=0, session_key="agent:main:work")
    _run(event_store, minute=1)
    later = _run(event_store, minute=2, session_key="agent:main:work")
    ended = _run(event_store, minute=3, session_key="agent:main:work")
    later.dispatch(at=NOW)
    ended.dispatch(at=NOW)
    ended.fail(error="broken", at=NOW)
    event_store.save(later, ended)

    pending = event_store.pending_work("run", PENDING, session_key="agent:main:work")
    assert [work.id for work in pending] == [mine.id, later.id]
    assert event_store.pending_work("run", PENDING, session_key="agent:main:idle") == []
    assert len(event_store.pending_work("run", PENDING)) == 3


def test_recent_work_is_newest_first_paged_by_position(event_store: Store) -> None:
    runs = [_run(event_store, minute=m) for m in range(5)]
    runs[1].dispatch(at=NOW)
    runs[1].complete(reply="ok", usage=None, model=None, at=NOW)
    event_store.save(runs[1])
    newest = event_store.recent_work("run", limit=3)
    assert [work.id for _, work in newest] == [r.id for r in reversed(runs)][:3]
    older = event_store.recent_work("run", limit=3, before=newest[-1][0])
    assert [work.id for _, work in older] == [runs[1].id, runs[0].id]
    done = event_store.recent_work("run", limit=10, status="ok")
    assert [work.id for _, work in done] == [runs[1].id]
    assert event_store.recent_work("exchange", limit=10) == []
