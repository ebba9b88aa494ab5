"""What each console page shows, read from the store (never written to).

Every read is bounded: sessions and runs come a page at a time by keyset, a session's
streams and a trace's through the timeline index, refusals through their own index
rows. Transcripts are shown as an operator reads another session's history: masked
by the redaction config (docs/adr/0018-console.md), and so is every other recorded text
a page shows (an exchange's messages in its diagram, a trace's steps, spawn tasks and
reports, refusal messages): the event summaries quote what was said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sessionwire.application.audit.timeline import TimelineEntry, timeline_entry
from sessionwire.application.audit.trace import Trace, TraceNode, trace_chain
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.forks import forked_window
from sessionwire.application.ports.session_read_model import (
    SessionPage,
    StoredSession,
    TranscriptWindow,
)
from sessionwire.application.ports.store import Store
from sessionwire.application.projection import REFUSALS_KEY
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.reader_view import reader_messages
from sessionwire.domain.redaction import Redactor
from sessionwire.domain.run import RunState
from sessionwire.domain.schedule import ScheduleState, schedule_view

PAGE_SIZE = 50
TRANSCRIPT_LIMIT = 200
REFUSALS_SHOWN = 200


@dataclass(frozen=True)
class SessionsPage:
    rows: list[StoredSession]
    next_after: str | None
    """The ``after`` parameter of the next page, None on the last."""


def cursor_text(session: StoredSession) -> str:
    return f"{session.state.updated_at}:{session.state.key}"


def parse_cursor(text: str | None) -> tuple[int, str] | None:
    if not text:
        return None
    millis, _, key = text.partition(":")
    try:
        at = int(millis)
    except ValueError:
        return None
    # A time the stores can hold (64-bit): a larger one is no cursor of ours (it was a 500).
    return (at, key) if -(2**63) <= at < 2**63 else None


def sessions_page(
    store: Store,
    *,
    search: str | None,
    status: str | None,
    kind: str | None,
    agent_id: str | None,
    after: str | None,
) -> SessionsPage:
    rows = store.session_page(
        SessionPage(
            limit=PAGE_SIZE + 1,
            status=status,
            kind=kind,
            agent_id=agent_id,
            search=search or None,
            after=parse_cursor(after),
        )
    )
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return SessionsPage(rows=rows, next_after=cursor_text(rows[-1]) if more and rows else None)


@dataclass
class SessionDetail:
    session: StoredSession
    messages: list[dict[str, Any]]
    exchanges: list[TimelineEntry] = field(default_factory=list)
    spawns: list[TimelineEntry] = field(default_factory=list)
    refusals: list[TimelineEntry] = field(default_factory=list)
    runs: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)
    """Each closed exchange's outcome (its closing reason), by exchange id."""


def masked_entry(entry: TimelineEntry, redactor: Redactor | None) -> TimelineEntry:
    """``entry`` with its summary and every string of its data masked."""
    if redactor is None:
        return entry
    return entry.model_copy(
        update={"summary": redactor.mask_text(entry.summary), "data": redactor.mask(entry.data)}
    )


def masked_trace(trace: Trace, redactor: Redactor | None) -> Trace:
    if redactor is None:
        return trace
    nodes = [
        node.model_copy(
            update={
                "what": redactor.mask_text(node.what),
                "status": redactor.mask_text(node.status),
                "entries": [masked_entry(entry, redactor) for entry in node.entries],
            }
        )
        for node in trace.nodes
    ]
    return trace.model_copy(update={"nodes": nodes})


