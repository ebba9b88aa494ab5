"""One recorded event as the stream's public JSON: the audit timeline's entry (the same
summary, chain and payload) plus the sessions it belongs to.

A stream's kind and sessions are on its first event only (a run names its session in
``RunStarted``), so ``StreamDirectory`` keeps them per stream, read once from that first
event and shared by every subscriber of a gateway (bounded: the least recently used are
forgotten and read again when needed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

from sessionwire.application.audit.timeline import (
    NO_CHAIN,
    Chain,
    Kind,
    TimelineEntry,
    chain_of_first,
    timeline_entry,
)
from sessionwire.application.ports.event_log import EventLog
from sessionwire.application.projection import REFUSALS_KEY, TRACE_KEY_PREFIX, stream_members
from sessionwire.domain.base import DomainEvent
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session

DIRECTORY_SIZE = 10_000
# The session a stream is mainly about (its ``sessionKey``), by its first event's field.
PRIMARY_FIELD = {
    "run": "session_key",
    "exchange": "target_key",
    "spawn": "child_key",
    "refusal": "requester_key",
    "delivery": "session_key",
    "busy": "session_key",
    "yield": "session_key",
    "remote_call": "session_key",
    "push": "session_key",
    "schedule": "session_key",
}


@dataclass(frozen=True)
class StreamInfo:
    kind: Kind
    session_key: str | None
    sessions: tuple[str, ...]
    """Every session the stream belongs to (a run: where it ran and who asked), the
    audit timeline's membership."""
    chain: Chain


@dataclass(frozen=True)
class StreamEvent:
    """A decoded event ready for every subscriber: its public JSON and what filters read."""

    position: int
    public: dict[str, Any]
    sessions: tuple[str, ...]
    trace_id: str | None


def stream_info(first: DomainEvent) -> StreamInfo:
    if isinstance(first, Session.SessionOpened):
        return StreamInfo("session", first.key, (first.key,), NO_CHAIN)
    members = stream_members(first)
    if not members:
        return StreamInfo("session", None, (), NO_CHAIN)
    kind = cast(Kind, members[0].kind)
    sessions = tuple(
        m.session_key
        for m in members
        if not m.session_key.startswith(TRACE_KEY_PREFIX) and m.session_key != REFUSALS_KEY
    )
    primary = getattr(first, PRIMARY_FIELD.get(kind, ""), None) or (sessions or (None,))[0]
    return StreamInfo(kind, primary, sessions, chain_of_first(first))


class StreamDirectory:
    """Each stream's ``StreamInfo``, from its first event (LRU-bounded, shared)."""

    def __init__(self, size: int = DIRECTORY_SIZE) -> None:
        self.size = size
        self._known: OrderedDict[UUID, StreamInfo] = OrderedDict()
        # Pages are decoded on the store's reader threads, several at once.
        self._guard = threading.Lock()

    def info(self, event: DomainEvent, log: EventLog) -> StreamInfo:
        """The stream's info; ``log`` reads its first event when it is not known yet."""
        stream = event.originator_id
        with self._guard:
            known = self._known.get(stream)
            if known is not None:
                self._known.move_to_end(stream)
                return known
        if event.originator_version == 1:
            known = stream_info(event)
        else:
            first = log.stream(stream, up_to_version=1)
            known = stream_info(first[0] if first else event)
        with self._guard:
            self._known[stream] = known
            if len(self._known) > self.size:
                self._known.popitem(last=False)
        return known


def public_event(entry: TimelineEntry, stream: StreamInfo, run_id: str | None) -> dict[str, Any]:
    """The stable public shape (docs/events.md): camelCase, JSON-ready."""
    return {
        "position": entry.position,
        "type": entry.event,
        "kind": entry.kind,
        "sessionKey": stream.session_key,
        "sessions": list(stream.sessions),
        "streamId": entry.aggregate_id,
        "version": entry.version,
        "timestamp": entry.timestamp.isoformat(),
        "summary": entry.summary,
        "runId": run_id,
        "traceId": entry.trace_id,
        "parentRunId": entry.parent_run_id,
        "hops": entry.hops,
        "data": entry.data,
    }


def run_of(event: DomainEvent) -> str | None:
    """The run an event is about: a run's own events, or the run that wrote a message."""
    if type(event).__qualname__.split(".")[0] == Run.__name__:
        return str(event.originator_id)
    if isinstance(event, Session.MessageAppended) and event.provenance is not None:
        return event.provenance.run_id
    return None


def stream_event(
    position: int, event: DomainEvent, directory: StreamDirectory, log: EventLog
) -> StreamEvent:
    info = directory.info(event, log)
    entry = timeline_entry(position, event, info.kind, {event.originator_id: info.chain})
    return StreamEvent(
        position=position,
        public=public_event(entry, info, run_of(event)),
        sessions=info.sessions,
        trace_id=entry.trace_id,
    )
