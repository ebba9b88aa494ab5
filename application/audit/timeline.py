"""Everything recorded about one session, in log order: its own events and those of the
runs, exchanges and spawns it took part in, each with a line a person can read.

A run belongs to the session it ran in and to the session that asked for it; an
exchange to its requester and its target; a spawn to its requester and its child
(application.projection.stream_members). Only their first events name the sessions, so
the membership is recorded in an index when they are created, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Literal, cast
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sessionwire.application.ports.store import Store
from sessionwire.application.projection import stream_members
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.base import DomainEvent, event_payload
from sessionwire.domain.busy_decision import BusyDecision
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.outbox import OutboundDelivery
from sessionwire.domain.push_request import PushRequest
from sessionwire.domain.remote_call import RemoteCall
from sessionwire.domain.run import Run
from sessionwire.domain.run_yield import RunYield
from sessionwire.domain.schedule import Schedule, from_ms
from sessionwire.domain.session import Session, session_uuid, single_appends
from sessionwire.domain.spawn import Spawn

Kind = Literal[
    "session",
    "run",
    "exchange",
    "spawn",
    "refusal",
    "delivery",
    "busy",
    "yield",
    "remote_call",
    "push",
    "schedule",
]
SNIPPET = 60


class TimelineEntry(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    position: int
    """Position in the store's whole event log."""
    timestamp: datetime
    kind: Kind
    aggregate_id: str
    version: int
    event: str
    summary: str
    data: dict[str, Any]
    trace_id: str | None = None
    """The chain this event belongs to (decision 17); None before causality was recorded."""
    parent_run_id: str | None = None
    """The run that caused the aggregate (or the message) this event is about."""
    hops: int | None = None