def session_detail(store: Store, config: GatewayConfig, key: str) -> SessionDetail | None:
    """The session's transcript (masked as another session's) and what it took part in."""
    stored = store.session(key)
    if stored is None:
        return None
    texts = store.transcript(stored.id, limit=TRANSCRIPT_LIMIT, include_tools=True)
    if stored.state.forked_from is not None:
        # A fork: the lines it inherits (flagged forkedFrom) before its own.
        window = TranscriptWindow(limit=TRANSCRIPT_LIMIT, include_tools=True)
        texts = forked_window(store, stored, texts, None, window).lines
    redactor = config.redaction.redactor()
    messages = reader_messages(texts, redactor)
    detail = SessionDetail(session=stored, messages=messages)
    members = store.session_streams(key) or {}
    detail.runs = sum(1 for kind in members.values() if kind == "run")
    shown = [stream for stream, kind in members.items() if kind in {"exchange", "spawn", "refusal"}]
    chains: dict[UUID, Any] = {}
    for position, event in store.streams_events(shown):
        if isinstance(event, Exchange.ExchangeClosed):
            reason = redactor.mask_text(event.reason) if redactor else event.reason
            detail.outcomes[str(event.originator_id)] = reason
        if event.originator_version != 1:
            continue
        kind = members[event.originator_id]
        entry = masked_entry(
            timeline_entry(position, event, kind, chains),  # type: ignore[arg-type]
            redactor,
        )
        {"exchange": detail.exchanges, "spawn": detail.spawns, "refusal": detail.refusals}[
            kind
        ].append(entry)
    return detail


def trace_of(store: Store, trace_id: str, redactor: Redactor | None) -> Trace | None:
    try:
        return masked_trace(trace_chain(store, trace_id), redactor)
    except LookupError:
        return None


def exchange_entries(
    store: Store, exchange_id: UUID, redactor: Redactor | None
) -> tuple[TimelineEntry, list[TimelineEntry]]:
    """The exchange's first entry and every entry of it and its deliveries, in log order
    (masked); LookupError when there is no such exchange."""
    _, entries = _exchange_entries(store, exchange_id)
    shown = [masked_entry(entry, redactor) for entry in entries]
    return shown[0], shown


def _exchange_entries(store: Store, exchange_id: UUID) -> tuple[TimelineEntry, list[TimelineEntry]]:
    events = store.streams_events([exchange_id])
    if not events or type(events[0][1]).__name__ != "ExchangeOpened":
        raise LookupError(f"Exchange not found: {exchange_id}")
    opened = events[0][1]
    trace_id = getattr(opened, "trace_id", None)
    chains: dict[UUID, Any] = {}
    if trace_id:
        trace = trace_chain(store, trace_id)
        own = [
            node
            for node in trace.nodes
            if node.id == str(exchange_id)
            or (node.kind == "delivery" and node.parent_id == str(exchange_id))
        ]
        entries = sorted(
            (entry for node in own for entry in node.entries), key=lambda e: e.position
        )
        return entries[0], entries
    entries = [timeline_entry(p, e, "exchange", chains) for p, e in events]
    return entries[0], entries


@dataclass(frozen=True)
class RunRow:
    position: int
    id: str
    state: RunState


def runs_page(
    store: Store, *, status: str | None, before: int | None
) -> tuple[list[RunRow], int | None]:
    found = store.recent_work("run", limit=PAGE_SIZE + 1, status=status, before=before)
    rows = [
        RunRow(
            position=position, id=str(work.id), state=RunState.model_validate_json(work.state_json)
        )
        for position, work in found[:PAGE_SIZE]
    ]
    return rows, rows[-1].position if len(found) > PAGE_SIZE else None


def refusals(store: Store, redactor: Redactor | None) -> list[TimelineEntry]:
    """The latest refusals, newest first (through their index rows), masked."""
    ids = list((store.session_streams(REFUSALS_KEY) or {}).keys())
    chains: dict[UUID, Any] = {}
    entries = [timeline_entry(p, e, "refusal", chains) for p, e in store.streams_events(ids)]
    return [masked_entry(entry, redactor) for entry in reversed(entries)][:REFUSALS_SHOWN]


SCHEDULES_SHOWN = 500


def schedules(store: Store, redactor: Redactor | None) -> list[dict[str, Any]]:
    """The active schedules (decision 36), oldest first, as ``gw.schedules()`` lists
    them: read from their work rows, their messages masked."""
    views = []
    for stored in store.pending_work("schedule", ("active",))[:SCHEDULES_SHOWN]:
        view = schedule_view(ScheduleState.model_validate_json(stored.state_json))
        if redactor is not None:
            view["message"] = redactor.mask_text(str(view["message"]))
        views.append(view)
    return views


def tree_children(trace: Trace) -> dict[str | None, list[TraceNode]]:
    children: dict[str | None, list[TraceNode]] = {}
    for node in trace.nodes:
        children.setdefault(node.parent_id, []).append(node)
    return children
