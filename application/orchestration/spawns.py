"""The process manager of sub-agent spawns: child run, announce, cleanup, archive timer.

Like the exchange driver, it asks the spawn aggregate for its next step, does it and
records the outcome. The archive timer waits on the gateway clock for the time the spawn
recorded, so a gateway restarted before that time waits for the rest, and one restarted
after it archives at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.exchanges import run_state_reply
from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.outbox import DeliveryOutbox, describe_failure
from sessionwire.application.orchestration.process_managers import ProcessManager
from sessionwire.application.orchestration.runs import Reacted, RunEngine
from sessionwire.application.orchestration.trace_budgets import TraceBudgets
from sessionwire.application.orchestration.unrecorded_posts import UnrecordedPosts
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery
from sessionwire.application.unit_of_work import UnitOfWork, retrying
from sessionwire.domain.agent_to_agent import AnnounceTarget, report_route
from sessionwire.domain.causality import Provenance
from sessionwire.domain.outbox import OutboundDelivery
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.run_yield import RunYieldState, wake_run_id_for, yield_id_for
from sessionwire.domain.session import SessionState, to_millis
from sessionwire.domain.spawn import (
    Announce,
    ArchiveAt,
    AwaitChildRun,
    DeleteChild,
    Spawn,
    SpawnState,
    StartAnnounceRun,
    spawn_id_for,
)
from sessionwire.domain.subagent_announce import AnnounceStats, format_announce
from sessionwire.domain.transcript import TranscriptMessage

log = library_logger("sessionwire.spawns")

ANNOUNCE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/subagent-announces")

# The runs a spawn waits for: its child's turns (the first, or one a yield woke) and the
# child's announce step; all in the child's session, whose key names the spawn.
SPAWN_STEPS = frozenset({"subagent_task", "yield_wake", "subagent_announce"})


class SpawnDriver(ProcessManager[Spawn]):
    kind = "spawn"
    pending_statuses = ("running", "announcing", "waiting_archive")
    aggregate_class = Spawn
    state_class = SpawnState

    def __init__(
        self,
        *,
        store: AsyncStore,
        in_flight: InFlight,
        clock: Clock,
        runs: RunEngine,
        delivery: ChannelDelivery,
        outbox: DeliveryOutbox,
        config: GatewayConfig,
        budgets: TraceBudgets,
    ) -> None:
        super().__init__(store, in_flight)
        self.clock = clock
        self.runs = runs
        # A retried step replays the report's post until its record is saved.
        self.delivery = UnrecordedPosts(delivery)
        self.outbox = outbox
        self.config = config
        self.budgets = budgets
        self.until_woken: Callable[[UUID], Awaitable[None]] | None = None
        """Waits until a yield has woken (``YieldDriver.until_woken``): the turn it wakes
        exists from then on, wherever it was woken."""
        self.on_report: Callable[[str], None] = lambda requester_key: None
        """Called with the requester's key once a child has reported (or closed): the
        yields of that session look again (``YieldDriver.child_reported``)."""
        self.reports_of: Callable[[str], AbstractAsyncContextManager[None]] = _unlocked
        """Held while a report is saved (``YieldDriver.reports_of``): a yield of the
        requester records its wake before the report or after it, never over a read of
        its children taken before it (ADR 0060)."""

    def log_context(self, aggregate: Spawn) -> dict[str, Any]:
        return {"session_key": aggregate.state.child_key, "run_id": aggregate.state.run_id}

    async def record_with_outcome(self, uow: UnitOfWork, run: Run) -> Reacted | None:
        """The child's run, or its announce run, ended: the spawn's step on it commits with
        that end (ADR 0057), when the spawn waits for exactly this run, and so does the
        announce run's start when the child's end makes it next (the engine dispatches
        it in that commit too: it runs in the child's session). Anything else, or a read
        that fails, leaves the step to the driver (after ``runs.wait``)."""
        if run.state.step not in SPAWN_STEPS:
            return None
        try:
            stored = await self.store.work(spawn_id_for(run.state.session_key))
            if stored is None:
                return None
            spawn = stored.to_aggregate(Spawn, SpawnState)
            step = spawn.next_step()
            started = None
            if isinstance(step, AwaitChildRun) and step.run_id == run.state.run_id:
                await self._record_child_end(spawn, run.state)
                started = await self._start_announce_with_outcome(spawn)
            elif isinstance(step, StartAnnounceRun) and step.run_id == run.id:
                spawn.record_announce_reply(run_state_reply(run.state), at=self.clock.now())
            else:
                return None
        except Exception:  # the driver records the step: it reads the store again
            log.warning("spawn not read with its run's outcome", run_id=str(run.id))
            return None
        if started is not None:
            uow.add(started)  # before the spawn, as the driver saves them (the run first)
        uow.add(spawn)
        return Reacted(started=started, committed=lambda: None)

    async def _start_announce_with_outcome(self, spawn: Spawn) -> Run | None:
        """The announce run, started with the child's end when nothing but the store
        decides it: not with a trace budget configured (its admission counts the trace's
        committed usage, which must hold the usage this very commit records: the driver
        starts it after, as an exchange's next run, ADR 0057), nor if it exists."""
        step = spawn.next_step()
        if not isinstance(step, StartAnnounceRun):
            return None  # the child yielded: its woken turn is awaited
        if step.causality is not None and self.budgets.configured:
            return None
        if await self.store.work(step.run_id) is not None:
            return None  # started already: the driver awaits it
        return self._announce_run_of(spawn, step, at=self.clock.now())

    async def _record_child_end(self, spawn: Spawn, state: RunState) -> None:
        """The awaited turn ended: a yield pauses the child (its task goes on in the turn
        the yield wakes), any other end is the child's outcome."""
        yielded = await self.store.work(yield_id_for(state.run_id))
        if yielded is not None and state.status == "ok":
            spawn.run_yielded(
                yielded_run_id=state.run_id,
                wake_run_id=str(wake_run_id_for(yielded.id)),
                at=self.clock.now(),
            )
        else:
            self._record_run_end(spawn, state)

    async def take(
        self,
        spawn: Spawn,
        step: AwaitChildRun | StartAnnounceRun | Announce | ArchiveAt | DeleteChild,
    ) -> None:
        if isinstance(step, AwaitChildRun):
            yielded_run = spawn.state.yielded_run_id
            if yielded_run is not None and self.until_woken is not None:
                # The child paused in a yield: its woken turn starts when the yield
                # wakes, here or on another gateway.
                await self.until_woken(yield_id_for(yielded_run))
                if await self._wake_refused(spawn, yielded_run):
                    return
            state = await self.runs.wait(UUID(step.run_id))
            assert state is not None
            fresh = await self.load(spawn.id)
            if fresh is None or fresh.next_step() != step:
                return  # recorded with the run's outcome (or by another gateway)
            # The child yielded (sessions_yield): it pauses, and its task goes on in the
            # turn its yield wakes; it reports once that turn ends.
            await self._record_child_end(fresh, state)
            await self.store.save(fresh)
        elif isinstance(step, StartAnnounceRun):
            await self._announce_run(spawn, step)
        elif isinstance(step, Announce):
            await self._announce(spawn, step)
            self.on_report(spawn.state.requester_key)
        elif isinstance(step, DeleteChild):
            await self._close_child(spawn, archive=False)
            self.on_report(spawn.state.requester_key)
        else:
            delay_ms = step.due_ms - to_millis(self.clock.now())
            if delay_ms > 0:
                # Parked: a real clock's wait_idle does not wait for an archive timer.
                await self.in_flight.sleep(delay_ms / 1000, parked=True)
            await self._close_child(spawn, archive=True)

    async def _wake_refused(self, spawn: Spawn, yielded_run: str) -> bool:
        """The child's yield woke without a turn (its trace's budget refused it, ADR
        0034): the task ends there, failed with the refusal, and reports so."""
        stored = await self.store.work(yield_id_for(yielded_run))
        if stored is None:
            return False
        woken = RunYieldState.model_validate_json(stored.state_json)
        if woken.refused is None:
            return False
        yielded = await self.runs.load(UUID(yielded_run))
        assert yielded is not None
        self._record_run_end(
            spawn,
            yielded.state.model_copy(update={"status": "error", "error": woken.refused}),
        )
        await self.store.save(spawn)
        return True

    def _record_run_end(self, spawn: Spawn, state: RunState) -> None:
        outcome = (
            state.status if state.status in {"ok", "error", "timeout", "cancelled"} else "error"
        )
        spawn.run_ended(
            outcome=outcome,
            error=state.error,
            started_at=state.started_at,
            ended_at=state.ended_at or to_millis(self.clock.now()),
            usage=state.usage,
            at=self.clock.now(),
        )

    async def _announce_run(self, spawn: Spawn, step: StartAnnounceRun) -> None:
        if spawn.state.announce_run_id == str(step.run_id):
            # Started with the child's end (ADR 0057), or before a restart: awaited
            # (``wait`` queues it here if no actor here has it).
            await self._record_announce_reply(spawn, step)
            return
        now = self.clock.now()
        chain = step.causality
        new = chain is not None and await self.store.work(step.run_id) is None
        # The trace's budget (decision 31): a spent trace runs no announce step; the
        # report still goes to the requester: the child's status, reply and stats.
        async with self.budgets.admit(chain.trace_id if new and chain else None) as exceeded:
            if exceeded is None:
                run = self._announce_run_of(spawn, step, at=now)
                await self.runs.ensure_started(run, spawn, absent=new)
        if exceeded is not None:
            assert chain is not None
            # The child's own reply stands in for the announce step's (its Result).
            child = await self.runs.load(UUID(spawn.state.run_id))
            spawn.record_announce_reply(child.state.reply if child else None, at=now)
            await self.store.save(spawn)
            await self.budgets.refuse(
                exceeded,
                chain=chain,
                requester_key=spawn.state.requester_key,
                tool="subagent_announce",
                reference=spawn.state.child_key,
                target_key=spawn.state.child_key,
                caller_run_id=None,
            )
            return
        await self._record_announce_reply(spawn, step)

    def _announce_run_of(self, spawn: Spawn, step: StartAnnounceRun, *, at: datetime) -> Run:
        """The announce step's run in the child's session, requested on the spawn."""
        spawn.request_announce(step.run_id, at=at)
        return Run.start(
            run_id=step.run_id,
            session_key=step.session_key,
            agent_id=spawn.state.agent_id,
            step="subagent_announce",
            message=step.message,
            context=step.context,
            timeout_seconds=self.config.agents.defaults.timeoutSeconds,
            requester_key=spawn.state.requester_key,
            at=at,
            causality=step.causality,
        )

    async def _record_announce_reply(self, spawn: Spawn, step: StartAnnounceRun) -> None:
        """Wait for the announce run, and record its reply unless its end did."""
        state = await self.runs.wait(step.run_id)
        spawn = await self.load(spawn.id) or spawn
        if spawn.next_step() != step:
            return  # recorded with the run's outcome (or by another gateway)
        spawn.record_announce_reply(run_state_reply(state), at=self.clock.now())
        await self.store.save(spawn)

    async def _report(self, spawn: Spawn, reply: str | None) -> str:
        state = spawn.state
        child = await self.store.session(state.child_key)
        usage = state.usage
        session_id = child.state.session_id if child else None
        stats = AnnounceStats(
            runtime_ms=(
                state.ended_at - state.started_at
                if state.ended_at is not None and state.started_at is not None
                else None
            ),
            input_tokens=usage.input if usage else None,
            output_tokens=usage.output if usage else None,
            total_tokens=usage.totalTokens if usage else None,
            cost=self.config.cost_of(state.model, usage),
            session_key=state.child_key,
            session_id=session_id,
            transcript=f"{self.store.location}#{session_id}" if session_id else None,
        )
        return format_announce(
            reply, status=state.outcome or "unknown", error=state.error, stats=stats
        )

    def _route(self, spawn: Spawn, requester: SessionState | None) -> AnnounceTarget | None:
        """The route taken at spawn (decision 14); a spawn recorded before routes were
        captured goes by the requester's row now, as it always did."""
        if spawn.state.route_captured:
            return spawn.captured_route()
        return report_route(
            spawn.state.requester_key,
            channel=requester.last_channel if requester else None,
            to=requester.last_to if requester else None,
            account_id=requester.last_account_id if requester else None,
        )

    async def _announce(self, spawn: Spawn, step: Announce) -> None:
        if step.skip:
            async with self.reports_of(spawn.state.requester_key):
                spawn.skip_announce("ANNOUNCE_SKIP", at=self.clock.now())
                await self.store.save(spawn)
            return
        message = await self._report(spawn, step.reply)
        stored = await self.store.session(spawn.state.requester_key)
        requester = stored.state if stored else None
        route = self._route(spawn, requester)
        # Decision 10: a session whose send policy denies gets no delivery on its channel;
        # the report is still recorded (its transcript, the spawn's events), never lost.
        denied_by = None
        if requester is not None:
            decision = self.config.send_policy.decide(
                requester.policy_target(self.config.key_rules),
                channel=route.channel if route else None,
            )
            denied_by = None if decision.allowed else decision.rule
        if route is None or denied_by is not None:
            await self._save_announce(spawn, message, None, denied_by, None)
            return
        delivery = Delivery(
            channel=route.channel,
            to=route.to,
            account_id=route.account_id,
            thread_id=route.thread_id,
            message=message,
            session_key=spawn.state.requester_key,
            idempotency_key=report_key(spawn.id),
        )
        try:
            await self.delivery.deliver(delivery)
        except Exception as error:  # recorded in the transcript, and retried by the outbox
            log.warning(
                "sub-agent announce delivery failed; the outbox retries it",
                session_key=spawn.state.requester_key,
                error=describe_failure(error),
            )
            failure = error

            def retry() -> OutboundDelivery:
                return self.outbox.entry_after_failure(
                    delivery, failure, source="subagent_report", source_id=str(spawn.id)
                )

            entry_id = await self._save_announce(spawn, message, None, None, retry)
            self.delivery.recorded(delivery.idempotency_key)
            if entry_id is not None:
                self.outbox.start(entry_id)
            return
        await self._save_announce(spawn, message, route, None, None)
        self.delivery.recorded(delivery.idempotency_key)

    async def _save_announce(
        self,
        spawn: Spawn,
        message: str,
        route: AnnounceTarget | None,
        denied_by: str | None,
        retry: Callable[[], OutboundDelivery] | None,
    ) -> UUID | None:
        """Record the report in the requester's transcript and on the spawn, together,
        with the outbox entry (made by ``retry``) retrying a failed delivery: its id."""
        async for uow in retrying(self.store, f"spawn {spawn.id} announce"):
            with uow:
                async with self.reports_of(spawn.state.requester_key):
                    now = self.clock.now()
                    fresh = await uow.work(spawn.id, Spawn, SpawnState)
                    if fresh is None or fresh.state.announced:
                        return None
                    entry = uow.add(retry()) if retry is not None else None
                    if denied_by is not None:
                        fresh.suppress_delivery(rule=denied_by, at=now)
                    fresh.announced(
                        message=message,
                        channel=route.channel if route else None,
                        to=route.to if route else None,
                        account_id=route.account_id if route else None,
                        thread_id=route.thread_id if route else None,
                        delivery_error=entry.state.last_error if entry else None,
                        retry_delivery_id=str(entry.id) if entry else None,
                        at=now,
                    )
                    requester = await uow.session(spawn.state.requester_key)
                    if requester is not None and requester.state.status == "active":
                        requester.append_message(
                            TranscriptMessage(
                                role="assistant",
                                content=[{"type": "text", "text": message}],
                                timestamp=int(now.timestamp() * 1000),
                            ),
                            at=now,
                            provenance=report_provenance(fresh.state),
                        )
                    await uow.commit()
                    return entry.id if entry else None
        return None

    async def archive_overdue(self) -> int:
        """Archive now every child whose archive time passed while the gateway was down.

        Called on reopen before any run is resumed: the child was archived, in effect,
        while the gateway was down, so a run still queued in it must find it archived
        (and end unanswered), never be handed to its agent first.
        """
        now = self.clock.now()
        archived = 0
        for stored in await self.store.pending_work(self.kind, ("waiting_archive",)):
            spawn = stored.to_aggregate(Spawn, SpawnState)
            step = spawn.next_step()
            if not isinstance(step, ArchiveAt) or step.due_ms > to_millis(now):
                continue
            uow = UnitOfWork(self.store, attempt=0)
            try:
                with uow:
                    await self._close_in(uow, spawn.id, archive=True)
            except StoreConflict:
                continue  # another gateway closed it first: its driver, or ours, sees
            archived += uow.committed
        return archived

    async def _close_child(self, spawn: Spawn, *, archive: bool) -> None:
        async for uow in retrying(self.store, f"spawn {spawn.id} cleanup"):
            with uow:
                await self._close_in(uow, spawn.id, archive=archive)

    async def _close_in(self, uow: UnitOfWork, spawn_id: UUID, *, archive: bool) -> None:
        now = self.clock.now()
        fresh = await uow.work(spawn_id, Spawn, SpawnState)
        if fresh is None or fresh.state.status == "closed":
            return
        child = await uow.session(fresh.state.child_key)
        if child is not None and archive:
            child.archive(reason="archiveAfterMinutes elapsed", at=now)
        elif child is not None:
            child.delete(reason='sessions_spawn cleanup "delete"', at=now)
        if archive:
            fresh.archived(at=now)
        else:
            fresh.deleted(at=now)
        await uow.commit()


def _unlocked(requester_key: str) -> AbstractAsyncContextManager[None]:
    return nullcontext()


def report_key(spawn_id: UUID) -> str:
    """The idempotency key of the spawn's report: the same on every attempt."""
    return str(uuid5(ANNOUNCE_NAMESPACE, str(spawn_id)))


def report_provenance(state: SpawnState) -> Provenance:
    """The report in the requester's transcript: written by the child's announce step."""
    return Provenance(
        kind="subagent_report",
        session_key=state.child_key,
        run_id=state.announce_run_id,
        trace_id=state.trace_id,
        parent_run_id=state.run_id,
        hops=state.hops,
    )
