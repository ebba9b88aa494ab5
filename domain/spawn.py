"""The sub-agent spawn: a child session's life from task to archive, as a state machine.

Spawned → the child's task run ends (ok, error or timeout) → an announce step runs in
the child → its normalised report is delivered to the requester (or skipped) → the child
is deleted at once (``cleanup: "delete"``), archived ``archiveAfterMinutes`` after its
run ended, or kept for good when archiving is off (the spawn then closes as "kept").
The archive time is part of the recorded state, so a restarted gateway keeps it:
restarted before it, it waits; after it, it archives at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict
from sessionwire.domain.agent_to_agent import AnnounceTarget, is_announce_skip
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality
from sessionwire.domain.session import to_millis
from sessionwire.domain.subagent_announce import (
    SUBAGENT_ANNOUNCE_MESSAGE,
    announce_step_context,
)
from sessionwire.domain.transcript import Usage

SPAWN_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/spawns")

Cleanup = Literal["keep", "delete"]
Outcome = Literal["ok", "error", "timeout", "cancelled"]


def spawn_id_for(child_key: str) -> UUID:
    return uuid5(SPAWN_NAMESPACE, child_key)


class SpawnState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    spawn_id: str
    run_id: str
    child_key: str
    agent_id: str
    requester_key: str
    requester_display: str
    task: str
    label: str | None = None
    model: str | None = None
    run_timeout_seconds: float = 0
    cleanup: Cleanup = "keep"
    archive_after_minutes: float | None = 60
    trace_id: str | None = None
    parent_run_id: str | None = None
    hops: int = 0
    depth: int = 1
    """How deep the child is: 1 for a child of a top-level session (decision 30)."""
    route_captured: bool = False
    report_channel: str | None = None
    report_to: str | None = None
    report_account_id: str | None = None
    report_thread_id: str | None = None
    awaited_run_id: str | None = None
    """The child's turn that ends its task: the task run, or the turn a yield woke
    (a yielding sub-agent pauses; it reports once its woken turn ends)."""
    yielded_run_id: str | None = None
    """The child's turn that yielded last (its yield wakes ``awaited_run_id``)."""
    status: Literal["running", "announcing", "waiting_archive", "closed"] = "running"
    outcome: Outcome | None = None
    error: str | None = None
    started_at: int | None = None
    ended_at: int | None = None
    usage: Usage | None = None
    announce_run_id: str | None = None
    announce_done: bool = False
    announce_reply: str | None = None
    announced: bool = False
    archive_at: int | None = None
    closed_as: Literal["archived", "deleted", "kept"] | None = None

    @property
    def reported(self) -> bool:
        """Its report is made (announced or skipped), or it closed without one."""
        return self.announced or self.status == "closed"


@dataclass(frozen=True)
class AwaitChildRun:
    run_id: str


@dataclass(frozen=True)
class StartAnnounceRun:
    run_id: UUID
    session_key: str
    message: str
    context: str
    causality: Causality | None = None


@dataclass(frozen=True)
class Announce:
    """Deliver the report, or skip it when the child answered ANNOUNCE_SKIP."""

    reply: str | None
    skip: bool


@dataclass(frozen=True)
class ArchiveAt:
    """Archive the child once the clock reaches ``due_ms`` (at once if it has)."""

    due_ms: int


@dataclass(frozen=True)
class DeleteChild:
    pass


SpawnStep = AwaitChildRun | StartAnnounceRun | Announce | ArchiveAt | DeleteChild | None


