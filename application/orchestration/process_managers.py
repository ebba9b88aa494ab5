"""What the exchange and spawn process managers share: one task per open aggregate that
asks it for its next step, takes the step, and asks again until there is none."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar
from uuid import UUID

from pydantic import BaseModel
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.domain.base import Aggregate

A = TypeVar("A", bound=Aggregate)

STEP_RETRY_SECONDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
"""How long a driver waits (on the gateway clock) before it tries a step again after an
error: a store that failed a save once (a dropped connection, a busy file) is got over
at once; one that keeps failing stalls the driver after about a minute, until a restart
resumes it (docs/testing.md, finding 11)."""


class ProcessManager(ABC, Generic[A]):
    kind: ClassVar[str]
    """The work kind its aggregates are stored under ("exchange", "spawn")."""
    pending_statuses: ClassVar[tuple[str, ...]]
    aggregate_class: type[A]
    state_class: type[BaseModel]

    def __init__(self, store: AsyncStore, in_flight: InFlight) -> None:
        self.store = store
        self.in_flight = in_flight
        self._tasks: dict[UUID, asyncio.Task[None]] = {}
        self.log = library_logger(f"sessionwire.{self.kind}s")

    def start(self, aggregate_id: UUID) -> None:
        task = self._tasks.get(aggregate_id)
        if task is None or task.done():
            # Outside any run: a driver started from inside a turn (a nested send) must
            # not inherit that turn's lane slot.
            task = self.in_flight.start(
                self._drive(aggregate_id),
                Owner(self.kind, str(aggregate_id)),
                context=outside_any_run(),
            )
            self._tasks[aggregate_id] = task
            # Finished drivers leave the table, so it holds only open work.
            task.add_done_callback(lambda done: self._forget(aggregate_id, done))

    def _forget(self, aggregate_id: UUID, task: asyncio.Task[None]) -> None:
        if self._tasks.get(aggregate_id) is task:
            del self._tasks[aggregate_id]

    async def resume(self) -> int:
        pending = await self.store.pending_work(self.kind, self.pending_statuses)
        for stored in pending:
            self.start(stored.id)
        return len(pending)

    async def load(self, aggregate_id: UUID) -> A | None:
        stored = await self.store.work(aggregate_id)
        return (
            None if stored is None else stored.to_aggregate(self.aggregate_class, self.state_class)
        )

    async def _drive(self, aggregate_id: UUID) -> None:
        bound = self.log.bind(**{f"{self.kind}_id": str(aggregate_id)})
        retries = iter(STEP_RETRY_SECONDS)
        while True:
            try:
                if await self._take_steps(aggregate_id, bound):
                    return
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = next(retries, None)
                if delay is None:
                    bound.exception(f"{self.kind} stalled; it resumes when the gateway restarts")
                    return
                # Each step loads the aggregate afresh: whatever the failed one
                # recorded or not, the next try takes the step that is still due.
                bound.warning(f"{self.kind} step failed; trying again", retry_in_seconds=delay)
                await self.in_flight.sleep(delay)

    async def _take_steps(self, aggregate_id: UUID, bound: Any) -> bool:
        """Take the aggregate's steps until none is left (True)."""
        while True:
            aggregate = await self.load(aggregate_id)
            if aggregate is None:
                return True
            step = aggregate.next_step()  # type: ignore[attr-defined]
            if step is None:
                return True
            bound = bound.bind(**self.log_context(aggregate))
            try:
                await self.take(aggregate, step)
            except StoreConflict:
                # Another gateway recorded this step first: look again.
                bound.debug(f"{self.kind} moved on elsewhere")

    @abstractmethod
    def log_context(self, aggregate: A) -> dict[str, Any]:
        """Session key and run id to bind on this aggregate's log lines."""

    @abstractmethod
    async def take(self, aggregate: A, step: Any) -> None:
        """Do one step and record its outcome."""
