"""The sessions read model: session rows and their transcripts, as the tools read them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

if TYPE_CHECKING:
    # The session aggregate's models are built when a row is read whole: a listing reads
    # its rows' columns only (``SessionListing``) and never builds them (issue 38 item 7).
    from sessionwire.domain.session import Session, SessionState


@dataclass(frozen=True)
class StoredSession:
    """A session row as the read model holds it, with the stream version it reflects."""

    id: UUID
    version: int
    created_on: datetime
    modified_on: datetime
    state: SessionState

    def to_aggregate(self) -> Session:
        from sessionwire.domain.session import Session

        return Session.from_state(
            id=self.id,
            version=self.version,
            state=self.state,
            created_on=self.created_on,
            modified_on=self.modified_on,
        )


class SessionListing(NamedTuple):
    """A session row as ``sessions_list`` shows and filters it, read from the row's columns
    (ADR 0036 §4): no ``SessionState`` is validated per row. The field names and values
    are ``SessionState``'s; the fields a listing never shows (lineage, counts, the busy
    override) are left out."""

    stream: str
    """The session's stream id, as hex (``UUID(stream)``: its transcript)."""
    key: str
    session_id: str
    agent_id: str
    spawned_by: str | None
    status: str
    label: str | None
    updated_at: int
    channel: str | None
    chat_type: str | None
    display_name: str | None
    last_channel: str | None
    last_to: str | None
    last_account_id: str | None
    model: str | None
    total_tokens: int | None
    context_tokens: int | None
    thinking_level: str | None
    verbose_level: str | None
    system_sent: bool
    aborted_last_run: bool
    send_policy: str | None

    @classmethod
    def of(cls, stored: StoredSession) -> SessionListing:
        """The listing of a session already read whole."""
        state = stored.state
        return cls(
            stream=stored.id.hex,
            **{name: getattr(state, name) for name in cls._fields if name != "stream"},
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
    keys: frozenset[str] | None = None
    """Only these sessions (a visibility scope's spawn tree); None: any."""
    spawned_by_any: frozenset[str] | None = None
    """Only sessions spawned by one of these (a level of a spawn tree); None: any."""


@dataclass(frozen=True)
class SessionPage:
    """One page of sessions for people browsing (the console), newest first.

    Paging is by keyset: ``after`` is the (updatedAt, key) of the last row of the page
    before, so a page costs the same at row 100,000 as at row 1.
    """

    limit: int
    status: str | None = "active"
    """None: every status."""
    kind: str | None = None
    agent_id: str | None = None
    search: str | None = None
    """A piece of the key or of the label, any case."""
    after: tuple[int, str] | None = None


@dataclass(frozen=True)
class TranscriptPage:
    """A window of a session's transcript, counted back from its newest message."""

    messages: list[str]
    """The window's messages as JSON texts, oldest first."""
    total: int
    """How many messages the view holds (with or without tool results, as asked)."""


@dataclass(frozen=True)
class ViewWanted:
    """How the reader of a window reads it, for a store that keeps history views rendered
    when messages are written (ADR 0054)."""

    masked: bool
    """Another session reads it: the masked view (the session's own view otherwise)."""
    stamp: str
    """``view_stamp`` of the reader's redactor: a view rendered under another is not used."""
    max_bytes: int
    """A window whose JSON array is larger is not rendered: the reader drops its oldest
    messages (``sessions_history``'s byte cap)."""


@dataclass(frozen=True)
class RenderedWindow:
    """A window as its reader reads it, from the stored views: one JSON array."""

    messages: str
    """The window's messages as one JSON array text, oldest first."""
    count: int
    size: int
    """The array's length in bytes (UTF-8)."""
    redacted: bool
    """Masking changed a message of it."""
    exact: bool
    """Only the standard library's ``json.loads`` reads it exactly (a long number)."""
    total: int | None = None
    """The view's size, for a window with an ``offset``."""


@dataclass(frozen=True)
class TranscriptWindow:
    """Which of a session's messages to read: ``transcript``'s newest ``limit`` when
    ``offset`` is None, else ``transcript_page``'s window."""

    limit: int
    include_tools: bool
    offset: int | None = None
    view: ViewWanted | None = None
    """Set: the window rendered from the stored views when every message of it has one
    rendered for this reader (``SessionTranscript.rendered``)."""


@dataclass(frozen=True)
class SessionTranscript:
    """A session's row and, when the reader wanted them, messages of its transcript."""

    session: StoredSession | None
    messages: list[str] | None = None
    """None when the session was not found or its messages were not wanted."""
    total: int | None = None
    """The view's size, for a window with an ``offset``."""
    rendered: RenderedWindow | None = None
    """The window as the reader reads it, when the window asked for it (``view``) and the
    store had it; ``messages`` is then None."""


class SessionReadModel(ABC):
    @abstractmethod
    def session(self, key: str) -> StoredSession | None:
        """The session stored under a canonical key, whatever its status."""

    def session_for_update(self, key: str) -> StoredSession | None:
        """The session to change next; may come from a cache of this process's own writes.

        A stale entry is harmless: the save collides on the stream position and raises
        StoreConflict, which drops the entry, so the retry reads the store.
        """
        return self.session(key)

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
    def session_page(self, page: SessionPage) -> list[StoredSession]:
        """Sessions of any status, newest ``updatedAt`` first (then key), filtered."""

    @abstractmethod
    def list_listings(self, query: SessionQuery) -> list[SessionListing]:
        """``list_sessions`` as listings."""

    @abstractmethod
    def listing_page(self, page: SessionPage) -> list[SessionListing]:
        """``session_page`` as listings."""

    @abstractmethod
    def listings_by_label(self, label: str) -> list[SessionListing]:
        """``sessions_by_label`` as listings."""

    @abstractmethod
    def agent_ids(self) -> list[str]:
        """Every agent id that has an active session."""

    @abstractmethod
    def transcript(self, session: UUID, *, limit: int, include_tools: bool) -> list[str]:
        """The last ``limit`` messages of a session as JSON texts, oldest first."""

    @abstractmethod
    def transcript_page(
        self, session: UUID, *, offset: int, limit: int, include_tools: bool
    ) -> TranscriptPage:
        """The ``limit`` messages that come before the newest ``offset`` ones, oldest first,
        with the view's size read in the same transaction. Past the end (any ``offset`` of
        at least ``total``, however large) the window is empty."""

    @abstractmethod
    def session_transcript(
        self, key: str, window: TranscriptWindow, wanted: Callable[[StoredSession], bool]
    ) -> SessionTranscript:
        """The session stored under ``key`` and, when ``wanted`` says yes to it, the
        ``window`` of its transcript, in one read transaction: a tool reads both in one
        trip to a reader thread, its access check (``wanted``) in between."""

    @abstractmethod
    def session_streams(self, key: str) -> dict[UUID, str] | None:
        """The runs, exchanges, spawns and refusals session ``key`` took part in (id ->
        kind), from the index written with the events; None when the store predates it."""
