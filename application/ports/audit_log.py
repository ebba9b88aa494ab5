"""The audit port: the event log as stored (bytes and hash chain), streamed in log order.

The audit commands (verify, export, import, rebuild) read and write the store through
this port only; every method streams, holding one page of records at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from sessionwire.domain.errors import SessionwireError

if TYPE_CHECKING:
    # Named in signatures only: the store imports this port to read its log, and a store
    # opened to list sessions loads no checkpoint code (issue 38 item 7).
    from sessionwire.domain.base import DomainEvent
    from sessionwire.domain.checkpoint import Checkpoint, ShardHead, StreamHead
    from sessionwire.domain.hash_chain import ChainLink, RecordContent


@dataclass(frozen=True)
class StoredRecord:
    """One stored event at its position in the log."""

    notification_id: int
    content: RecordContent


@dataclass(frozen=True)
class CheckedRecord:
    """A stored event with what verifying it needs: its link and its predecessor's."""

    record: StoredRecord
    link: ChainLink | None  # the chain row at this log position
    previous_stream_hash: bytes | None  # the chain row of the same stream's previous version
    previous_position: int | None  # where that previous version's event is in the log


@dataclass(frozen=True)
class LogBounds:
    last_event: int  # the last event's position (0: no events)
    last_link: int  # the last chained position (0: no chain)
    first_link: int | None  # where the chain starts; earlier events are unchained
    sealed: int = 0  # the sealed log's length: its last log_seq
    unsealed: int = 0  # chain rows not sealed yet (PostgreSQL: written by a transaction
    # that was in flight, or committed since, when the log was last sealed)


@dataclass(frozen=True)
class SealedHead:
    """The sealed log's head: how many records it holds, the last one's log hash, and
    that record's position in the events table."""

    size: int
    log_hash: bytes
    position: int


@dataclass
class TableDifference:
    """Rows of one read-model table that a rebuild added, removed or changed."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.added + self.removed + self.changed


class ImportRefused(SessionwireError):
    """An import into a store that already holds events."""


class ImportRejected(SessionwireError, ValueError):
    """A record the store cannot take (not one of its event topics, state it cannot read,
    a stream out of order); the message names the line of the file it came from."""


@dataclass(frozen=True)
class LoadedRecord:
    """A record read from an export, with the line it was read from."""

    line: int
    record: StoredRecord
    link: ChainLink | None


class AuditLog(ABC):
    @abstractmethod
    def seal(self) -> int:
        """Seal every record that is final (none on a store that seals as it writes);
        the audit commands call it before they read the head. Returns how many."""

    @abstractmethod
    def log_bounds(self) -> LogBounds: ...

    @abstractmethod
    def checked_records(self, *, stop: int) -> Iterator[CheckedRecord]:
        """Events up to position ``stop`` in log order, each with its chain rows."""

    @abstractmethod
    def chain_links(self, *, stop: int) -> Iterator[ChainLink]:
        """Chain rows up to position ``stop`` in position order (rows whose event is gone
        too)."""

    @abstractmethod
    def sealed_links(self, *, stop: int) -> Iterator[ChainLink]:
        """Sealed chain rows up to ``log_seq`` ``stop``, in the sealed log's order."""

    @abstractmethod
    def stored_records(self, bounds: LogBounds) -> Iterator[tuple[StoredRecord, ChainLink | None]]:
        """Events in log order with their links, as stored: those from before the chain
        began, the sealed log up to ``bounds.sealed``, then the unsealed tail by position
        (their links without a log hash) up to ``bounds.last_event``."""

    @abstractmethod
    def sealed_head(self, size: int | None = None) -> SealedHead | None:
        """The head of the sealed log, or its head when it held ``size`` records (None:
        nothing chained yet, or fewer records)."""

    @abstractmethod
    def stream_heads(self, head: SealedHead) -> list[StreamHead]:
        """Every stream's last version within the sealed log up to ``head``, sorted by
        originator id (the checkpoint's Merkle leaves)."""

    def shard_heads(self, size: int) -> list[ShardHead]:
        """Each shard's head when the sealed log held ``size`` records (its id, its own
        log's size and last shard hash), sorted by shard id: a version-4 checkpoint's
        leaves (ADR 0067). Empty on a store of one log, as here."""
        return []

    @abstractmethod
    def record_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep a signed checkpoint in the store."""

    @abstractmethod
    def checkpoints(self, *, limit: int = 1) -> list[Checkpoint]:
        """The latest recorded checkpoints, newest first."""

    @abstractmethod
    def session_records(
        self, session_key: str
    ) -> list[tuple[StoredRecord, ChainLink | None]] | None:
        """The events of the session's stream and of the streams the timeline index
        (ADR 0015) lists for it, with their links, in no set order; None when the store
        has no index for it (recorded before the index: scan the log instead)."""

    @abstractmethod
    def session_keys(self) -> list[str]:
        """Every session's key, sorted (the checkpoint signs each one's membership)."""

    @abstractmethod
    def decode(self, record: StoredRecord) -> DomainEvent:
        """The domain event a stored record holds."""

    @abstractmethod
    def transcript_rows(self, session: UUID, first: int, last: int) -> dict[int, str]:
        """The transcript read model's messages of ``session`` with seq in [first, last],
        by seq (what an altered batch of messages is compared with, to name the line)."""

    @abstractmethod
    def stream_names(self, ids: Iterable[UUID]) -> dict[UUID, str]:
        """Session keys of the streams the read models know (sessions, runs, exchanges)."""

    @abstractmethod
    def import_records(self, records: Iterable[LoadedRecord]) -> int:
        """Write records at their own positions into an empty store and project its read
        models from them, all in one transaction: any failure leaves the store as it was.

        Raises ImportRefused when the store has events, ImportRejected for a record it
        cannot read (an unknown topic is never resolved); an exception from ``records``
        propagates, with nothing written."""

    @abstractmethod
    def rebuild_and_compare(self, *, replace: bool) -> dict[str, TableDifference]:
        """Project the log into fresh read models, compare them with the live ones and
        (with ``replace``) make them the live ones."""
