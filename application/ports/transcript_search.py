"""Full-text search over the stored transcripts (``sessions_search``, decision 35).

One narrow port, answered by each backend from an index the database keeps with every
append, in the append's own transaction (ADR 0050): SQLite's FTS5 table fed by a trigger
on the events table, PostgreSQL's GIN expression index over the events' message text.
The index only proposes rows; the tool decides what a caller gets (the words checked
again on the text as the caller reads it, redacted), so every store answers alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from uuid import UUID

from sessionwire.application.ports.session_read_model import SessionQuery


@dataclass(frozen=True)
class TranscriptSearchQuery:
    """Message rows holding every one of ``words``, newest first, of the sessions the
    ``scopes`` hold (a row is searched when its session matches any of them, as
    ``list_listings`` would return it without a limit)."""

    words: tuple[str, ...]
    """Lower-cased words of letters and digits (``domain.transcript_search.words_of``)."""
    scopes: tuple[SessionQuery, ...]
    include_tools: bool
    limit: int
    """Rows per page."""
    before: int | None = None
    """Only rows older than this log position (the last page's last row): paging."""


@dataclass(frozen=True)
class TranscriptMatch:
    """A message row the index proposes: one message, or a batch of several."""

    position: int
    """The row's position in the log (its order: newer rows have larger ones)."""
    session_key: str
    stream: UUID
    """The session's stream."""
    version: int
    """The row's stream version (a batch's: its last message's)."""
    lines: tuple[tuple[str, str], ...]
    """(role, stored JSON line) of each message of the row, in order."""


class TranscriptSearch(ABC):
    @abstractmethod
    def search_transcripts(self, query: TranscriptSearchQuery) -> list[TranscriptMatch]:
        """One page of rows the index finds for ``query``, newest first, at most
        ``query.limit`` of them; fewer means no more."""

    @abstractmethod
    def messages_before(self, match: TranscriptMatch) -> int:
        """How many messages ``match``'s session's transcript holds below the match's
        stream version, tool results counted (the match's index in its transcript). The
        match names its session's key too: a store sharded by it reads one shard."""
