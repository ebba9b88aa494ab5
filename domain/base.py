"""Pydantic events on eventsourcing 9.5 aggregates.

eventsourcing 9.5 has no pydantic module of its own; this is the pattern its 9.5-era
examples use (see docs/adr/0002-event-store-and-read-models.md): events are frozen
pydantic models that also carry the library's mutate/init protocols, so aggregates keep
the library's shape while every event is validated when it is made and serialises to
plain JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Self
from uuid import UUID

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate
from pydantic import BaseModel, ConfigDict


class Immutable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class DomainEvent(Immutable):
    originator_id: UUID
    originator_version: int
    # Required: the domain reads no clock. Every command takes the time it happens
    # (``at``, from the gateway's clock), so virtual time in tests and replays is exact.
    timestamp: datetime


class Aggregate(BaseAggregate[UUID]):
    """Base of sessionwire's aggregates; events are pydantic models."""

    class Event(DomainEvent, CanMutateAggregate[UUID]):
        pass

    class Created(Event, CanInitAggregate[UUID]):
        originator_topic: str

    # Aggregates created by subclasses set their own topic-stable names.
    TOPIC: ClassVar[str]

    @classmethod
    def restore(
        cls, *, id: UUID, version: int, created_on: datetime, modified_on: datetime
    ) -> Self:
        """An aggregate at ``version`` without replaying its events.

        Used with a state that is kept current in the same transaction as the events
        (the session row), the way a snapshot is used: no correctness depends on it,
        because a stale version collides with the next event's primary key.
        """
        aggregate = object.__new__(cls)
        aggregate._id = id
        aggregate._version = version
        aggregate._created_on = created_on
        aggregate._modified_on = modified_on
        aggregate._pending_events = []
        return aggregate

    @classmethod
    def from_state(
        cls,
        *,
        id: UUID,
        version: int,
        state: Any,
        created_on: datetime,
        modified_on: datetime,
    ) -> Self:
        """An aggregate whose whole state is its ``state`` model, restored from a row."""
        aggregate = cls.restore(
            id=id, version=version, created_on=created_on, modified_on=modified_on
        )
        aggregate.state = state
        # As the row held it: a save writes only the row's columns that changed since.
        aggregate.restored_state = state
        return aggregate

    state: Any
    restored_state: Any = None


def event_payload(event: DomainEvent) -> dict[str, Any]:
    """An event as JSON-ready data without its stream coordinates."""
    return event.model_dump(mode="json", exclude={"originator_id", "originator_version"})
