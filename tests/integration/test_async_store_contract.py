"""The AsyncStore port's contract, on every store: each query of the blocking ports is
served awaited, answers what the blocking store answers, and takes its connections on a
thread of the store's, never the event loop's (decision 23).

The awaited queries are not written out per query (ADR 0044): ``AsyncStore`` names each
port method once (``awaited``) and the store runs the blocking method of that name. A
query added to a port and not named there fails here, as does one named there that the
store cannot answer.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from uuid import uuid4

import pytest
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.event_log import EventLog
from sessionwire.application.ports.read_model_maintenance import ReadModelMaintenance
from sessionwire.application.ports.run_read_model import RunQuery, RunReadModel
from sessionwire.application.ports.session_read_model import (
    SessionPage,
    SessionQuery,
    SessionReadModel,
    TranscriptWindow,
)
from sessionwire.application.ports.work_queue import WorkQueue
from sessionwire.domain.session import session_uuid
from store_sessions import AT as NOW
from store_sessions import opened, started_run, with_message

KEY = "agent:main:a"
QUERY_PORTS = (SessionReadModel, RunReadModel, WorkQueue, EventLog, ReadModelMaintenance)

NOT_AWAITED_BY_NAME = {
    # Declared on AsyncStore itself, since they differ there: answered on the loop, or
    # from this process's write cache before the store.
    "session_for_update",
    "writes_in_flight",
    "writes_settled",
    "on_log_grew",
    "others_may_write",
    # A stream of the whole log, read lazily: awaited whole it would be a list of every
    # event. A loop reads it page by page with ``records_after``.
    "events",
}


def _everyone(session: Any) -> bool:
    return True


RUN_ID = uuid4()
# Each query's arguments, on the store ``_filled`` made.
ARGUMENTS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "session": ((KEY,), {}),
    "sessions_by_session_id": (("nobody",), {}),
    "sessions_by_label": (("team",), {}),
    "list_sessions": ((SessionQuery(limit=10),), {}),
    "session_page": ((SessionPage(limit=10),), {}),
    "list_listings": ((SessionQuery(limit=10),), {}),
    "listing_page": ((SessionPage(limit=10, status=None),), {}),
    "listings_by_label": (("team",), {}),
    "agent_ids": ((), {}),
    "transcript": ((session_uuid(KEY),), {"limit": 2, "include_tools": False}),
    "transcript_page": (
        (session_uuid(KEY),),
        {"offset": 1, "limit": 2, "include_tools": True},
    ),
    "session_transcript": ((KEY, TranscriptWindow(limit=5, include_tools=True), _everyone), {}),
    "session_streams": ((KEY,), {}),
    "run": ((str(RUN_ID),), {}),
    "list_runs": ((RunQuery(limit=10, session_key=KEY),), {}),
    "work": ((RUN_ID,), {}),
    "pending_work": (("run", ("queued", "running")), {"session_key": KEY}),
    "recent_work": (("run",), {"limit": 5}),
    "log_position": ((), {}),
    "seal": ((), {}),
    "sealed_position": ((), {}),
    "records_after": ((0, 100), {}),
    "stream": ((session_uuid(KEY),), {"up_to_version": 2}),
    "stream_hash": ((session_uuid(KEY), 2), {}),
    "streams_events": (([session_uuid(KEY), RUN_ID],), {}),
    "read_model_snapshot": ((), {}),
    "rebuild_read_models": ((), {}),
}


def port_queries() -> list[str]:
    """Every public method the blocking query ports declare."""
    return sorted(
        name
        for port in QUERY_PORTS
        for name, member in vars(port).items()
        if not name.startswith("_") and inspect.isfunction(member)
    )


def test_every_query_of_the_ports_has_arguments_here() -> None:
    # A query added to a port is checked below only once it has arguments here.
    assert sorted(set(port_queries()) - NOT_AWAITED_BY_NAME) == sorted(ARGUMENTS)


@pytest.fixture
async def stores(
    store_url: str, config: GatewayConfig
) -> AsyncIterator[tuple[EventSourcedStore, AsyncStore]]:
    blocking = open_event_store(store_url, config)
    awaited = OffLoopStore(blocking)
    try:
        _filled(blocking)
        yield blocking, awaited
    finally:
        await awaited.close()


def _filled(store: EventSourcedStore) -> None:
    session = opened(KEY)
    session.patch({"label": "team"}, at=NOW)
    for text in ("one", "two", "three"):
        with_message(session, text)
    store.save(session)
    run = started_run(KEY, run_id=RUN_ID)
    store.save(run)
    store.seal()  # so an awaited and a blocking seal both find nothing left to seal


@pytest.fixture
def connection_threads(stores: tuple[EventSourcedStore, AsyncStore]) -> Iterator[list[str]]:
    """The name of the thread each connection the store takes is taken on."""
    blocking, _ = stores
    taken: list[str] = []
    get_connection: Callable[..., Any] = blocking.datastore.get_connection

    def noted(*args: Any, **kwargs: Any) -> Any:
        taken.append(threading.current_thread().name)
        return get_connection(*args, **kwargs)

    blocking.datastore.get_connection = noted
    yield taken
    blocking.datastore.get_connection = get_connection


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
async def test_each_query_is_served_awaited_off_the_loop(
    name: str,
    stores: tuple[EventSourcedStore, AsyncStore],
    connection_threads: list[str],
) -> None:
    blocking, awaited = stores
    args, kwargs = ARGUMENTS[name]
    query: Callable[..., Any] = getattr(blocking, name)
    answered_on: list[str] = []

    def noted(*args: Any, **kwargs: Any) -> Any:
        answered_on.append(threading.current_thread().name)
        return query(*args, **kwargs)

    setattr(blocking, name, noted)  # the instance's own: what the awaited store runs
    answer = await getattr(awaited, name)(*args, **kwargs)
    delattr(blocking, name)
    loop_thread = threading.current_thread().name
    assert len(answered_on) == 1, f"{name}: not answered by the blocking store's {name}"
    assert loop_thread not in answered_on + connection_threads
    assert answer == query(*args, **kwargs)
