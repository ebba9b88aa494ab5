"""The read models projected from session events: session rows and transcripts.

A projection turns events into row changes. The same function serves the live path (the
changes are written in the transaction that records the events) and a rebuild from the
log, so the two can be compared.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not
from uuid import UUID

from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.busy_decision import BusyDecision
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.outbox import OutboundDelivery
from sessionwire.domain.push_request import PushRequest
from sessionwire.domain.remote_call import RemoteCall
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.run_yield import RunYield
from sessionwire.domain.schedule import Schedule
from sessionwire.domain.session import Session, SessionState, to_millis
from sessionwire.domain.spawn import Spawn


@dataclass(frozen=True)
class SessionRow:
    id: UUID
    version: int
    created_on_iso: str
    modified_on_iso: str
    state: SessionState
    is_new: bool
    changed: frozenset[str] | None = None
    """The state's fields that differ from the row the aggregate was restored from (a
    narrow UPDATE writes only those, ADR 0036); None: unknown, the whole row is written."""


@dataclass(frozen=True)
class TranscriptEntry:
    session: UUID
    seq: int
    role: str
    event: Session.MessageAppended

    @property
    def message_json(self) -> str:
        # Serialised only where a transcript table is written (PostgreSQL's v2 rows): on
        # storage v3 the event row is the transcript (ADR 0036), and nothing reads this.
        return self.event.transcript_message().to_json()


@dataclass(frozen=True)
class WorkRow:
    """A run or an exchange: looked up by id, and found again when still pending."""

    id: UUID
    kind: str
    status: str
    session_key: str
    version: int
    created_on_iso: str
    modified_on_iso: str
    state_json: str
    is_new: bool


@dataclass(frozen=True)
class RunRow:
    """A run as the runs read model (``sw_runs``) lists it: one row per run."""

    id: UUID
    created_at: int
    """When the run was recorded (queued), ms since the epoch: the listing's order."""
    state: RunState
    is_new: bool


@dataclass(frozen=True)
class RunLink:
    """The exchange or spawn a run belongs to, when its own events do not say (a send's
    primary run, a spawn's child and announce runs): recorded by the owner's events."""

    run_id: str
    session_key: str
    """The session the run runs in: its row's key with the run id (a store distributed by
    session key routes the link's update to that session's shard, ADR 0062)."""
    exchange_id: str | None = None
    spawn_id: str | None = None


def run_links(event: DomainEvent, owner: Aggregate | None) -> list[RunLink]:
    """The links ``event`` records; ``owner``, the aggregate it was triggered on."""
    if isinstance(event, Exchange.ExchangeOpened):
        # The primary run runs in the target's session.
        return [
            RunLink(
                run_id=event.primary_run_id,
                session_key=event.target_key,
                exchange_id=str(event.originator_id),
            )
        ]
    if isinstance(event, Spawn.SubagentSpawned):
        return [
            RunLink(
                run_id=event.run_id, session_key=event.child_key, spawn_id=str(event.originator_id)
            )
        ]
    if isinstance(event, Spawn.SubagentAnnounceRequested):
        # The announce run runs in the child's session too (``StartAnnounceRun``).
        if not isinstance(owner, Spawn):
            raise TypeError(f"{type(event).__name__} triggered on no spawn")
        return [
            RunLink(
                run_id=event.run_id,
                session_key=owner.state.child_key,
                spawn_id=str(event.originator_id),
            )
        ]
    return []


def run_row(run: Run, *, is_new: bool) -> RunRow:
    return RunRow(id=run.id, created_at=to_millis(run.created_on), state=run.state, is_new=is_new)


@dataclass(frozen=True)
class StreamMember:
    """A stream (run, exchange, spawn, refusal, busy decision) that took part in a session:
    the index that lets a session's timeline read its own streams instead of the whole log."""

    session_key: str
    stream_id: UUID
    kind: str


def stream_members(event: DomainEvent) -> list[StreamMember]:
    """The sessions the stream this first event creates belongs to (a run to the session
    it runs in and the one that asked; an exchange, a spawn, a refusal and a busy decision
    to both ends)."""
    keys: tuple[str | None, ...]
    if isinstance(event, Run.RunStarted):
        kind, keys = "run", (event.session_key, event.requester_key)
    elif isinstance(event, Exchange.ExchangeOpened):
        kind, keys = "exchange", (event.requester_key, event.target_key)
    elif isinstance(event, Spawn.SubagentSpawned):
        kind, keys = "spawn", (event.requester_key, event.child_key)
    elif isinstance(event, AccessRefusal.AccessRefused):
        kind, keys = "refusal", (event.requester_key, event.target_key)
    elif isinstance(event, OutboundDelivery.DeliveryQueued):
        kind, keys = "delivery", (event.session_key,)
    elif isinstance(event, BusyDecision.BusyDecided):
        kind, keys = "busy", (event.session_key, event.requester_key)
    elif isinstance(event, RunYield.RunYielded):
        kind, keys = "yield", (event.session_key,)
    elif isinstance(event, PushRequest.PushRequested):
        kind, keys = "push", (event.session_key,)
    elif isinstance(event, Schedule.ScheduleDefined):
        kind, keys = "schedule", (event.session_key,)
    elif isinstance(event, RemoteCall.RemoteCallReceived):
        caller = event.caller if event.caller.startswith("agent:") else None
        kind, keys = "remote_call", (event.session_key, caller)
    else:
        return []
    unique = dict.fromkeys(key for key in keys if key)
    trace_id = getattr(event, "trace_id", None)
    if trace_id:
        # The same index answers "which streams belong to this trace" (audit trace).
        unique[trace_index_key(trace_id)] = None
    if kind == "refusal":
        unique[REFUSALS_KEY] = None  # every refusal, for the console's refusals page
    return [
        StreamMember(session_key=key, stream_id=event.originator_id, kind=kind) for key in unique
    ]


