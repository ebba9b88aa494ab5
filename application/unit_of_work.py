"""The unit of work: load aggregates, change them, save them together, retry on conflict.

Every command and driver changes the store through it, so the retry lives in one place::

    async for uow in retrying(store, f"session {key}"):
        with uow:
            session = await uow.session(key)
            ...                       # change the aggregates it loaded
            await uow.commit()        # one transaction; a conflict starts a new attempt

Each attempt is a fresh ``UnitOfWork`` that reads the store again, so a change is always
decided on the state it is saved over. A block left without ``commit`` saves nothing.
Every read and the commit are awaited: the store works off the event loop (decision 23).
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar
from uuid import UUID

from pydantic import BaseModel
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.conflicts import MAX_SAVE_ATTEMPTS, back_off
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.domain.base import Aggregate
from sessionwire.domain.session import Session

A = TypeVar("A", bound=Aggregate)

log = library_logger("sessionwire.unit_of_work")


class UnitOfWork:
    """One attempt: the aggregates it loaded or was given, saved in one transaction."""

    def __init__(self, store: AsyncStore, *, attempt: int) -> None:
        self.store = store
        self.attempt = attempt
        """0 on the first attempt; more after conflicts (what an earlier one held is stale)."""
        self.committed = False
        self.conflicted = False
        self._seen: dict[UUID, Aggregate] = {}

    async def session(self, key: str) -> Session | None:
        """The session stored under canonical ``key``, to change; None if there is none."""
        stored = await self.store.session_for_update(key)
        if stored is None:
            return None
        return self.add(stored.to_aggregate())

    def loaded_session(self, key: str) -> Session | None:
        """The session under canonical ``key`` this attempt loaded already (to change it
        further: loading it again would drop what is pending on it), or None."""
        for aggregate in self._seen.values():
            if isinstance(aggregate, Session) and aggregate.state.key == key:
                return aggregate
        return None

    async def work(
        self, aggregate_id: UUID, cls: type[A], state_class: type[BaseModel]
    ) -> A | None:
        """The run, exchange or spawn with this id, to change; None if there is none."""
        stored = await self.store.work(aggregate_id)
        if stored is None:
            return None
        return self.add(stored.to_aggregate(cls, state_class))

    def add(self, aggregate: A) -> A:
        """Save ``aggregate`` (new, or loaded elsewhere) with the others on commit."""
        self._seen[aggregate.id] = aggregate
        return aggregate

    async def commit(self) -> None:
        """Save every aggregate that changed, in the order first seen, in one transaction.

        Raises StoreConflict when another writer moved one of them on; inside ``with``
        that ends this attempt and ``retrying`` starts the next.
        """
        changed = [aggregate for aggregate in self._seen.values() if aggregate.pending_events]
        try:
            await self.store.save(*changed)
        except StoreConflict:
            self.conflicted = True
            raise
        self.committed = True

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        # Only this attempt's own commit conflict is absorbed (the retry's cue); anything
        # else, a StoreConflict from elsewhere included, goes to the caller.
        return isinstance(error, StoreConflict) and self.conflicted


class Attempts:
    """Units of work, one per attempt, until one commits or ends without a conflict."""

    def __init__(self, store: AsyncStore, what: str, *, limit: int = MAX_SAVE_ATTEMPTS) -> None:
        self.store = store
        self.what = what
        self.limit = limit
        self._current: UnitOfWork | None = None

    def __aiter__(self) -> Attempts:
        return self

    async def __anext__(self) -> UnitOfWork:
        previous = self._current
        if previous is not None:
            if not previous.conflicted:
                raise StopAsyncIteration
            log.debug("save conflict, retrying", what=self.what, attempt=previous.attempt)
            self.store.telemetry.conflict_retried()
            if previous.attempt + 1 >= self.limit:
                raise StoreConflict(f"{self.what} kept changing under {self.limit} attempts")
            await back_off(previous.attempt)
        attempt = 0 if previous is None else previous.attempt + 1
        self._current = UnitOfWork(self.store, attempt=attempt)
        return self._current


def retrying(store: AsyncStore, what: str) -> Attempts:
    """Units of work on ``store`` until one saves; ``what`` names the change in errors."""
    return Attempts(store, what)
