"""The process manager of yields (``sessions_yield``, decision 26; ADR 0031).

A yield waits, on the gateway clock, until its children's reports say it may wake (all
of them, or any) or its deadline passes, whichever is first; then it records the wake
and starts the woken turn in one transaction. A recorded yield is pending work: a
gateway reopened, or one that takes over a dead gateway's work, resumes it, and a
second driver of the same yield (another gateway) loses the wake's save and stops, so
the session is woken exactly once.

A spawn that reports pokes the yields of its requester session (``child_reported``):
the yield driving here looks again at once; where none drives here (another gateway
drives it, or none does any more), this gateway starts driving it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sessionwire.application.orchestration.budgeted_managers import BudgetedProcessManager
from sessionwire.application.orchestration.in_flight import Owner
from sessionwire.application.orchestration.keyed_locks import KeyedLocks
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.session_read_model import SessionQuery
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.run import Run
from sessionwire.domain.run_yield import (
    AwaitChildren,
    ChildPending,
    ChildReport,
    RunYield,
    RunYieldState,
    child_report,
    wake_message,
)
from sessionwire.domain.session import to_millis
from sessionwire.domain.spawn import SpawnState, spawn_id_for
from sessionwire.domain.trace_budget import BudgetExceeded

# Child sessions read when looking for a session's children (its active ones).
MAX_CHILDREN_READ = 1000


async def spawns_of(store: AsyncStore, session_key: str) -> list[SpawnState]:
    """The spawns of the session's active child sessions, oldest first."""
    children = await store.list_sessions(
        SessionQuery(limit=MAX_CHILDREN_READ, spawned_by=session_key)
    )
    states: list[SpawnState] = []
    for child in children:
        stored = await store.work(spawn_id_for(child.state.key))
        if stored is not None:
            states.append(SpawnState.model_validate_json(stored.state_json))
    states.sort(key=lambda state: (state.started_at or 0, state.child_key))
    return states


async def last_wake(store: AsyncStore, session_key: str) -> RunYieldState | None:
    """The session's latest woken yield."""
    woken = await store.pending_work("yield", ("woken",), session_key=session_key)
    if not woken:
        return None
    return RunYieldState.model_validate_json(woken[-1].state_json)