TRACE_KEY_PREFIX = "trace:"
"""Index rows under ``trace:<traceId>`` list a trace's streams. Canonical session keys
start with ``agent:`` (or are a reserved word), so the two never meet in the one index."""


REFUSALS_KEY = "refusals:all"


def trace_index_key(trace_id: str) -> str:
    return f"{TRACE_KEY_PREFIX}{trace_id}"


TranscriptRow = tuple[str, int, str, str]
"""(session id in hex, seq, role, message JSON): a transcript row as a batch writes it."""


@dataclass
class ReadModelChanges:
    rows: dict[UUID, SessionRow] = field(default_factory=dict)
    transcript: list[TranscriptEntry] = field(default_factory=list)
    # Rows of batches of messages (MessagesAppended), written in one statement.
    transcript_rows: list[TranscriptRow] = field(default_factory=list)
    work: dict[UUID, WorkRow] = field(default_factory=dict)
    members: list[StreamMember] = field(default_factory=list)
    runs: dict[UUID, RunRow] = field(default_factory=dict)
    run_links: list[RunLink] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.rows
            or self.transcript
            or self.transcript_rows
            or self.work
            or self.members
            or self.runs
            or self.run_links
        )


def transcript_entries(events: Iterable[DomainEvent]) -> Iterator[TranscriptEntry]:
    for event in events:
        if isinstance(event, Session.MessageAppended):
            yield TranscriptEntry(
                session=event.originator_id,
                seq=event.originator_version,
                role=event.message.role,
                event=event,
            )


def batch_rows(events: Iterable[DomainEvent]) -> list[TranscriptRow]:
    """Transcript rows of the batches of messages among ``events``: one per message, at
    the seq a single append of it would have had, in the form the write takes as is."""
    rows: list[TranscriptRow] = []
    for event in events:
        if isinstance(event, Session.MessagesAppended):
            session, seq = event.originator_id.hex, event.first_version
            messages = event.transcript_messages()
            # One serialiser for the batch: model_dump_json's wrapper costs per call.
            to_json = messages[0].__pydantic_serializer__.to_json
            for message in messages:
                rows.append(
                    (session, seq, message.role, to_json(message, exclude_none=True).decode())
                )
                seq += 1
    return rows


def session_row(session: Session, *, is_new: bool) -> SessionRow:
    return SessionRow(
        id=session.id,
        version=session.version,
        created_on_iso=session.created_on.isoformat(),
        modified_on_iso=session.modified_on.isoformat(),
        state=session.state,
        is_new=is_new,
        changed=None if is_new else changed_fields(session.restored_state, session.state),
    )


def changed_fields(before: SessionState | None, after: SessionState) -> frozenset[str] | None:
    if before is None:
        return None
    if before is after:
        return frozenset()
    # Per append: a state is a copy of the last one with a few fields replaced
    # (``model_copy``), so most values are the very same objects. The models' own dicts
    # are compared by identity in C, and only the few fields that are not the same
    # object are compared by value (pydantic's attribute access per field, in Python,
    # cost more than the rest of the projection).
    old, new = before.__dict__, after.__dict__
    names = tuple(new)
    if tuple(old) != names:  # not copies of one another: field by field, by name
        return frozenset(name for name in names if old.get(name, _ABSENT) != new[name])
    return frozenset(
        name
        for name in compress(names, map(is_not, old.values(), new.values()))
        if old[name] != new[name]
    )


_ABSENT = object()


