"""The read models projected from session events: session rows and transcripts.

A projection turns events into row changes. The same function serves the live path (the
changes are written in the transaction that records the events) and a rebuild from the
log, so the two can be compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.session import Session, SessionState


@dataclass(frozen=True)
class SessionRow:
    id: UUID
    version: int
    created_on_iso: str
    modified_on_iso: str
    state: SessionState
    is_new: bool


@dataclass(frozen=True)
class TranscriptEntry:
    session: UUID
    seq: int
    role: str
    message_json: str


@dataclass
class ReadModelChanges:
    rows: dict[UUID, SessionRow] = field(default_factory=dict)
    transcript: list[TranscriptEntry] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rows or self.transcript)


def transcript_entries(events: Iterable[DomainEvent]) -> Iterator[TranscriptEntry]:
    for event in events:
        if isinstance(event, Session.MessageAppended):
            yield TranscriptEntry(
                session=event.originator_id,
                seq=event.originator_version,
                role=event.message.role,
                message_json=event.message.to_json(),
            )


def session_row(session: Session, *, is_new: bool) -> SessionRow:
    return SessionRow(
        id=session.id,
        version=session.version,
        created_on_iso=session.created_on.isoformat(),
        modified_on_iso=session.modified_on.isoformat(),
        state=session.state,
        is_new=is_new,
    )


def project(aggregates: Sequence[Aggregate], events: Sequence[DomainEvent]) -> ReadModelChanges:
    """Changes for events just triggered on ``aggregates`` (already applied to them)."""
    changes = ReadModelChanges(transcript=list(transcript_entries(events)))
    opened = {e.originator_id for e in events if isinstance(e, Session.SessionOpened)}
    for aggregate in aggregates:
        if isinstance(aggregate, Session):
            changes.rows[aggregate.id] = session_row(aggregate, is_new=aggregate.id in opened)
    return changes


class Replay:
    """Folds the event log back into read-model changes, one batch at a time."""

    def __init__(self) -> None:
        self._sessions: dict[UUID, Session] = {}

    def apply(self, events: Sequence[DomainEvent]) -> ReadModelChanges:
        touched: dict[UUID, Session] = {}
        for event in events:
            if isinstance(event, Session.SessionOpened):
                session = event.mutate(None)
                assert isinstance(session, Session)
                self._sessions[session.id] = session
                touched[session.id] = session
            elif isinstance(event, Session.Event):
                current = self._sessions[event.originator_id]
                event.mutate(current)
                touched[current.id] = current
        return project(list(touched.values()), events)
