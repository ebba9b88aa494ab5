"""The process manager that drives each agent-to-agent exchange to its end.

It asks the exchange aggregate what to do next, does that one thing (wait for a run,
start a turn, deliver the announce), records the outcome, and asks again. Everything it
knows comes from the store, so a restarted gateway drives open exchanges on from where
they stopped; the runs it starts have ids derived from the exchange, so a step that was
already started is awaited, not started twice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.outbox import DeliveryOutbox, describe_failure
from sessionwire.application.orchestration.process_managers import ProcessManager
from sessionwire.application.orchestration.runs import Reacted, RunEngine
from sessionwire.application.orchestration.trace_budgets import TraceBudgets
from sessionwire.application.orchestration.unrecorded_posts import UnrecordedPosts
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery
from sessionwire.application.unit_of_work import UnitOfWork
from sessionwire.domain.agent_to_agent import reply_text, resolve_announce_target
from sessionwire.domain.exchange import (
    AwaitPrimary,
    Close,
    Deliver,
    EndLoop,
    Exchange,
    ExchangeState,
    SkipAnnounce,
    StartRun,
    exchange_id_for,
)
from sessionwire.domain.keys import KeyRules, agent_id_of
from sessionwire.domain.outbox import OutboundDelivery
from sessionwire.domain.policy import SendPolicy
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.session import SessionState

DELIVERY_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/deliveries")


class ExchangeDriver(ProcessManager[Exchange]):
    kind = "exchange"
    pending_statuses = ("open",)
    aggregate_class = Exchange
    state_class = ExchangeState

    def __init__(
        self,
        *,
        store: AsyncStore,
        in_flight: InFlight,
        clock: Clock,
        runs: RunEngine,
        delivery: ChannelDelivery,
        outbox: DeliveryOutbox,
        run_timeout_seconds: float,
        send_policy: SendPolicy,
        rules: KeyRules,
        budgets: TraceBudgets,
    ) -> None:
        super().__init__(store, in_flight)
        self.clock = clock
        self.runs = runs
        # A retried step replays the announce's post until its record is saved.
        self.delivery = UnrecordedPosts(delivery)
        self.outbox = outbox
        self.run_timeout_seconds = run_timeout_seconds
        self.send_policy = send_policy
        self.rules = rules
        self.budgets = budgets
        self._shortcuts: dict[UUID, Shortcut] = {}
        """Per exchange driven here, what its last reaction committed: the driver that
        waited for that run need not read the store to learn it (ADR 0057)."""

    def _forget(self, aggregate_id: UUID, task: Any) -> None:
        super()._forget(aggregate_id, task)
        if aggregate_id not in self._tasks:
            self._shortcuts.pop(aggregate_id, None)

    def log_context(self, aggregate: Exchange) -> dict[str, Any]:
        return {"session_key": aggregate.state.target_key}

    async def record_with_outcome(self, uow: UnitOfWork, run: Run) -> Reacted | None:
        """The run's end as its exchange's step, in the unit of work recording that end
        (ADR 0057): the reply (or failure) and the decisions that need no I/O after it
        (the loop's end, a skipped announce, the close) commit with the run's outcome.

        Only when the exchange waits for exactly this run; anything else (no exchange,
        a step recorded already, a read that fails) leaves the step to the driver, which
        records it after ``runs.wait`` as before: the reaction is a shortcut, never the
        only way a step is taken."""
        exchange_id = _exchange_of(run.state)
        if exchange_id is None:
            return None
        try:
            stored = await self.store.work(exchange_id)
            if stored is None:
                return None
            exchange = stored.to_aggregate(Exchange, ExchangeState)
            step = exchange.next_step()
            now = self.clock.now()
            if isinstance(step, AwaitPrimary) and step.run_id == run.state.run_id:
                exchange.record_round_one(
                    run_state_reply(run.state), at=now, failure=run_state_failure(run.state)
                )
            elif isinstance(step, StartRun) and step.run_id == run.id:
                record_step_outcome(exchange, step, run.state, at=now)
            else:
                return None
            take_decisions(exchange, at=now)
            started = await self._start_with_outcome(uow, exchange, at=now)
        except Exception:  # the driver records the step: it reads the store again
            self.log.warning("exchange not read with its run's outcome", run_id=str(run.id))
            return None
        if started is not None:
            uow.add(started)  # before the exchange, as a driver saves them (the run first)
        uow.add(exchange)

        def committed() -> None:
            if exchange.id in self._tasks:
                self._shortcuts[exchange.id] = Shortcut(
                    recorded=run.id, started=started.id if started else None
                )

        return Reacted(started=started, committed=committed)

    async def take(
        self,
        exchange: Exchange,
        step: AwaitPrimary | StartRun | EndLoop | SkipAnnounce | Deliver | Close,
    ) -> None:
        if isinstance(step, AwaitPrimary):
            state = await self.runs.wait(UUID(step.run_id))
            if self._recorded_here(exchange.id, UUID(step.run_id)):
                return
            fresh = await self.load(exchange.id)
            if fresh is None or fresh.next_step() != step:
                return  # recorded with the run's outcome (or by another gateway)
            fresh.record_round_one(
                run_state_reply(state), at=self.clock.now(), failure=run_state_failure(state)
            )
            await self._save_with_next_run(fresh)
        elif isinstance(step, StartRun):
            await self._run_step(exchange, step)
        elif isinstance(step, EndLoop | SkipAnnounce | Close):
            await self._save_with_next_run(exchange)
        else:
            retry = await self._deliver(exchange, step)
            if retry is None:
                await self.store.save(exchange)
                self.delivery.recorded(delivery_key(exchange.state))
            else:
                # The failure and the outbox entry that retries it are recorded together.
                await self.store.save(exchange, retry)
                self.delivery.recorded(delivery_key(exchange.state))
                self.outbox.start(retry.id)

    async def _send_denied(self, session_key: str, *, channel: str | None = None) -> str | None:
        """The rule that denies sends into ``session_key`` now, or None (decision 10)."""
        stored = await self.store.session(session_key)
        if stored is None:
            return None
        return self._denied_into(stored.state, channel=channel)

    def _denied_into(self, session: SessionState, *, channel: str | None = None) -> str | None:
        decision = self.send_policy.decide(session.policy_target(self.rules), channel=channel)
        return None if decision.allowed else decision.rule

    def _recorded_here(self, exchange_id: UUID, run_id: UUID) -> bool:
        """Whether the run's end, with the exchange's step on it, was committed here."""
        shortcut = self._shortcuts.get(exchange_id)
        return shortcut is not None and shortcut.recorded == run_id

    async def _run_step(self, exchange: Exchange, step: StartRun) -> None:
        shortcut = self._shortcuts.get(exchange.id)
        if shortcut is not None and shortcut.started == step.run_id and not exchange.pending_events:
            # Started (and queued here) with the previous run's end: it is awaited.
            self._shortcuts[exchange.id] = dataclasses.replace(shortcut, started=None)
        else:
            started = await self._start_run_step(exchange, step)
            if not started:
                return
        state = await self.runs.wait(step.run_id)
        assert state is not None
        if self._recorded_here(exchange.id, step.run_id):
            return
        exchange = await self.load(exchange.id) or exchange
        if exchange.next_step() != step:
            return  # recorded meanwhile (another gateway)
        record_step_outcome(exchange, step, state, at=self.clock.now())
        await self._save_with_next_run(exchange)

    async def _start_run_step(self, exchange: Exchange, step: StartRun) -> bool:
        """Start (or find) the step's run, or record why it may not start (False)."""
        now = self.clock.now()
        # Each turn and the announce run are sends into a session: decided when the step
        # is first taken (a run already started is awaited, whatever the policy says now).
        new = await self.store.work(step.run_id) is None
        denied_by = await self._send_denied(step.session_key) if new else None
        if denied_by is not None:
            self._block(exchange, step, denied_by, at=now)
            self.log.info(
                "step blocked by send policy",
                exchange_id=str(exchange.id),
                session_key=step.session_key,
                run_id=str(step.run_id),
                rule=denied_by,
            )
            await self.store.save(exchange)
            return False
        chain = step.causality
        # The trace's budget (decision 31) bounds the loop's turns and its announce too.
        async with self.budgets.admit(chain.trace_id if new and chain else None) as exceeded:
            if exceeded is None:
                run = self._start_step_run(exchange, step, at=now)
                await self.runs.ensure_started(run, exchange, absent=new)
                if exchange.pending_events:
                    # The run existed (started before a crash, or by another gateway),
                    # so nothing was saved with it: the decisions carried here are.
                    await self.store.save(exchange)
        if exceeded is not None:
            assert chain is not None
            refusal = exceeded.refusal()
            self._block(exchange, step, refusal.rule, at=now)
            await self.store.save(exchange)
            await self.budgets.refuse(
                exceeded,
                chain=chain,
                requester_key=exchange.state.requester_key,
                tool=step.step,
                reference=step.session_key,
                target_key=step.session_key,
                caller_run_id=None,
            )
            return False
        return True

    async def _save_with_next_run(self, exchange: Exchange) -> None:
        """Take the decisions due and save them, with the next run's start if one is
        next (one commit): a crash before it leaves them undecided, and the restart
        decides them again from the same state."""
        take_decisions(exchange, at=self.clock.now())
        following = exchange.next_step()
        if isinstance(following, StartRun):
            await self._run_step(exchange, following)
        else:
            await self.store.save(exchange)

    def _start_step_run(self, exchange: Exchange, step: StartRun, *, at: datetime) -> Run:
        """The run of a turn or of the announce (and, for the announce, its request)."""
        if step.step == "announce":
            exchange.request_announce(step.run_id, at=at)
        return Run.start(
            run_id=step.run_id,
            session_key=step.session_key,
            agent_id=agent_id_of(step.session_key),
            step=step.step,
            message=step.message,
            context=step.context,
            timeout_seconds=self.run_timeout_seconds,
            requester_key=exchange.state.requester_key,
            exchange_id=str(exchange.id),
            turn=step.turn,
            at=at,
            causality=step.causality,
            sender_key=_other_side(exchange.state, step.session_key),
        )

    async def _start_with_outcome(
        self, uow: UnitOfWork, exchange: Exchange, *, at: datetime
    ) -> Run | None:
        """The next turn or the announce, started in the outcome's commit when nothing
        but the store decides it: no trace budget to ask (its count must hold the usage
        this very commit records, so with one configured the driver starts it after),
        the send policy read here (on the session the outcome's unit of work has loaded
        already when the run starts where the ended one ran: the announce after the
        target's reply, say). The engine queues it once the commit is in."""
        step = exchange.next_step()
        if not isinstance(step, StartRun):
            return None
        if step.causality is not None and self.budgets.configured:
            return None
        if await self.store.work(step.run_id) is not None:
            return None  # started already: the driver awaits it
        loaded = uow.loaded_session(step.session_key)
        denied_by = (
            self._denied_into(loaded.state)
            if loaded is not None
            else await self._send_denied(step.session_key)
        )
        if denied_by is not None:
            self._block(exchange, step, denied_by, at=at)
            take_decisions(exchange, at=at)
            return None
        return self._start_step_run(exchange, step, at=at)

    @staticmethod
    def _block(exchange: Exchange, step: StartRun, rule: str, *, at: datetime) -> None:
        """A turn or the announce run that may not start: the loop or the announce ends,
        naming the rule that stopped it."""
        if step.step == "announce":
            exchange.suppress_announce(stage="run", rule=rule, message=None, at=at)
        else:
            exchange.block_turn(step, rule=rule, at=at)

    async def _deliver(self, exchange: Exchange, step: Deliver) -> OutboundDelivery | None:
        """Attempt the announce once; a failed attempt returns the outbox entry retrying it."""
        state = exchange.state
        now = self.clock.now()
        stored = await self.store.session(state.target_key)
        target = resolve_announce_target(
            state.target_key,
            stored_channel=stored.state.last_channel if stored else None,
            stored_to=stored.state.last_to if stored else None,
            stored_account_id=stored.state.last_account_id if stored else None,
        )
        if target is None:
            exchange.skip_announce("no announce target", at=now)
            exchange.close("announce skipped: no announce target", at=now)
            return None
        denied_by = await self._send_denied(state.target_key, channel=target.channel)
        if denied_by is not None:
            exchange.suppress_announce(stage="delivery", rule=denied_by, message=step.reply, at=now)
            exchange.close("announce suppressed: send blocked by session policy", at=now)
            return None
        delivery = Delivery(
            channel=target.channel,
            to=target.to,
            account_id=target.account_id,
            thread_id=target.thread_id,
            message=step.reply,
            session_key=state.target_key,
            idempotency_key=delivery_key(state),
        )
        try:
            await self.delivery.deliver(delivery)
        except Exception as error:  # a channel failing is recorded and retried, never raised
            retry = self.outbox.entry_after_failure(
                delivery, error, source="a2a_announce", source_id=state.exchange_id
            )
            exchange.delivery_failed(
                describe_failure(error), at=now, retry_delivery_id=str(retry.id)
            )
            exchange.close("announce failed; the outbox retries it", at=now)
            return retry
        exchange.delivered(
            channel=target.channel,
            to=target.to,
            account_id=target.account_id,
            thread_id=target.thread_id,
            message=step.reply,
            at=now,
        )
        exchange.close("announce delivered", at=now)
        return None


@dataclass(frozen=True)
class Shortcut:
    """What an outcome reaction committed for an exchange driven here: the run whose
    end it recorded the step of, and the run it started (queued here), if any."""

    recorded: UUID
    started: UUID | None


def record_step_outcome(
    exchange: Exchange, step: StartRun, state: RunState, *, at: datetime
) -> None:
    """A turn's or the announce run's end, on the exchange."""
    reply = run_state_reply(state)
    if step.step == "announce":
        exchange.record_announce_reply(reply, at=at)
    else:
        failed = None if state.status == "ok" else (state.error or state.status)
        exchange.record_turn(step, reply=reply, failed=failed, at=at)


def take_decisions(exchange: Exchange, *, at: datetime) -> None:
    """Take the exchange's next steps while they need nothing but its state (the loop's
    end, a skipped announce, the close): they are recorded with whatever is saved next,
    not each in a commit of its own (ADR 0057)."""
    while True:
        step = exchange.next_step()
        if isinstance(step, EndLoop):
            exchange.end_loop(step.reason, at=at)
        elif isinstance(step, SkipAnnounce):
            exchange.skip_announce(step.reason, at=at)
            exchange.close(f"announce skipped: {step.reason}", at=at)
        elif isinstance(step, Close):
            exchange.close(step.reason, at=at)
        else:
            return


def _exchange_of(state: RunState) -> UUID | None:
    """The exchange a run is a step of: its turns and announce name it; a primary run's
    is derived from its id (a primary run of no exchange has none stored)."""
    if state.exchange_id is not None:
        return UUID(state.exchange_id)
    if state.step == "primary":
        return exchange_id_for(UUID(state.run_id))
    return None


def delivery_key(state: ExchangeState) -> str:
    """The idempotency key of the exchange's announce: the same on every attempt."""
    return str(uuid5(DELIVERY_NAMESPACE, state.exchange_id))


def _other_side(state: ExchangeState, session_key: str) -> str:
    """Whose words a turn's message is: the other party's latest reply."""
    return state.target_key if session_key == state.requester_key else state.requester_key


def run_state_failure(state: RunState | None) -> str | None:
    """How a run that ended without success ended (``error: boom``, ``run timed out after
    600s``, ``cancelled: …``), or None."""
    if state is None or state.status not in {"error", "timeout", "cancelled"}:
        return None
    if state.status == "timeout" and state.error:
        return state.error  # already says it timed out
    return f"{state.status}: {state.error}" if state.error else state.status


def run_state_reply(state: RunState | None) -> str | None:
    if state is None or state.status != "ok":
        return None
    return reply_text(state.reply)