class Timeline(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    key: str
    entries: list[TimelineEntry]


def session_timeline(store: Store, key: str) -> Timeline:
    """The timeline of the session stored under canonical ``key``; LookupError if none.

    It reads the session's stream and the streams the index names for it (written with
    the events, like the read models), so its cost follows the session, not the log. A
    store recorded before the index existed is read whole, as before, until
    ``audit rebuild`` fills the index.
    """
    session_id = session_uuid(key)
    if store.session(key) is None:
        raise LookupError(f"Session not found: {key}")
    indexed = store.session_streams(key)
    if indexed is None:
        return Timeline(key=key, entries=list(_scanned(store, key)))
    members: dict[UUID, str] = {session_id: "session", **indexed}
    chains: dict[UUID, Chain] = {}
    entries = [
        timeline_entry(position, event, cast(Kind, members[event.originator_id]), chains)
        # A batch of messages shows as the single appends it stands for.
        for position, event in single_appends(store.streams_events(list(members)))
    ]
    return Timeline(key=key, entries=entries)


def _scanned(store: Store, key: str) -> Iterator[TimelineEntry]:
    """The timeline from one pass over the whole log (membership decided on creation)."""
    members: dict[UUID, Kind] = {session_uuid(key): "session"}
    chains: dict[UUID, Chain] = {}
    for position, event in single_appends(store.events()):
        kind = members.get(event.originator_id)
        if kind is None:
            joined = [m for m in stream_members(event) if m.session_key == key]
            if not joined:
                continue
            kind = members[event.originator_id] = cast(Kind, joined[0].kind)
        yield timeline_entry(position, event, kind, chains)


def timeline_entry(
    position: int, event: DomainEvent, kind: Kind, chains: dict[UUID, Chain]
) -> TimelineEntry:
    # An aggregate's chain is on its first event; a transcript line's on its provenance.
    if event.originator_version == 1:
        chains[event.originator_id] = chain_of_first(event)
    trace_id, parent_run_id, hops = _message_chain(event) or chains.get(
        event.originator_id, NO_CHAIN
    )
    return TimelineEntry(
        position=position,
        timestamp=event.timestamp,
        kind=kind,
        aggregate_id=str(event.originator_id),
        version=event.originator_version,
        event=type(event).__name__,
        summary=describe(event),
        data=event_payload(event),
        trace_id=trace_id,
        parent_run_id=parent_run_id,
        hops=hops,
    )


Chain = tuple[str | None, str | None, int | None]
"""(traceId, parentRunId, hops) of an aggregate, from its first event."""
NO_CHAIN: Chain = (None, None, None)


def chain_of_first(event: DomainEvent) -> Chain:
    """A run's, exchange's, spawn's or refusal's chain, as its first event records it."""
    if isinstance(event, Run.RunStarted | Spawn.SubagentSpawned) and event.trace_id:
        return (event.trace_id, event.parent_run_id, event.hops)
    if isinstance(event, Exchange.ExchangeOpened) and event.trace_id:
        return (event.trace_id, event.primary_run_id, event.hops)
    if isinstance(event, AccessRefusal.AccessRefused) and event.trace_id:
        return (event.trace_id, event.run_id, event.hops)
    if isinstance(event, BusyDecision.BusyDecided) and event.trace_id:
        return (event.trace_id, event.parent_run_id, event.hops)
    if isinstance(event, RunYield.RunYielded) and event.trace_id:
        return (event.trace_id, event.run_id, event.hops)
    return NO_CHAIN


def _message_chain(event: DomainEvent) -> Chain | None:
    """A transcript line's chain, from its provenance: the run that wrote it is its parent."""
    if isinstance(event, Session.MessageAppended) and event.provenance is not None:
        provenance = event.provenance
        return (provenance.trace_id, provenance.run_id, provenance.hops)
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
        if event.remote_caller:
            asked = f" for the remote caller {event.remote_caller}"
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
    if isinstance(event, Run.RunCancelled):
        return f"run cancelled: {event.reason}" if event.reason else "run cancelled"
    if isinstance(event, Run.RunSteered):
        return f"run steered by {event.steered_by}: {_snip(event.message)}"
    if isinstance(event, Run.RunSteerSent):
        return f"run steered run {event.steered_run_id} (hop {event.hops})"
    if isinstance(event, Run.RunInputRequested):
        return f"run waits for input: {_snip(event.prompt)}{_options(event.options)}"
    if isinstance(event, Run.RunInputProvided):
        by = event.by or "an operator"
        return f"input provided by {by}: {_snip(event.text)}"
    return type(event).__name__


def _options(options: list[str] | None) -> str:
    return f" (options: {', '.join(options)})" if options else ""


def _exchange(event: Any) -> str:
    if isinstance(event, Exchange.ExchangeOpened):
        return (
            f"exchange opened: {event.requester_key} -> {event.target_key} "
            f"(max {event.max_turns} turns)"
        )
    if isinstance(event, Exchange.RoundOneReplied):
        if event.failure:
            return f"target's run failed: {_snip(event.failure)}"
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


def _yield(event: Any) -> str:
    if isinstance(event, RunYield.RunYielded):
        who = f"run {event.run_id}" if event.run_id else event.session_key
        children = ", ".join(child.child_key for child in event.children)
        return f"{who} yielded, waiting for {event.wait_for} of: {children}"
    if isinstance(event, RunYield.YieldWoken):
        turn = f"turn refused: {event.refused}" if event.refused else f"turn {event.wake_run_id}"
        return (
            f"yield woken ({event.reason}): {len(event.reports)} report(s), "
            f"{len(event.still_running)} still running; {turn}"
        )
    return type(event).__name__


def _refusal(event: Any) -> str:
    if isinstance(event, AccessRefusal.AccessRefused):
        return (
            f"{event.tool} by {event.requester_key} refused ({event.check}, {event.rule}): "
            f"{event.message}"
        )
    return type(event).__name__


def _busy(event: Any) -> str:
    if isinstance(event, BusyDecision.BusyDecided):
        what = f"send from {event.requester_key} into busy {event.session_key} {event.decision}"
        cancelled = (
            f"; cancelled {', '.join(event.cancelled_run_ids)}" if event.cancelled_run_ids else ""
        )
        joined = f"; joined run {event.steered_run_id}" if event.steered_run_id else ""
        return f"{what} (run {event.in_flight_run_id} in flight; {event.rule}){cancelled}{joined}"
    return type(event).__name__


def _delivery(event: Any) -> str:
    if isinstance(event, OutboundDelivery.DeliveryQueued):
        # An entry queued after a failed first attempt, or (a push) before its first.
        why = "queued" if event.next_attempt_at is not None else "queued for retry"
        return f"{event.source} to {event.channel} {event.to} {why}: {_snip(event.message)}"
    if isinstance(event, OutboundDelivery.DeliveryAttemptFailed):
        return f"delivery attempt {event.attempt} failed: {event.error}; next attempt due"
    if isinstance(event, OutboundDelivery.DeliverySucceeded):
        return f"delivered at attempt {event.attempt}"
    if isinstance(event, OutboundDelivery.DeliveryAbandoned):
        return (
            f"delivery abandoned after {event.attempt} attempt(s): {event.reason} ({event.error})"
        )
    return type(event).__name__


def _remote_call(event: Any) -> str:
    if isinstance(event, RemoteCall.RemoteCallReceived):
        task = f" task {event.task_id}" if event.task_id else ""
        detail = f": {event.detail}" if event.detail else ""
        return (
            f"{event.protocol} {event.method} by {event.caller} to agent {event.agent_id}"
            f"{task}: {event.outcome}{detail}"
        )
    return type(event).__name__


def _push(event: Any) -> str:
    if isinstance(event, PushRequest.PushRequested):
        return f"push {event.config_id} to {event.url} requested for run {event.run_id}"
    if isinstance(event, PushRequest.PushQueued):
        return f"push queued in the outbox (delivery {event.delivery_id})"
    if isinstance(event, PushRequest.PushWithdrawn):
        return "push withdrawn"
    return type(event).__name__


def _schedule(event: Any) -> str:
    if isinstance(event, Schedule.ScheduleDefined | Schedule.ScheduleRedefined):
        when = event.cron and f"cron {event.cron!r} ({event.tz})"
        every = f"every {event.every_seconds}s"
        verb = "defined" if isinstance(event, Schedule.ScheduleDefined) else "redefined"
        return f"schedule {verb}: {when or every} into {event.session_key}"
    if isinstance(event, Schedule.ScheduleFired):
        due = from_ms(event.due_at).isoformat()
        late = " (late)" if event.late else ""
        outcome = f"refused: {event.refused}" if event.refused else f"run {event.run_id}"
        return f"schedule fired for {due}{late}: {outcome}"
    if isinstance(event, Schedule.ScheduleRemoved):
        return "schedule removed"
    return type(event).__name__


# Events are classes nested in their aggregate (Session.MessageAppended, ...); the
# aggregates share one Event base, so the enclosing class picks the describer.
_DESCRIBERS: dict[str, Callable[[Any], str]] = {
    "Session": _session,
    "Run": _run,
    "Exchange": _exchange,
    "Spawn": _spawn,
    "RunYield": _yield,
    "AccessRefusal": _refusal,
    "OutboundDelivery": _delivery,
    "BusyDecision": _busy,
    "RemoteCall": _remote_call,
    "PushRequest": _push,
    "Schedule": _schedule,
}


def describe(event: DomainEvent) -> str:
    """One line saying what the event records."""
    describer = _DESCRIBERS.get(type(event).__qualname__.split(".")[0])
    return describer(event) if describer else type(event).__name__
