"""Budgets per trace (decision 31, ADR 0034): admitting work into a trace, refusing it
once the trace's budget is spent, and with ``onExceeded: "cancel"`` stopping the trace's
work in flight.

Every place that starts or feeds a run in a trace asks ``admit`` first: the tools
(``sessions_send``, ``sessions_spawn``, ``sessions_yield``, the ``subagents`` steer and a
busy-policy steer), the process managers (an exchange's reply-back and announce turns, a
spawn's announce step, a yield's woken turn) and a remote (A2A) task. The count is read
from the runs read model (the trace's runs, their steps and recorded usage) while this
gateway holds the trace's lock, and the run is saved before the lock is let go, so two
starts in one trace never both pass on the same count. A run's outcome (its usage) is
recorded under the same lock, so a start never slips in on a token count that a
just-recorded usage already spent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.cancellation import RunCancellation
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.orchestration.keyed_locks import KeyedLocks
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock, IdSource
from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.store import Store, StoreInUse
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.causality import Causality
from sessionwire.domain.run import RunState
from sessionwire.domain.trace_budget import BudgetExceeded, TraceBudget, TraceUsage
from sessionwire.domain.transcript import Usage

log = library_logger("sessionwire.budgets")

# Runs read per query while a trace's spending is counted.
COUNT_PAGE = 1000


class TraceBudgets:
    def __init__(
        self,
        *,
        store: AsyncStore,
        config: GatewayConfig,
        clock: Clock,
        ids: IdSource,
        in_flight: InFlight,
        engine: RunEngine,
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.ids = ids
        self.in_flight = in_flight
        self.budget: TraceBudget = config.trace_budget
        self.cancellation: RunCancellation | None = None
        """Set once the gateway has built it (``onExceeded: "cancel"``)."""
        self._trace_locks = KeyedLocks(in_flight)
        self.engine = engine
        if self.budget.configured:
            engine.outcome_lock = self._outcome_lock
            engine.run_ended = self._run_ended

    @property
    def configured(self) -> bool:
        return self.budget.configured

    # Counting ---------------------------------------------------------------------------

    async def usage(self, trace_id: str, *, steers: bool = False) -> TraceUsage:
        """What the trace has spent, from its recorded runs (read off the loop); with
        ``steers``, the steers its runs sent too (one more read per run)."""
        return await self.store.read(_count, trace_id, self.config, steers)

    # Admitting work ---------------------------------------------------------------------

    @asynccontextmanager
    async def admit(
        self, trace_id: str | None, *, spawning: bool = False, steering: bool = False
    ) -> AsyncIterator[BudgetExceeded | None]:
        """The one admission of work into a trace: hold the trace's lock and say whether
        one more run (a spawn's, if ``spawning``) may start in it, or one more steer (if
        ``steering``) go into a run: None, or the limit reached. The caller saves its run
        (or steer) inside the block. No budget configured (the default), or no trace:
        always None, no lock."""
        if not self.budget.configured or trace_id is None:
            yield None
            return
        async with self._trace_locks.held(trace_id):
            yield await self._exceeded(trace_id, spawning=spawning, steering=steering)

    async def steer_exceeded(self, trace_id: str | None) -> BudgetExceeded | None:
        """Inside ``admit``'s block for a run that turns out to be a steer (a send the
        busy policy steers): whether the trace may send one more steer."""
        if not self.budget.configured or trace_id is None:
            return None
        assert trace_id in self._trace_locks, "asked inside admit, under the trace's lock"
        return await self._exceeded(trace_id, steering=True)

    async def _exceeded(
        self, trace_id: str, *, spawning: bool = False, steering: bool = False
    ) -> BudgetExceeded | None:
        counts_steers = steering and self.budget.max_steers is not None
        usage = await self.usage(trace_id, steers=counts_steers)
        return self.budget.exceeded(usage, spawning=spawning, steering=steering)

    @asynccontextmanager
    async def _outcome_lock(self, state: RunState) -> AsyncIterator[None]:
        if state.trace_id is None:
            yield
            return
        async with self._trace_locks.held(state.trace_id):
            yield

    # Refusing and cancelling ------------------------------------------------------------

    async def refuse(
        self,
        exceeded: BudgetExceeded,
        *,
        chain: Causality,
        requester_key: str,
        tool: str,
        reference: str,
        target_key: str | None,
        caller_run_id: str | None,
    ) -> None:
        """Record the refusal (an ``AccessRefused`` with check ``trace_budget``); with
        ``onExceeded: "cancel"``, cancel the trace's runs not ended yet."""
        refused = AccessRefusal.record(
            id=self.ids.new_id(),
            refusal=exceeded.refusal(),
            requester_key=requester_key,
            tool=tool,
            reference=reference[:200],
            target_key=target_key,
            at=self.clock.now(),
            caller=chain,
            caller_run_id=caller_run_id,
        )
        try:
            await self.store.save(refused)
        except StoreInUse:
            log.warning("budget refusal not recorded: another gateway holds the store", tool=tool)
        log.info(
            "trace budget exceeded",
            trace_id=chain.trace_id,
            limit=exceeded.limit,
            tool=tool,
            on_exceeded=self.budget.on_exceeded,
        )
        if self.budget.on_exceeded == "cancel":
            # On a task of its own: the caller's run is among those cancelled, and its
            # runtime's task (this call's, when an agent asks) stops with it.
            self.in_flight.start(
                self.cancel_in_flight(chain.trace_id, exceeded),
                Owner("budget", chain.trace_id),
                context=outside_any_run(),
            )

    async def cancel_in_flight(self, trace_id: str, exceeded: BudgetExceeded) -> list[str]:
        """Cancel every run of the trace not ended yet (each with its cascade)."""
        if self.cancellation is None:
            return []
        pending = await self.store.read(_pending_in_trace, trace_id)
        cancelled: list[str] = []
        for run in pending:
            # Each run of the trace is cancelled for the budget itself, the run that
            # caused the others first: cancelled after them, it could hear a child's
            # cancel and end by itself before its own cancel is recorded (PostgreSQL).
            outcome = await self.engine.record_cancel(UUID(run.run_id), exceeded.message)
            if outcome is not None and outcome[1]:
                cancelled.append(run.run_id)
        for run_id in list(cancelled):
            # Then their cascades, for what they caused outside the trace's list (each
            # already cancelled: the cascade only walks what they caused).
            cascade = await self.cancellation.cancel(UUID(run_id), exceeded.message)
            if cascade is not None:
                cancelled.extend(r for r in cascade.cascaded if r not in cancelled)
        if cancelled:
            log.info(
                "trace work cancelled: budget exceeded", trace_id=trace_id, runs=len(cancelled)
            )
        return cancelled

    def _run_ended(self, state: RunState) -> None:
        """A run's outcome is recorded: if its usage spent the trace's token or cost
        budget and the budget says cancel, the trace's other work stops now."""
        if self.budget.on_exceeded != "cancel" or state.trace_id is None or state.usage is None:
            return
        if self.budget.max_tokens is None and self.budget.max_cost is None:
            return
        # Outside the ended run: its cancels are of other sessions' runs, not under its
        # session's lease (called while that run still holds it).
        self.in_flight.start(
            self._cancel_if_spent(state.trace_id),
            Owner("budget", state.trace_id),
            context=outside_any_run(),
        )

    async def _cancel_if_spent(self, trace_id: str) -> None:
        spent = self.budget.spent(await self.usage(trace_id))
        if spent is not None:
            await self.cancel_in_flight(trace_id, spent)


