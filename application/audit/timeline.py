"""Everything recorded about one session, in log order: its own events and those of the
runs, exchanges and spawns it took part in, each with a line a person can read.

A run belongs to the session it ran in and to the session that asked for it; an
exchange to its requester and its target; a spawn to its requester and its child. Only
their first events name the sessions, so one pass over the log decides membership when
an aggregate is created and keeps its later events.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sessionwire.application.ports.store import Store
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.base import DomainEvent, event_payload
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session, session_uuid
from sessionwire.domain.spawn import Spawn

Kind = Literal["session", "run", "exchange", "spawn", "refusal"]
SNIPPET = 60


class TimelineEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    position: int
    """Position in the store's whole event log."""
    timestamp: datetime
    kind: Kind
    aggregate_id: str
    version: int
    event: str
    summary: str
    data: dict[str, Any]


class Timeline(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    entries: list[TimelineEntry]


def session_timeline(store: Store, key: str) -> Timeline:
    """The timeline of the session stored under canonical ``key``; LookupError if none."""
    session_id = session_uuid(key)
    if store.session(key) is None:
        raise LookupError(f"Session not found: {key}")
    members: dict[UUID, Kind] = {session_id: "session"}
    entries: list[TimelineEntry] = []
    for position, event in store.events():
        kind = members.get(event.originator_id)
        if kind is None:
            kind = _joins(event, key)
            if kind is None:
                continue
            members[event.originator_id] = kind
        entries.append(
            TimelineEntry(
                position=position,
                timestamp=event.timestamp,
                kind=kind,
                aggregate_id=str(event.originator_id),
                version=event.originator_version,
                event=type(event).__name__,
                summary=describe(event),
                data=event_payload(event),
            )
        )
    return Timeline(key=key, entries=entries)


def _joins(event: DomainEvent, key: str) -> Kind | None:
    """The kind of aggregate this first event creates, when it involves session ``key``."""
    if isinstance(event, Run.RunStarted):
        return "run" if key in (event.session_key, event.requester_key) else None
    if isinstance(event, Exchange.ExchangeOpened):
        return "exchange" if key in (event.requester_key, event.target_key) else None
    if isinstance(event, Spawn.SubagentSpawned):
        return "spawn" if key in (event.requester_key, event.child_key) else None
    if isinstance(event, AccessRefusal.AccessRefused):
        return "refusal" if key in (event.requester_key, event.target_key) else None
    return None


def _snip(text: str | None) -> str:
    if text is None:
        return "(none)"
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1] + "…")


def _session(event: Any) -> str:
    if isinstance(event, Session.SessionOpened):
        parent = f", spawned by {event.spawned_by}" if event.spawned_by else ""
        return f"session {event.key} opened (agent {event.agent_id}{parent})"
    if isinstance(event, Session.MessageAppended):
        via = f" via {event.origin.channel}" if event.origin and event.origin.channel else ""
        owner = " (owner)" if event.sender_is_owner else ""
        return f"{event.message.role} message{via}{owner}: {_snip(event.message.text())}"
    if isinstance(event, Session.SessionPatched):
        changes = ", ".join(f"{name}={value!r}" for name, value in event.changes.items())
        return f"patched {changes}"
    if isinstance(event, Session.SessionImported):
        return f"row imported from {event.source}: {', '.join(sorted(event.fields))}"
    if isinstance(event, Session.SendCommandHandled):
        mode = event.mode or "no mode"
        outcome = "applied" if event.applied else event.reason
        return f"/send command ({mode}): {outcome}"
    if isinstance(event, Session.SessionArchived | Session.SessionDeleted):
        verb = "archived" if isinstance(event, Session.SessionArchived) else "deleted"
        return f"session {verb}: {event.reason}"
    return type(event).__name__


def _run(event: Any) -> str:
    if isinstance(event, Run.RunStarted):
        asked = f" for {event.requester_key}" if event.requester_key else ""
        turn = f" turn {event.turn}" if event.turn is not None else ""
        where = f"{event.step}{turn} run queued in {event.session_key}{asked}"
        return f"{where}: {_snip(event.message)}"
    if isinstance(event, Run.RunDispatched):
        return f"run dispatched to the agent runtime (attempt {event.attempt})"
    if isinstance(event, Run.RunCompleted):
        return f"run completed: {_snip(event.reply)}"
    if isinstance(event, Run.RunFailed):
        return f"run failed: {event.error}"
    if isinstance(event, Run.RunTimedOut):
        return f"run timed out after {event.timeout_seconds:g}s"
    return type(event).__name__


