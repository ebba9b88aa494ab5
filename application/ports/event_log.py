"""The event log: recording aggregates' new events (with their read models) and reading
the events back, by position or by stream."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from uuid import UUID

from sessionwire.domain.base import Aggregate, DomainEvent


class StoreConflict(Exception):
    """Another writer recorded an event at the same position first; reload and retry."""


class EventLog(ABC):
    @abstractmethod
    def save(self, *aggregates: Aggregate) -> None:
        """Record the aggregates' pending events and project them, in one transaction.

        Raises StoreConflict when a stream moved on since the aggregate was loaded;
        nothing is recorded then.
        """

    @abstractmethod
    def log_position(self) -> int:
        """The position of the last recorded event (0 for an empty store)."""

    @abstractmethod
    def sealed_position(self) -> int:
        """The sealed log's last position (0: nothing sealed yet). Positions in the sealed
        log are final: no record is ever given a lower one later (ADR 0016)."""

    @abstractmethod
    def records_after(self, position: int, limit: int) -> list[tuple[int, DomainEvent]]:
        """At most ``limit`` records whose sealed-log position is above ``position``, in
        that order, each with its position: what a reader in another process follows the
        log by, since it never misses a record that commits later."""

    @abstractmethod
    def events(self, *, start: int = 1) -> Iterator[tuple[int, DomainEvent]]:
        """Every recorded event from position ``start`` in log order, streamed."""

    @abstractmethod
    def stream(
        self, aggregate_id: UUID, *, up_to_version: int | None = None
    ) -> Sequence[DomainEvent]:
        """The events of one aggregate, in order; only up to ``up_to_version`` if given."""

    @abstractmethod
    def streams_events(self, ids: Sequence[UUID]) -> list[tuple[int, DomainEvent]]:
        """Every event of these streams with its log position, in log order (read through
        the streams, not the whole log)."""
