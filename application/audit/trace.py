"""The chain of one trace: who caused what, as a tree in causal order.

A trace starts with a message sent from outside any run; its id is the first run's id
(contract §6 decision 17). Every run, exchange, spawn and refusal records its trace on
its first event, and the timeline index keeps a row per stream under ``trace:<id>``
(application.projection.trace_index_key), written with the events. So a trace reads its
own streams and nothing else: its cost follows the trace, not the log. A delivery from
the outbox names its exchange or spawn only; its stream id is derived from that source
(as the orchestration derives it), so it is read directly too.
"""

from __future__ import annotations

from typing import Literal, cast
from uuid import UUID, uuid5

from pydantic import BaseModel, ConfigDict
from sessionwire.application.audit.timeline import Chain, Kind, TimelineEntry, timeline_entry
from sessionwire.application.orchestration.exchanges import DELIVERY_NAMESPACE
from sessionwire.application.orchestration.spawns import ANNOUNCE_NAMESPACE
from sessionwire.application.ports.store import Store
from sessionwire.application.projection import stream_members, trace_index_key
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.base import DomainEvent
from sessionwire.domain.busy_decision import BusyDecision
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.outbox import OutboundDelivery, outbox_id_for
from sessionwire.domain.run import Run
from sessionwire.domain.run_yield import RunYield
from sessionwire.domain.session import single_appends
from sessionwire.domain.spawn import Spawn

NodeKind = Literal["run", "exchange", "spawn", "refusal", "delivery", "busy", "yield"]


class TraceNode(BaseModel):
    """One stream of the trace: a run, an exchange, a spawn, a refusal or a delivery."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    kind: NodeKind
    parent_id: str | None
    """The node that caused this one (None for the trace's first run)."""
    depth: int
    session_key: str
    """Where it happened: a run's session, an exchange's target, a spawn's child…"""
    hops: int | None
    what: str
    """Its first event, in words."""
    status: str
    """Its last event, in words."""
    entries: list[TimelineEntry]


class Trace(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    trace_id: str
    nodes: list[TraceNode]
    """Depth first, each node's children in the order they began."""


def trace_chain(store: Store, trace_id: str) -> Trace:
    """The trace ``trace_id``; LookupError when the store has no stream in it."""
    indexed = store.session_streams(trace_index_key(trace_id))
    ids = list(indexed) if indexed is not None else _scanned_ids(store, trace_id)
    if not ids:
        raise LookupError(f"Trace not found: {trace_id}")
    events = store.streams_events(ids)
    sources = [
        event
        for _, event in events
        if isinstance(event, Exchange.ExchangeOpened | Spawn.SubagentSpawned)
    ]
    delivery_ids = [_delivery_id(source) for source in sources]
    found = {event.originator_id for _, event in events}
    extra = store.streams_events([i for i in delivery_ids if i not in found])
    return _tree(trace_id, sorted([*events, *extra], key=lambda pair: pair[0]))


def _scanned_ids(store: Store, trace_id: str) -> list[UUID]:
    """A store recorded before the timeline index: one pass over the log (rebuild fills it)."""
    return [
        event.originator_id
        for _, event in store.events()
        if event.originator_version == 1
        and getattr(event, "trace_id", None) == trace_id
        and stream_members(event)
    ]


def _delivery_id(source: DomainEvent) -> UUID:
    namespace = (
        DELIVERY_NAMESPACE if isinstance(source, Exchange.ExchangeOpened) else (ANNOUNCE_NAMESPACE)
    )
    return outbox_id_for(str(uuid5(namespace, str(source.originator_id))))


_KINDS: dict[type[DomainEvent], NodeKind] = {
    Run.RunStarted: "run",
    Exchange.ExchangeOpened: "exchange",
    Spawn.SubagentSpawned: "spawn",
    AccessRefusal.AccessRefused: "refusal",
    OutboundDelivery.DeliveryQueued: "delivery",
    BusyDecision.BusyDecided: "busy",
    RunYield.RunYielded: "yield",
}


def _tree(trace_id: str, events: list[tuple[int, DomainEvent]]) -> Trace:
    firsts: dict[UUID, DomainEvent] = {}
    entries: dict[UUID, list[TimelineEntry]] = {}
    chains: dict[UUID, Chain] = {}
    for position, event in single_appends(events):
        if event.originator_version == 1:
            firsts[event.originator_id] = event
        kind = _KINDS.get(type(firsts[event.originator_id]), "run")
        entries.setdefault(event.originator_id, []).append(
            timeline_entry(position, event, cast(Kind, kind), chains)
        )
    spawned_runs = {
        event.run_id: str(stream)
        for stream, event in firsts.items()
        if isinstance(event, Spawn.SubagentSpawned)
    }
    ids = {str(stream) for stream in firsts}
    parents = {str(stream): _parent(event, spawned_runs, ids) for stream, event in firsts.items()}
    children: dict[str | None, list[str]] = {}
    for stream in firsts:  # firsts is in log order: children come out in causal order
        parent = parents[str(stream)]
        children.setdefault(parent if parent in ids else None, []).append(str(stream))
    nodes: list[TraceNode] = []

    def visit(node_id: str, depth: int) -> None:
        stream = UUID(node_id)
        first, own = firsts[stream], entries[stream]
        nodes.append(
            TraceNode(
                id=node_id,
                kind=_KINDS[type(first)],
                parent_id=parents[node_id] if parents[node_id] in ids else None,
                depth=depth,
                session_key=_where(first),
                hops=own[0].hops,
                what=own[0].summary,
                status=own[-1].summary,
                entries=own,
            )
        )
        for child in children.get(node_id, []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    return Trace(trace_id=trace_id, nodes=nodes)


def _parent(event: DomainEvent, spawned_runs: dict[str, str], ids: set[str]) -> str | None:
    """The stream that caused this one: a turn run its exchange, a sub-agent's run its
    spawn, an exchange its primary run, a delivery its source; else the causing run."""
    if isinstance(event, Run.RunStarted):
        own = str(event.originator_id)
        if own in spawned_runs:
            return spawned_runs[own]
        if event.exchange_id and event.exchange_id in ids and event.step != "primary":
            return event.exchange_id
        return event.parent_run_id
    if isinstance(event, Exchange.ExchangeOpened):
        return event.primary_run_id
    if isinstance(event, Spawn.SubagentSpawned):
        return event.parent_run_id
    if isinstance(event, AccessRefusal.AccessRefused):
        return event.run_id
    if isinstance(event, OutboundDelivery.DeliveryQueued):
        return event.source_id
    if isinstance(event, BusyDecision.BusyDecided):
        return event.parent_run_id
    if isinstance(event, RunYield.RunYielded):
        return event.run_id
    return None


def _where(event: DomainEvent) -> str:
    if isinstance(event, Run.RunStarted | OutboundDelivery.DeliveryQueued):
        return event.session_key
    if isinstance(event, Exchange.ExchangeOpened):
        return f"{event.requester_key} -> {event.target_key}"
    if isinstance(event, Spawn.SubagentSpawned):
        return event.child_key
    if isinstance(event, AccessRefusal.AccessRefused):
        return event.requester_key
    if isinstance(event, BusyDecision.BusyDecided | RunYield.RunYielded):
        return event.session_key
    return ""