def _exchange(event: Any) -> str:
    if isinstance(event, Exchange.ExchangeOpened):
        return (
            f"exchange opened: {event.requester_key} -> {event.target_key} "
            f"(max {event.max_turns} turns)"
        )
    if isinstance(event, Exchange.RoundOneReplied):
        return f"target replied: {_snip(event.reply)}"
    if isinstance(event, Exchange.PingPongTurn):
        return f"turn {event.turn} ({event.speaker}): {_snip(event.reply)}"
    if isinstance(event, Exchange.ReplySkipped):
        return f"turn {event.turn} ({event.speaker}) ended the loop: {event.reason}"
    if isinstance(event, Exchange.LoopEnded):
        return f"loop ended: {event.reason}"
    if isinstance(event, Exchange.AnnounceRequested):
        return "announce step requested"
    if isinstance(event, Exchange.AnnounceReplied):
        return f"announce step replied: {_snip(event.reply)}"
    if isinstance(event, Exchange.AnnounceSkipped):
        return f"announce skipped: {event.reason}"
    if isinstance(event, Exchange.AnnounceDelivered):
        return f"announce delivered to {event.channel} {event.to}: {_snip(event.message)}"
    if isinstance(event, Exchange.AnnounceFailed):
        return f"announce delivery failed: {event.error}"
    if isinstance(event, Exchange.TurnBlocked):
        return (
            f"turn {event.turn} ({event.speaker}) blocked: send policy of "
            f"{event.session_key} denies ({event.rule})"
        )
    if isinstance(event, Exchange.AnnounceSuppressed):
        return (
            f"announce {event.stage} suppressed: send policy of {event.session_key} denies "
            f"({event.rule})"
        )
    if isinstance(event, Exchange.ExchangeClosed):
        return f"exchange closed: {event.reason}"
    return type(event).__name__


def _spawn(event: Any) -> str:
    if isinstance(event, Spawn.SubagentSpawned):
        return f"sub-agent {event.child_key} spawned by {event.requester_key}: {_snip(event.task)}"
    if isinstance(event, Spawn.SubagentRunStarted):
        return "sub-agent run started"
    if isinstance(event, Spawn.SubagentRunEnded):
        error = f" ({event.error})" if event.error else ""
        return f"sub-agent run ended: {event.outcome}{error}"
    if isinstance(event, Spawn.SubagentAnnounceRequested):
        return "sub-agent announce step requested"
    if isinstance(event, Spawn.SubagentAnnounceReplied):
        return f"sub-agent announce step replied: {_snip(event.reply)}"
    if isinstance(event, Spawn.SubagentAnnounced):
        where = f" to {event.channel} {event.to}" if event.channel else " (recorded only)"
        return f"sub-agent result announced{where}: {_snip(event.message)}"
    if isinstance(event, Spawn.SubagentAnnounceSuppressed):
        return (
            f"sub-agent report not delivered: send policy of {event.session_key} denies "
            f"({event.rule})"
        )
    if isinstance(event, Spawn.AnnounceSkipped):
        return f"sub-agent announce skipped: {event.reason}"
    if isinstance(event, Spawn.SubagentArchived):
        return "sub-agent session archived"
    if isinstance(event, Spawn.SubagentDeleted):
        return "sub-agent session deleted"
    return type(event).__name__


def _refusal(event: Any) -> str:
    if isinstance(event, AccessRefusal.AccessRefused):
        return (
            f"{event.tool} by {event.requester_key} refused ({event.check}, {event.rule}): "
            f"{event.message}"
        )
    return type(event).__name__


# Events are classes nested in their aggregate (Session.MessageAppended, ...); the
# aggregates share one Event base, so the enclosing class picks the describer.
_DESCRIBERS: dict[str, Callable[[Any], str]] = {
    "Session": _session,
    "Run": _run,
    "Exchange": _exchange,
    "Spawn": _spawn,
    "AccessRefusal": _refusal,
}


def describe(event: DomainEvent) -> str:
    """One line saying what the event records."""
    describer = _DESCRIBERS.get(type(event).__qualname__.split(".")[0])
    return describer(event) if describer else type(event).__name__
