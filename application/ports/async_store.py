"""The store as the gateway uses it on its event loop: every read and write awaited.

Decision 23: nothing blocks the event loop. Each coroutine here runs its database work
on a thread of the store's own (a reader thread, the writer thread, a PostgreSQL worker),
never on the loop's; the loop only waits for the answer. Work that reads a lot and then
computes (an audit timeline, a run listing filtered by visibility) runs whole on a reader
thread through ``read``, so neither its queries nor its CPU hold the loop.

The blocking ports (``Store`` and its roles) stay what the store's own threads and the
offline commands (audit, import) use; application code on the loop goes through this.

Each query is declared once, on its blocking port (its signature and meaning there):
here it is only named, ``name = awaited(Port.name)``, and awaiting it runs the blocking
store's method of that name off the loop (``AsyncStore.answer``). The type checker reads
the awaited signature from the port's (ADR 0044); tests/integration/
test_async_store_contract.py checks that every query of the ports is served so, on every
store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

from sessionwire.application.ports.event_log import EventLog
from sessionwire.application.ports.generated_methods import GeneratedMethod
from sessionwire.application.ports.read_model_maintenance import ReadModelMaintenance
from sessionwire.application.ports.run_read_model import RunReadModel
from sessionwire.application.ports.session_read_model import SessionReadModel, StoredSession
from sessionwire.application.ports.store import Store
from sessionwire.application.ports.telemetry import NO_TELEMETRY, Telemetry
from sessionwire.application.ports.work_queue import WorkQueue
from sessionwire.domain.base import Aggregate

P = ParamSpec("P")
T = TypeVar("T")


class Awaited(GeneratedMethod[P, Coroutine[Any, Any, T]]):
    """A blocking port's query, awaited on an ``AsyncStore``: the port's method of the
    same name, run by the store off the loop (``AsyncStore.answer``)."""

    def __init__(self, query: Callable[Concatenate[Any, P], T]) -> None:
        self.query = query.__name__
        super().__init__(self.query)

    def bind(self, instance: Any) -> Callable[P, Coroutine[Any, Any, T]]:
        store: AsyncStore = instance
        return partial(store.answer, self.query)


def awaited(query: Callable[Concatenate[Any, P], T]) -> Awaited[P, T]:
    """``query`` (a blocking port's method) served awaited under its own name."""
    return Awaited(query)


class AsyncStore(ABC):
    """The event log and read models, awaited; one per gateway."""

    location: str
    """Where the store is, printable (no password)."""
    telemetry: Telemetry = NO_TELEMETRY

    # Writing ----------------------------------------------------------------------------

    @abstractmethod
    async def save(self, *aggregates: Aggregate) -> None:
        """Record the aggregates' pending events and project them, in one transaction.

        Raises StoreConflict when a stream moved on since the aggregate was loaded;
        nothing is recorded then. Durable when it returns.
        """

    @abstractmethod
    def writes_in_flight(self) -> int:
        """Saves handed to the store's threads and not yet settled."""

    @abstractmethod
    async def writes_settled(self) -> None:
        """Return once no save is in flight (``wait_idle`` counts them as work)."""

    # Reading ----------------------------------------------------------------------------

    @abstractmethod
    async def read(self, query: Callable[..., T], /, *args: Any) -> T:
        """``query(store, *args)`` on a reader thread, with the blocking store: for work
        that reads several times and computes on what it read."""

    @abstractmethod
    async def answer(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """The blocking store's query ``name`` with these arguments, on a reader thread
        (what every ``awaited`` query below runs)."""

    @abstractmethod
    async def session_for_update(self, key: str) -> StoredSession | None:
        """The session to change next; may come from this process's own last write (a
        stale one conflicts on save, and the retry reads the store)."""

    # The ports' queries, each awaited (their signatures and meaning: on the ports).
    session = awaited(SessionReadModel.session)
    sessions_by_session_id = awaited(SessionReadModel.sessions_by_session_id)
    sessions_by_label = awaited(SessionReadModel.sessions_by_label)
    list_sessions = awaited(SessionReadModel.list_sessions)
    session_page = awaited(SessionReadModel.session_page)
    list_listings = awaited(SessionReadModel.list_listings)
    listing_page = awaited(SessionReadModel.listing_page)
    listings_by_label = awaited(SessionReadModel.listings_by_label)
    agent_ids = awaited(SessionReadModel.agent_ids)
    transcript = awaited(SessionReadModel.transcript)
    transcript_page = awaited(SessionReadModel.transcript_page)
    session_transcript = awaited(SessionReadModel.session_transcript)
    session_streams = awaited(SessionReadModel.session_streams)
    run = awaited(RunReadModel.run)
    list_runs = awaited(RunReadModel.list_runs)
    work = awaited(WorkQueue.work)
    pending_work = awaited(WorkQueue.pending_work)
    recent_work = awaited(WorkQueue.recent_work)
    log_position = awaited(EventLog.log_position)
    seal = awaited(EventLog.seal)
    sealed_position = awaited(EventLog.sealed_position)
    records_after = awaited(EventLog.records_after)
    stream = awaited(EventLog.stream)
    stream_hash = awaited(EventLog.stream_hash)
    streams_events = awaited(EventLog.streams_events)
    rebuild_read_models = awaited(ReadModelMaintenance.rebuild_read_models)
    read_model_snapshot = awaited(ReadModelMaintenance.read_model_snapshot)

    # Not I/O: answered on the loop ------------------------------------------------------

    @abstractmethod
    def on_log_grew(self, listener: Callable[[], None]) -> Callable[[], None]:
        """``EventLog.on_log_grew``: ``listener`` is called from the thread that committed."""

    @abstractmethod
    def others_may_write(self) -> bool: ...

    @abstractmethod
    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]:
        """Held while a run executes in session ``key`` (``SessionLocks``)."""

    @property
    @abstractmethod
    def lease_seconds(self) -> float | None:
        """How long a session's lease lasts (``SessionLocks``); None without leases."""

    @property
    @abstractmethod
    def takeover_check_seconds(self) -> float | None:
        """How often to look for dead gateways (``SessionLocks``); None without leases."""

    @abstractmethod
    async def take_over_dead_gateways(self) -> list[str]:
        """Gateways sharing this store whose lease expired, taken over by this one
        (``SessionLocks``); empty for a store only one process writes."""

    @property
    @abstractmethod
    def blocking(self) -> Store:
        """The blocking store underneath, for the store's own threads and for tests and
        offline commands that run outside any event loop."""

    @abstractmethod
    async def close(self) -> None:
        """Stop the store's threads and close it (off the loop)."""
