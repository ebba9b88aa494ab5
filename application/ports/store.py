"""The store: every role one backend plays, as the composition root opens and closes it.

Application code depends on the narrowest role it needs (``EventLog``,
``SessionReadModel``, ``WorkQueue``, ``SessionLocks``, ``ReadModelMaintenance``,
``TranscriptSearch``); only what hands the roles out (the gateway, the unit of work)
holds the whole store.
"""

from __future__ import annotations

from abc import abstractmethod

from sessionwire.application.ports.clock_and_ids import Clock, IdSource, RandomIds, SystemClock
from sessionwire.application.ports.event_log import EventLog, StoreConflict
from sessionwire.application.ports.read_model_maintenance import ReadModelMaintenance
from sessionwire.application.ports.run_read_model import RunReadModel
from sessionwire.application.ports.session_locks import SessionLocks
from sessionwire.application.ports.session_read_model import (
    SessionQuery,
    SessionReadModel,
    StoredSession,
)
from sessionwire.application.ports.telemetry import NO_TELEMETRY, Telemetry
from sessionwire.application.ports.transcript_search import TranscriptSearch
from sessionwire.application.ports.work_queue import StoredWork, WorkQueue
from sessionwire.domain.errors import SessionwireError


class Store(
    EventLog,
    SessionReadModel,
    RunReadModel,
    WorkQueue,
    SessionLocks,
    ReadModelMaintenance,
    TranscriptSearch,
):
    """The event log plus the read models projected from it, written atomically."""

    location: str
    """Where the store is, printable (no password)."""
    telemetry: Telemetry = NO_TELEMETRY
    """Told of every append and retried conflict (the gateway sets its own)."""

    @abstractmethod
    def close(self) -> None: ...


class StoreInUse(SessionwireError, RuntimeError):
    """The store has a live writer already (an SQLite file another gateway holds)."""


class StoreDamaged(SessionwireError, RuntimeError):
    """The store's file cannot be read as a database (a damaged SQLite file); the message
    is what the database found, never a path. No answer can be given from it: commands
    and servers refuse in one line (docs/security.md)."""


# Names that lived here before the split, so existing imports keep working.
__all__ = [
    "Clock",
    "EventLog",
    "IdSource",
    "RandomIds",
    "ReadModelMaintenance",
    "RunReadModel",
    "SessionLocks",
    "SessionQuery",
    "SessionReadModel",
    "Store",
    "StoreConflict",
    "StoreDamaged",
    "StoreInUse",
    "StoredSession",
    "StoredWork",
    "SystemClock",
    "WorkQueue",
]