# On a reader thread of the store --------------------------------------------------------


def _trace_runs(store: Store, trace_id: str, status: str | None = None) -> list[StoredRun]:
    found: list[StoredRun] = []
    before: tuple[int, str] | None = None
    while True:
        page = store.list_runs(
            RunQuery(limit=COUNT_PAGE, trace_id=trace_id, status=status, before=before)
        )
        found.extend(page)
        if len(page) < COUNT_PAGE:
            return found
        before = (page[-1].created_at, page[-1].run_id)


def _count(store: Store, trace_id: str, config: GatewayConfig, steers: bool) -> TraceUsage:
    usage = TraceUsage()
    for run in _trace_runs(store, trace_id):
        tokens, cost = run_spending(run.usage, run.model, config)
        sent = _steers_sent(store, run.run_id) if steers else 0
        usage = usage.plus(spawn=run.step == "subagent_task", tokens=tokens, cost=cost, steers=sent)
    return usage


def _steers_sent(store: Store, run_id: str) -> int:
    # The run's own record (RunSteerSent): the runs read model keeps no steer count.
    stored = store.work(UUID(run_id))
    if stored is None:
        return 0
    return RunState.model_validate_json(stored.state_json).steers_sent


def _pending_in_trace(store: Store, trace_id: str) -> list[StoredRun]:
    # One walk over the trace's runs, not one per status: a run dispatched between a walk
    # of the running and one of the queued would be in neither (then cancelled only by
    # its parent's cascade, with the cascade's reason, or not at all).
    runs = [run for run in _trace_runs(store, trace_id) if not run.ended]
    # The runs that caused others first (by hop, then age): all of them are cancelled,
    # each for the budget (no cascade: every run of the trace in flight is listed here).
    return sorted(runs, key=lambda run: (run.hop, run.created_at, run.run_id))


def run_spending(
    raw: dict[str, Any] | None, model: str | None, config: GatewayConfig
) -> tuple[int, float]:
    """(tokens, dollars) one run's recorded usage spent: ``totalTokens`` (else input +
    output); the cost the model catalog prices, else a ``cost`` the runtime reported."""
    if not raw:
        return 0, 0.0
    try:
        usage = Usage.model_validate(raw)
    except ValueError:
        return 0, 0.0
    tokens = usage.totalTokens if usage.totalTokens is not None else usage.input + usage.output
    priced = config.cost_of(model, usage)
    return tokens, priced if priced is not None else _reported_cost(raw.get("cost"))


def _reported_cost(value: object) -> float:
    # OpenClaw's usage carries cost as {"total": dollars, ...}; a bare number is taken too.
    if isinstance(value, dict):
        value = value.get("total")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return 0.0
    return float(value) if value != float("inf") else 0.0
