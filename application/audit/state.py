"""A session as it stood at a past version or instant, rebuilt from its events alone.

Nothing here calls the agent runtime or a channel: replaying a session means folding
its recorded events (the runs' outcomes are already recorded as messages), so a past
state is exactly what the store said then, and rebuilding it has no side effects.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sessionwire.application.ports.store import Store
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.session import Session, SessionState, session_uuid
from sessionwire.domain.transcript import TranscriptMessage


class SessionNotRecorded(SessionwireError, LookupError):
    """No session is recorded under this key (or it did not exist yet at that point)."""


class SessionAsOf(BaseModel):
    """A session's row fields and transcript at one version of its stream."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    key: str
    version: int
    """The last event applied (1 = just opened)."""
    latest_version: int
    """The stream's version now, for comparison."""
    recorded_at: datetime
    """When the last applied event was recorded."""
    row: SessionState
    transcript: list[dict[str, Any]]
    """The messages recorded up to then, oldest first, in OpenClaw's raw format."""


def session_as_of(
    store: Store,
    key: str,
    *,
    version: int | None = None,
    at: datetime | None = None,
) -> SessionAsOf:
    """The session stored under canonical ``key`` at ``version`` or at instant ``at``.

    With neither, the current state. A version past the end is the current state; a
    version below 1 or an instant before the session opened raises SessionNotRecorded.
    """
    if version is not None and at is not None:
        raise ValueError("give a version or an instant, not both")
    if version is not None and version < 1:
        raise ValueError(f"versions start at 1, not {version}")
    if at is not None and at.tzinfo is None:
        raise ValueError("the instant needs a time zone (e.g. 2026-05-01T12:00:00Z)")
    session_id = session_uuid(key)
    current = store.session(key)
    if current is None:
        raise SessionNotRecorded(f"Session not found: {key}")
    if at is None:
        events = list(store.stream(session_id, up_to_version=version))
        if version is not None and (not events or events[-1].originator_version < version):
            # The version may be inside a batch of messages, stored at its last version.
            events += batch_holding(store, session_id, version)
    else:
        events = _until(_prefix_past(store, session_id, at, current.version), at)
        if not events:
            opened = store.stream(session_id, up_to_version=1)[0].timestamp
            raise SessionNotRecorded(
                f"Session {key} did not exist at {at.isoformat()} (opened {opened.isoformat()})"
            )
    session, transcript = replay_session(events, up_to_version=version, at=at)
    return SessionAsOf(
        key=key,
        version=session.version,
        latest_version=current.version,
        recorded_at=session.modified_on,
        row=session.state,
        transcript=transcript,
    )


FIRST_PREFIX = 64


def batch_holding(store: Store, session_id: UUID, version: int) -> list[DomainEvent]:
    """The batch event holding ``version`` (stored at a later version), if one does."""
    following = store.stream(session_id, up_to_version=version + MAX_BATCH_SPAN)
    for event in following:
        if event.originator_version > version:
            if isinstance(event, Session.MessagesAppended) and event.first_version <= version:
                return [event]
            return []
    return []


# A batch event holds at most this many messages (the gateway's record_many limit).
MAX_BATCH_SPAN = 10_000


def _prefix_past(
    store: Store, session_id: UUID, at: datetime, latest: int
) -> Sequence[DomainEvent]:
    """A prefix of the stream that reaches past ``at`` (or the whole stream).

    Prefixes grow fourfold, so an early instant in a long stream reads a few events, not
    the stream: at most about five times what it keeps, and 4/3 of the stream in all.
    """
    size = FIRST_PREFIX
    while True:
        events = store.stream(session_id, up_to_version=size)
        # The stream's latest version says when it was read whole: a batch of messages
        # is one event of several versions, so a short prefix does not.
        if size >= latest or (events and events[-1].timestamp > at):
            return events
        size *= 4


def _until(events: Sequence[DomainEvent], at: datetime) -> list[DomainEvent]:
    # A stream's timestamps never go backwards, so the first later one ends it.
    kept: list[DomainEvent] = []
    for event in events:
        if event.timestamp > at:
            if isinstance(event, Session.MessagesAppended):
                kept.append(event)  # its messages up to ``at`` count (replay_session)
            break
        kept.append(event)
    return kept


def _recorded_by(messages: Sequence[TranscriptMessage], at: datetime) -> int:
    """How many leading messages were recorded by ``at``: up to the first whose time,
    or an earlier message's, is later."""
    limit = at.timestamp() * 1000
    latest = 0
    for index, message in enumerate(messages):
        latest = max(latest, message.timestamp)
        if latest > limit:
            return index
    return len(messages)


def replay_session(
    events: Sequence[DomainEvent],
    *,
    up_to_version: int | None = None,
    at: datetime | None = None,
) -> tuple[Session, list[dict[str, Any]]]:
    """Fold a session's events (from its first) into the aggregate and its transcript;
    a batch of messages that reaches past ``up_to_version`` or ``at`` is applied only up
    to it (an imported batch's messages keep their own times: single appends of them
    would have been recorded at the latest time so far, which never goes backwards)."""
    if not events or not isinstance(events[0], Session.SessionOpened):
        raise ValueError("a session's events start with SessionOpened")
    session = events[0].mutate(None)
    assert isinstance(session, Session)
    transcript: list[dict[str, Any]] = []
    for event in events[1:]:
        assert isinstance(event, Aggregate.Event)
        if isinstance(event, Session.MessagesAppended):
            count = len(event.messages)
            if up_to_version is not None:
                count = min(count, up_to_version - event.first_version + 1)
            if at is not None and event.timestamp > at:
                count = min(count, _recorded_by(event.messages, at))
            if count <= 0:
                break
            event.apply_first(session, count)
            transcript.extend(
                message.model_dump(mode="json", exclude_none=True)
                for message in event.transcript_messages()[:count]
            )
            continue
        event.mutate(session)
        if isinstance(event, Session.MessageAppended):
            transcript.append(event.transcript_message().model_dump(mode="json", exclude_none=True))
    return session, transcript