class Spawn(Aggregate):
    state: SpawnState

    class SubagentSpawned(Aggregate.Created):
        run_id: str
        child_key: str
        agent_id: str
        requester_key: str
        requester_display: str
        task: str
        label: str | None = None
        model: str | None = None
        run_timeout_seconds: float = 0
        cleanup: Cleanup = "keep"
        archive_after_minutes: float | None = 60
        # The child run's chain (decision 17); absent from spawns recorded before it.
        trace_id: str | None = None
        parent_run_id: str | None = None
        hops: int = 0
        # Nesting depth (decision 30); spawns recorded before it were all depth 1.
        depth: int = 1
        # Where the report goes, taken when the requester asked (decision 14); spawns
        # recorded before it have none and route by the requester's row at announce time.
        route_captured: bool = False
        report_channel: str | None = None
        report_to: str | None = None
        report_account_id: str | None = None
        report_thread_id: str | None = None

    class SubagentRunStarted(Aggregate.Event):
        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(started_at=to_millis(self.timestamp))

    class SubagentRunYielded(Aggregate.Event):
        """The child's turn yielded (sessions_yield): the task goes on in the woken turn."""

        yielded_run_id: str
        wake_run_id: str

        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(awaited_run_id=self.wake_run_id, yielded_run_id=self.yielded_run_id)

    class SubagentRunEnded(Aggregate.Event):
        outcome: Outcome
        error: str | None = None
        started_at: int | None = None
        ended_at: int
        usage: Usage | None = None

        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(
                status="announcing",
                outcome=self.outcome,
                error=self.error,
                started_at=self.started_at or aggregate.state.started_at,
                ended_at=self.ended_at,
                usage=self.usage,
            )

    class SubagentAnnounceRequested(Aggregate.Event):
        run_id: str

        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(announce_run_id=self.run_id)

    class SubagentAnnounceReplied(Aggregate.Event):
        reply: str | None

        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(announce_done=True, announce_reply=self.reply)

    class SubagentAnnounced(Aggregate.Event):
        message: str
        channel: str | None = None
        to: str | None = None
        account_id: str | None = None
        thread_id: str | None = None
        archive_at: int | None = None
        delivery_error: str | None = None
        retry_delivery_id: str | None = None
        """When the first attempt failed: the outbox entry that retries it."""

        def apply(self, aggregate: Spawn) -> None:
            aggregate._after_announce(self.archive_at)

    class SubagentAnnounceSuppressed(Aggregate.Event):
        """The requester's send policy denies: the report is recorded, not delivered."""

        session_key: str
        rule: str

    class AnnounceSkipped(Aggregate.Event):
        reason: str
        archive_at: int | None = None

        def apply(self, aggregate: Spawn) -> None:
            aggregate._after_announce(self.archive_at)

    class SubagentArchived(Aggregate.Event):
        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(status="closed", closed_as="archived")

    class SubagentDeleted(Aggregate.Event):
        def apply(self, aggregate: Spawn) -> None:
            aggregate._update(status="closed", closed_as="deleted")

    def __init__(
        self,
        run_id: str,
        child_key: str,
        agent_id: str,
        requester_key: str,
        requester_display: str,
        task: str,
        label: str | None = None,
        model: str | None = None,
        run_timeout_seconds: float = 0,
        cleanup: Cleanup = "keep",
        archive_after_minutes: float | None = 60,
        trace_id: str | None = None,
        parent_run_id: str | None = None,
        hops: int = 0,
        depth: int = 1,
        route_captured: bool = False,
        report_channel: str | None = None,
        report_to: str | None = None,
        report_account_id: str | None = None,
        report_thread_id: str | None = None,
    ) -> None:
        self.state = SpawnState(
            spawn_id=str(self.id),
            run_id=run_id,
            child_key=child_key,
            agent_id=agent_id,
            requester_key=requester_key,
            requester_display=requester_display,
            task=task,
            label=label,
            model=model,
            run_timeout_seconds=run_timeout_seconds,
            cleanup=cleanup,
            archive_after_minutes=archive_after_minutes,
            trace_id=trace_id,
            parent_run_id=parent_run_id,
            hops=hops,
            depth=depth,
            route_captured=route_captured,
            report_channel=report_channel,
            report_to=report_to,
            report_account_id=report_account_id,
            report_thread_id=report_thread_id,
        )

    def _update(self, **changes: object) -> None:
        self.state = self.state.model_copy(update=changes)

    def _after_announce(self, archive_at: int | None) -> None:
        if archive_at is not None:
            self._update(announced=True, archive_at=archive_at, status="waiting_archive")
        elif self.state.cleanup == "keep":
            # Kept with archiving off: nothing is left to do, so it is no longer pending
            # work that every reopened gateway would resume.
            self._update(announced=True, status="closed", closed_as="kept")
        else:
            self._update(announced=True)  # the child is deleted next

    @classmethod
    def spawn(
        cls,
        *,
        run_id: UUID,
        child_key: str,
        agent_id: str,
        requester_key: str,
        requester_display: str,
        task: str,
        label: str | None,
        model: str | None,
        run_timeout_seconds: float,
        cleanup: Cleanup,
        archive_after_minutes: float | None,
        at: datetime,
        causality: Causality | None = None,
        report_route: AnnounceTarget | None = None,
        depth: int = 1,
    ) -> Spawn:
        spawn = cls._create(
            cls.SubagentSpawned,
            id=spawn_id_for(child_key),
            timestamp=at,
            run_id=str(run_id),
            child_key=child_key,
            agent_id=agent_id,
            requester_key=requester_key,
            requester_display=requester_display,
            task=task,
            label=label,
            model=model,
            run_timeout_seconds=run_timeout_seconds,
            cleanup=cleanup,
            archive_after_minutes=archive_after_minutes,
            trace_id=causality.trace_id if causality else None,
            parent_run_id=causality.parent_run_id if causality else None,
            hops=causality.hops if causality else 0,
            depth=depth,
            route_captured=True,
            report_channel=report_route.channel if report_route else None,
            report_to=report_route.to if report_route else None,
            report_account_id=report_route.account_id if report_route else None,
            report_thread_id=report_route.thread_id if report_route else None,
        )
        spawn.trigger_event(cls.SubagentRunStarted, timestamp=at)
        return spawn

    # Decisions ------------------------------------------------------------------------

    def next_step(self) -> SpawnStep:
        state = self.state
        if state.status == "closed":
            return None
        if state.outcome is None:
            return AwaitChildRun(run_id=state.awaited_run_id or state.run_id)
        if not state.announce_done:
            return StartAnnounceRun(
                run_id=uuid5(self.id, "announce"),
                session_key=state.child_key,
                message=SUBAGENT_ANNOUNCE_MESSAGE,
                context=announce_step_context(
                    task=state.task, label=state.label, requester_key=state.requester_display
                ),
                # The announce step answers the child's run, on its hop.
                causality=(
                    Causality(trace_id=state.trace_id, parent_run_id=state.run_id, hops=state.hops)
                    if state.trace_id is not None
                    else None
                ),
            )
        if not state.announced:
            return Announce(reply=state.announce_reply, skip=is_announce_skip(state.announce_reply))
        if state.cleanup == "delete":
            return DeleteChild()
        if state.archive_at is not None:
            return ArchiveAt(due_ms=state.archive_at)
        return None  # kept, archiving off (a row recorded before such spawns closed)

    def captured_route(self) -> AnnounceTarget | None:
        """The report route taken at spawn (None: no route then, or not captured)."""
        state = self.state
        if not (state.route_captured and state.report_channel and state.report_to):
            return None
        return AnnounceTarget(
            channel=state.report_channel,
            to=state.report_to,
            account_id=state.report_account_id,
            thread_id=state.report_thread_id,
        )

    def archive_time(self) -> int | None:
        """When the child is archived: ``archiveAfterMinutes`` after its run ended."""
        minutes = self.state.archive_after_minutes
        if self.state.cleanup == "delete" or minutes is None or self.state.ended_at is None:
            return None
        return self.state.ended_at + int(minutes * 60_000)

    # Commands -------------------------------------------------------------------------

    def run_ended(
        self,
        *,
        outcome: Outcome,
        error: str | None,
        started_at: int | None,
        ended_at: int,
        usage: Usage | None,
        at: datetime,
    ) -> None:
        if self.state.outcome is None:
            self.trigger_event(
                self.SubagentRunEnded,
                timestamp=at,
                outcome=outcome,
                error=error,
                started_at=started_at,
                ended_at=ended_at,
                usage=usage,
            )

    def run_yielded(self, *, yielded_run_id: str, wake_run_id: str, at: datetime) -> None:
        """The awaited turn yielded: await the turn its yield wakes instead."""
        if self.state.outcome is None and self.state.awaited_run_id != wake_run_id:
            self.trigger_event(
                self.SubagentRunYielded,
                timestamp=at,
                yielded_run_id=yielded_run_id,
                wake_run_id=wake_run_id,
            )

    def request_announce(self, run_id: UUID, *, at: datetime) -> None:
        if self.state.announce_run_id is None:
            self.trigger_event(self.SubagentAnnounceRequested, timestamp=at, run_id=str(run_id))

    def record_announce_reply(self, reply: str | None, *, at: datetime) -> None:
        if not self.state.announce_done:
            self.trigger_event(self.SubagentAnnounceReplied, timestamp=at, reply=reply)

    def announced(
        self,
        *,
        message: str,
        channel: str | None,
        to: str | None,
        account_id: str | None,
        at: datetime,
        thread_id: str | None = None,
        delivery_error: str | None = None,
        retry_delivery_id: str | None = None,
    ) -> None:
        self.trigger_event(
            self.SubagentAnnounced,
            timestamp=at,
            message=message,
            channel=channel,
            to=to,
            account_id=account_id,
            thread_id=thread_id,
            archive_at=self.archive_time(),
            delivery_error=delivery_error,
            retry_delivery_id=retry_delivery_id,
        )

    def suppress_delivery(self, *, rule: str, at: datetime) -> None:
        self.trigger_event(
            self.SubagentAnnounceSuppressed,
            timestamp=at,
            session_key=self.state.requester_key,
            rule=rule,
        )

    def skip_announce(self, reason: str, *, at: datetime) -> None:
        self.trigger_event(
            self.AnnounceSkipped, timestamp=at, reason=reason, archive_at=self.archive_time()
        )

    def archived(self, *, at: datetime) -> None:
        if self.state.status != "closed":
            self.trigger_event(self.SubagentArchived, timestamp=at)

    def deleted(self, *, at: datetime) -> None:
        if self.state.status != "closed":
            self.trigger_event(self.SubagentDeleted, timestamp=at)
