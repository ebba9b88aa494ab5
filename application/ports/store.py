"""Ports: what the application needs from the outside, as abstract classes."""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar
from uuid import UUID

from pydantic import BaseModel
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.session import Session, SessionState

A = TypeVar("A", bound=Aggregate)


class _NoLock(AbstractAsyncContextManager[None]):
    async def __aexit__(self, *_: object) -> None:
        return None


_NO_LOCK = _NoLock()


class Clock(ABC):
    """All time the gateway sees; tests substitute a virtual clock."""

    @abstractmethod
    def now(self) -> datetime:
        """An aware UTC datetime."""

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(tz=UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class IdSource(ABC):
    @abstractmethod
    def new_id(self) -> UUID:
        """A fresh random id (sessionIds, runIds)."""


class RandomIds(IdSource):
    def new_id(self) -> UUID:
        return uuid.uuid4()


class StoreInUse(RuntimeError):
    """The store has a live writer already (an SQLite file another gateway holds)."""


class StoreConflict(Exception):
    """Another writer recorded an event at the same position first; reload and retry."""


@dataclass(frozen=True)
class StoredSession:
    """A session row as the read model holds it, with the stream version it reflects."""

    id: UUID
    version: int
    created_on: datetime
    modified_on: datetime
    state: SessionState

    def to_aggregate(self) -> Session:
        return Session.from_state(
            id=self.id,
            version=self.version,
            state=self.state,
            created_on=self.created_on,
            modified_on=self.modified_on,
        )


@dataclass(frozen=True)
class StoredWork:
    """A run or an exchange as its row holds it."""

    id: UUID
    kind: str
    version: int
    created_on: datetime
    modified_on: datetime
    state_json: str

    def to_aggregate(self, cls: type[A], state_class: type[BaseModel]) -> A:
        return cls.from_state(
            id=self.id,
            version=self.version,
            state=state_class.model_validate_json(self.state_json),
            created_on=self.created_on,
            modified_on=self.modified_on,
        )


@dataclass(frozen=True)
class SessionQuery:
    """What ``sessions_list`` asks the read model for; ``limit`` applies after every filter."""

    limit: int
    updated_since_ms: int | None = None
    kinds: frozenset[str] | None = None
    agent_ids: frozenset[str] | None = None
    spawned_by: str | None = None
    exclude_keys: frozenset[str] = field(default_factory=frozenset)


class SessionStore(ABC):
    """The event store plus the read models projected from it, written atomically."""

    location: str

    @abstractmethod
    def save(self, *aggregates: Aggregate) -> None:
        """Record the aggregates' pending events and project them, in one transaction.

        Raises StoreConflict when a stream moved on since the aggregate was loaded.
        """

    @abstractmethod
    def session(self, key: str) -> StoredSession | None:
        """The session stored under a canonical key, whatever its status."""

    def session_for_update(self, key: str) -> StoredSession | None:
        """The session to change next; may come from a cache of this process's own writes.

        A stale entry is harmless: the save collides on the stream position and raises
        StoreConflict, which drops the entry, so the retry reads the store.
        """
        return self.session(key)

    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]:
        """Held while a run executes in session ``key``.

        Within one process the session's actor already runs one run at a time; a store
        shared by several gateway processes makes this lock span them.
        """
        return _NO_LOCK

    @abstractmethod
    def sessions_by_session_id(self, session_id: str) -> list[StoredSession]:
        """Active sessions whose sessionId is ``session_id``."""

    @abstractmethod
    def sessions_by_label(self, label: str) -> list[StoredSession]:
        """Active sessions carrying this exact label."""

    @abstractmethod
    def list_sessions(self, query: SessionQuery) -> list[StoredSession]:
        """Active sessions, newest ``updatedAt`` first, filtered, then limited."""

    @abstractmethod
    def work(self, aggregate_id: UUID) -> StoredWork | None:
        """The run or exchange with this id."""

    @abstractmethod
    def pending_work(self, kind: str, statuses: Sequence[str]) -> list[StoredWork]:
        """Runs or exchanges in one of ``statuses``, in the order they were created."""

    @abstractmethod
    def agent_ids(self) -> list[str]:
        """Every agent id that has an active session."""

    @abstractmethod
    def transcript(self, session: UUID, *, limit: int, include_tools: bool) -> list[str]:
        """The last ``limit`` messages of a session as JSON texts, oldest first."""

    @abstractmethod
    def log_position(self) -> int:
        """The position of the last recorded event (0 for an empty store)."""

    @abstractmethod
    def events(self, *, start: int = 1) -> Iterator[tuple[int, DomainEvent]]:
        """Every recorded event in log order with its position, streamed."""

    @abstractmethod
    def stream(
        self, aggregate_id: UUID, *, up_to_version: int | None = None
    ) -> Sequence[DomainEvent]:
        """The events of one aggregate, in order; only up to ``up_to_version`` if given."""

    @abstractmethod
    def rebuild_read_models(self) -> None:
        """Drop the read models and project them again from the event log."""

    @abstractmethod
    def read_model_snapshot(self) -> dict[str, list[tuple[object, ...]]]:
        """The read models' rows, comparable between a live and a rebuilt store."""

    @abstractmethod
    def close(self) -> None: ...