def project(aggregates: Sequence[Aggregate], events: Sequence[DomainEvent]) -> ReadModelChanges:
    """Changes for events just triggered on ``aggregates`` (already applied to them)."""
    if len(events) == 1 and len(aggregates) == 1:
        event, session = events[0], aggregates[0]
        if type(event) is Session.MessageAppended and isinstance(session, Session):
            # One message appended to a session that exists (the W1 append, issue 23):
            # its transcript entry and its row, without the general path's passes over
            # the events for members, batches and run links (none can come of it).
            appended = ReadModelChanges(transcript=list(transcript_entries(events)))
            appended.rows[session.id] = session_row(session, is_new=False)
            return appended
    changes = ReadModelChanges(
        transcript=list(transcript_entries(events)),
        transcript_rows=batch_rows(events),
        members=[
            member
            for event in events
            if isinstance(event, Aggregate.Created)
            for member in stream_members(event)
        ],
    )
    owners = {aggregate.id: aggregate for aggregate in aggregates}
    changes.run_links = [
        link for event in events for link in run_links(event, owners.get(event.originator_id))
    ]
    created = {e.originator_id for e in events if isinstance(e, Aggregate.Created)}
    for aggregate in aggregates:
        is_new = aggregate.id in created
        if isinstance(aggregate, Session):
            changes.rows[aggregate.id] = session_row(aggregate, is_new=is_new)
        elif isinstance(aggregate, Run):
            changes.work[aggregate.id] = work_row(
                aggregate, "run", aggregate.state.status, aggregate.state.session_key, is_new
            )
            changes.runs[aggregate.id] = run_row(aggregate, is_new=is_new)
        elif isinstance(aggregate, Spawn):
            changes.work[aggregate.id] = work_row(
                aggregate, "spawn", aggregate.state.status, aggregate.state.child_key, is_new
            )
        elif isinstance(aggregate, Exchange):
            changes.work[aggregate.id] = work_row(
                aggregate, "exchange", aggregate.state.status, aggregate.state.target_key, is_new
            )
        elif isinstance(aggregate, RunYield):
            changes.work[aggregate.id] = work_row(
                aggregate, "yield", aggregate.state.status, aggregate.state.session_key, is_new
            )
        elif isinstance(aggregate, OutboundDelivery):
            changes.work[aggregate.id] = work_row(
                aggregate, "delivery", aggregate.state.status, aggregate.state.session_key, is_new
            )
        elif isinstance(aggregate, PushRequest):
            changes.work[aggregate.id] = work_row(
                aggregate, "push", aggregate.state.status, aggregate.state.session_key, is_new
            )
        elif isinstance(aggregate, Schedule):
            # Active schedules are pending work: every gateway resumes and drives them,
            # and ``gw.schedules()`` lists them (decision 36).
            changes.work[aggregate.id] = work_row(
                aggregate, "schedule", aggregate.state.status, aggregate.state.session_key, is_new
            )
    return changes


def work_row(
    aggregate: Aggregate, kind: str, status: str, session_key: str, is_new: bool
) -> WorkRow:
    return WorkRow(
        id=aggregate.id,
        kind=kind,
        status=status,
        session_key=session_key,
        version=aggregate.version,
        created_on_iso=aggregate.created_on.isoformat(),
        modified_on_iso=aggregate.modified_on.isoformat(),
        state_json=aggregate.state.model_dump_json(),
        is_new=is_new,
    )


class ReplayFailed(SessionwireError):
    """An event that cannot be applied where the log puts it (``index`` in its batch)."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.index = index


class Replay:
    """Folds the event log back into read-model changes, one batch at a time.

    By default every aggregate seen so far stays in memory in its latest state (sessions,
    runs and exchanges are small: transcripts are not kept here). With ``keep``, only the
    ``keep`` most recently used stay, and ``load`` restores the others from the rows
    already written: the caller writes each batch's changes before the next ``apply``.
    """

    def __init__(
        self,
        *,
        keep: int | None = None,
        load: Callable[[UUID], Aggregate | None] | None = None,
    ) -> None:
        self._aggregates: OrderedDict[UUID, Aggregate] = OrderedDict()
        self._keep = keep
        self._load = load

    def apply(self, events: Sequence[DomainEvent]) -> ReadModelChanges:
        if self._keep is not None:
            # Only now: the previous batch's rows, which ``load`` reads, are written.
            while len(self._aggregates) > self._keep:
                self._aggregates.popitem(last=False)
        touched: dict[UUID, Aggregate] = {}
        for index, event in enumerate(events):
            try:
                aggregate = self._mutate(event)
            except Exception as error:
                raise ReplayFailed(index, error) from error
            self._aggregates[aggregate.id] = aggregate
            self._aggregates.move_to_end(aggregate.id)
            touched[aggregate.id] = aggregate
        return project(list(touched.values()), events)

    def _mutate(self, event: DomainEvent) -> Aggregate:
        if isinstance(event, Aggregate.Created):
            created = event.mutate(None)
            if not isinstance(created, Aggregate):
                raise TypeError(f"{type(event).__name__} created no aggregate")
            return created
        aggregate = self._current(event.originator_id)
        if not isinstance(event, Aggregate.Event):
            raise TypeError(f"{type(event).__name__} is not an aggregate event")
        event.mutate(aggregate)
        return aggregate

    def _current(self, aggregate_id: UUID) -> Aggregate:
        found = self._aggregates.get(aggregate_id)
        if found is None and self._load is not None:
            found = self._load(aggregate_id)
        if found is None:
            raise LookupError(f"no aggregate {aggregate_id} before its event")
        return found
