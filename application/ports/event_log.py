"""The event log: recording aggregates' new events (with their read models) and reading
the events back, by position or by stream."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from uuid import UUID

from sessionwire.domain.base import DomainEvent
from sessionwire.domain.errors import SessionwireError


class StoreConflict(SessionwireError):
    """Another writer recorded an event at the same position first; reload and retry."""


class EventLog(ABC):
    """The log as the store's own threads and offline commands read it (blocking).

    Writing is not here: application code saves through ``AsyncStore.save`` (awaited,
    off the event loop, decision 23); the store adapter's blocking ``save`` serves its
    own threads and offline commands (imports).
    """

    def writes_in_flight(self) -> int:
        """Saves handed to a writer thread and not yet committed or failed."""
        return 0

    async def writes_settled(self) -> None:
        """Return once no save is in a writer thread (``wait_idle`` counts them as work)."""
        return

    @abstractmethod
    def log_position(self) -> int:
        """The position of the last recorded event (0 for an empty store)."""

    @abstractmethod
    def seal(self) -> int:
        """Give log positions to every record that is final now (a store whose one writer
        seals as it writes has none to give); how many were given."""

    @abstractmethod
    def sealed_position(self) -> int:
        """The sealed log's last position (0: nothing sealed yet). Positions in the sealed
        log are final: no record is ever given a lower one later (ADR 0016)."""

    @abstractmethod
    def records_after(self, position: int, limit: int) -> list[tuple[int, DomainEvent]]:
        """At most ``limit`` records whose sealed-log position is above ``position``, in
        that order, each with its position: what a reader in another process follows the
        log by, since it never misses a record that commits later."""

    def on_log_grew(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (from any thread, so it must only hand the news on) each time
        this process's own commits or seals may have added records to the sealed log;
        returns what removes it. Commits of other processes are not heard: see
        ``others_may_write``. The default never calls it."""
        return lambda: None

    def others_may_write(self) -> bool:
        """Can another process add records that ``on_log_grew`` never hears of (a shared
        database, or a file another process holds the writer's lock of)? A follower then
        has to look again from time to time."""
        return False

    @abstractmethod
    def events(self, *, start: int = 1) -> Iterator[tuple[int, DomainEvent]]:
        """Every recorded event from position ``start`` in log order, streamed."""

    @abstractmethod
    def stream(
        self, aggregate_id: UUID, *, up_to_version: int | None = None
    ) -> Sequence[DomainEvent]:
        """The events of one aggregate, in order; only up to ``up_to_version`` if given."""

    @abstractmethod
    def stream_hash(self, aggregate_id: UUID, version: int) -> bytes | None:
        """The stream hash the chain recorded for the aggregate's record stored at
        ``version`` (a batch of messages: at its last version); None when no chain row is
        there (no such record, or one written before the store kept a chain)."""

    @abstractmethod
    def streams_events(self, ids: Sequence[UUID]) -> list[tuple[int, DomainEvent]]:
        """Every event of these streams with its log position, in log order (read through
        the streams, not the whole log)."""
