"""The store as the gateway uses it on its event loop: every read and write awaited.

Decision 23: nothing blocks the event loop. Each coroutine here runs its database work
on a thread of the store's own (a reader thread, the writer thread, a PostgreSQL worker),
never on the loop's; the loop only waits for the answer. Work that reads a lot and then
computes (an audit timeline, a run listing filtered by visibility) runs whole on a reader
thread through ``read``, so neither its queries nor its CPU hold the loop.

The blocking ports (``Store`` and its roles) stay what the store's own threads and the
offline commands (audit, import) use; application code on the loop goes through this.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar
from uuid import UUID

from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.session_read_model import (
    SessionPage,
    SessionQuery,
    StoredSession,
    TranscriptPage,
)
from sessionwire.application.ports.store import Store
from sessionwire.application.ports.telemetry import NO_TELEMETRY, Telemetry
from sessionwire.application.ports.work_queue import StoredWork
from sessionwire.domain.base import Aggregate, DomainEvent

T = TypeVar("T")


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
    async def session(self, key: str) -> StoredSession | None: ...

    @abstractmethod
    async def session_for_update(self, key: str) -> StoredSession | None:
        """The session to change next; may come from this process's own last write (a
        stale one conflicts on save, and the retry reads the store)."""

    @abstractmethod
    async def sessions_by_session_id(self, session_id: str) -> list[StoredSession]: ...

    @abstractmethod
    async def sessions_by_label(self, label: str) -> list[StoredSession]: ...

    @abstractmethod
    async def list_sessions(self, query: SessionQuery) -> list[StoredSession]: ...

    @abstractmethod
    async def session_page(self, page: SessionPage) -> list[StoredSession]: ...

    @abstractmethod
    async def agent_ids(self) -> list[str]: ...

    @abstractmethod
    async def transcript(self, session: UUID, *, limit: int, include_tools: bool) -> list[str]:
        """The last ``limit`` messages of a session as JSON texts, oldest first."""

    @abstractmethod
    async def transcript_page(
        self, session: UUID, *, offset: int, limit: int, include_tools: bool
    ) -> TranscriptPage:
        """``SessionReadModel.transcript_page``: a window counted back from the newest."""

    @abstractmethod
    async def run(self, run_id: str) -> StoredRun | None: ...

    @abstractmethod
    async def list_runs(self, query: RunQuery) -> list[StoredRun]: ...

    @abstractmethod
    async def work(self, aggregate_id: UUID) -> StoredWork | None: ...

    @abstractmethod
    async def pending_work(
        self, kind: str, statuses: Sequence[str], *, session_key: str | None = None
    ) -> list[StoredWork]: ...

    @abstractmethod
    async def records_after(self, position: int, limit: int) -> list[tuple[int, DomainEvent]]:
        """Sealed-log records after ``position`` (``EventLog.records_after``)."""

    @abstractmethod
    async def sealed_position(self) -> int: ...

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