class YieldDriver(BudgetedProcessManager[RunYield]):
    kind = "yield"
    pending_statuses = ("waiting",)
    aggregate_class = RunYield
    state_class = RunYieldState

    def setup(self) -> None:
        # The yields waiting here, each with its session and what wakes its driver.
        self._pokes: dict[UUID, tuple[str, asyncio.Future[None]]] = {}
        # Per requester session: its children's reports are saved, and its yields read
        # their children and record a wake, one at a time (``reports_of``).
        self._report_locks = KeyedLocks(self.in_flight)

    def log_context(self, aggregate: RunYield) -> dict[str, Any]:
        return {"session_key": aggregate.state.session_key, "run_id": aggregate.state.run_id}

    async def take(self, aggregate: RunYield, step: AwaitChildren) -> None:
        yield_id = aggregate.id
        while True:
            # Listening before looking: a report recorded while we look still wakes us.
            poke: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._pokes[yield_id] = (aggregate.state.session_key, poke)
            try:
                fresh = await self.load(yield_id)
                if fresh is None or fresh.next_step() is None:
                    return
                children = await self._children(fresh)
                finished = {
                    sid for sid, state in children.items() if state is None or state.reported
                }
                reason = fresh.wake_reason(finished, to_millis(self.clock.now()))
                if reason is not None:
                    await self._wake(yield_id)
                    return
                due = (
                    None
                    if fresh.state.due_at is None
                    else datetime.fromtimestamp(fresh.state.due_at / 1000, tz=UTC)
                )
                # Parked: a yield's deadline is its own schedule (a real clock's
                # wait_idle does not wait for it); the children's runs are work.
                await self.in_flight.wait_for(poke, due=due, parked=True)
            finally:
                if self._pokes.get(yield_id, (None, None))[1] is poke:
                    del self._pokes[yield_id]

    async def _children(self, yielded: RunYield) -> dict[str, SpawnState | None]:
        found: dict[str, SpawnState | None] = {}
        for child in yielded.state.children:
            stored = await self.store.work(UUID(child.spawn_id))
            found[child.spawn_id] = (
                None if stored is None else SpawnState.model_validate_json(stored.state_json)
            )
        return found

    async def _wake(self, yield_id: UUID) -> None:
        """Record the wake and start the woken turn, together; nothing if it woke already
        (here, or on another gateway). The woken turn is a run of the yield's trace: its
        budget admits it first (ADR 0034); refused, the wake is recorded without a turn,
        and the refusal with it. The children are read under the session's report lock,
        held to the commit: every report saved before the wake is in it (ADR 0060)."""
        waiting = await self.load(yield_id)
        if waiting is None:
            return
        trace_id = waiting.state.trace_id
        run: Run | None = None
        refused: BudgetExceeded | None = None
        woken: RunYield | None = None
        async with self.budgets.admit(trace_id) as exceeded:
            async for uow in retrying(self.store, f"yield {yield_id} wake"):
                with uow:
                    async with self.reports_of(waiting.state.session_key):
                        fresh = await uow.work(yield_id, RunYield, RunYieldState)
                        if fresh is None or fresh.state.status != "waiting":
                            return
                        children = await self._children(fresh)
                        now = self.clock.now()
                        finished = {
                            sid
                            for sid, state in children.items()
                            if state is None or state.reported
                        }
                        reason = fresh.wake_reason(finished, to_millis(now))
                        if reason is None:
                            return  # looked again: not yet (the driver waits on)
                        reports, pending = _reports(fresh, children)
                        wake_run_id = fresh.wake(
                            reason=reason,
                            reports=reports,
                            still_running=pending,
                            at=now,
                            refused=exceeded.message if exceeded is not None else None,
                        )
                        state = fresh.state
                        if exceeded is None:
                            run = uow.add(
                                Run.start(
                                    run_id=wake_run_id,
                                    session_key=state.session_key,
                                    agent_id=state.agent_id,
                                    step="yield_wake",
                                    message=wake_message(state),
                                    timeout_seconds=self.config.agents.defaults.timeoutSeconds,
                                    at=now,
                                    causality=fresh.wake_causality(),
                                )
                            )
                        await uow.commit()
                    refused = exceeded
                    woken = fresh
        if refused is not None and woken is not None:
            self.log.info("yield woken, its turn refused", yield_id=str(yield_id))
            await self.budgets.refuse(
                refused,
                chain=woken.wake_causality(),
                requester_key=woken.state.session_key,
                tool="sessions_yield",
                reference=woken.state.session_key,
                target_key=woken.state.session_key,
                caller_run_id=woken.state.run_id,
            )
        if run is not None:
            self.log.info(
                "yield woken",
                session_key=run.state.session_key,
                yield_id=str(yield_id),
                reason=run.state.message.splitlines()[0],
            )
            self.runs.enqueue(run.id, run.state.session_key)

    async def until_woken(self, yield_id: UUID) -> None:
        """Wait until the yield has woken: drive it here if it is not driven here yet
        (another gateway may wake it first; this driver then finds it woken)."""
        # Twice at most: a driver that stalled (logged) is not restarted in a loop here;
        # the wait for the woken turn then goes on until a resume drives the yield again.
        for _ in range(2):
            found = await self.load(yield_id)
            if found is None or found.state.status != "waiting":
                return
            self.start(yield_id)
            driver = self._tasks.get(yield_id)
            if driver is not None:
                await self.in_flight.wait_for(driver)

    @asynccontextmanager
    async def reports_of(self, session_key: str) -> AsyncIterator[None]:
        """Held while a report of one of ``session_key``'s children is saved (the spawn
        driver) and while a yield of that session reads its children and records its
        wake: the wake carries every report saved before it, not a read taken before a
        report that committed first (simulator seed 100039, ADR 0060). One gateway's
        lock: across gateways a report that lands in that window reaches the next wake."""
        async with self._report_locks.held(session_key):
            yield

    def child_reported(self, session_key: str) -> None:
        """A child of ``session_key`` has reported: its yields look again."""
        poked = False
        for waiting_key, poke in self._pokes.values():
            if waiting_key == session_key and not poke.done():
                poke.set_result(None)
                poked = True
        if not poked:
            # None waits here: one may wait elsewhere, or on no gateway at all (its
            # driver stopped). Driving it here too is safe: one wake is recorded.
            self.in_flight.start(
                self._drive_waiting(session_key),
                Owner("yield", session_key),
                context=outside_any_run(),
            )

    async def _drive_waiting(self, session_key: str) -> None:
        for stored in await self.store.pending_work(
            self.kind, self.pending_statuses, session_key=session_key
        ):
            self.start(stored.id)


def _reports(
    yielded: RunYield, children: dict[str, SpawnState | None]
) -> tuple[list[ChildReport], list[ChildPending]]:
    reports: list[ChildReport] = []
    pending: list[ChildPending] = []
    for child in yielded.state.children:
        state = children.get(child.spawn_id)
        if state is None:
            reports.append(
                ChildReport(
                    spawn_id=child.spawn_id,
                    child_key=child.child_key,
                    label=child.label,
                    status="unknown",
                    report=child_report("unknown", None, "the spawn is not in the store"),
                )
            )
        elif state.reported:
            outcome = state.outcome or "unknown"
            reports.append(
                ChildReport(
                    spawn_id=child.spawn_id,
                    child_key=child.child_key,
                    label=child.label,
                    status=outcome,
                    report=child_report(outcome, state.announce_reply, state.error),
                )
            )
        else:
            pending.append(
                ChildPending(
                    spawn_id=child.spawn_id,
                    child_key=child.child_key,
                    label=child.label,
                    status="running" if state.outcome is None else "reporting",
                    outcome=state.outcome,
                )
            )
    return reports, pending
