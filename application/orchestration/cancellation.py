"""Cancelling runs (ADR 0017): the cancel with its cascade, and the watch that stops a
runtime call here when another gateway process recorded its run's cancellation.

A cancel is an event (``RunCancelled``), the run's outcome: recorded once, refused by the
domain when the run has ended already, so a cancel racing the run's own end leaves
exactly one of the two. Then the runs it caused (``parentRunId``, transitively) that have
not ended are cancelled in turn: a sub-agent's run takes what it spawned or sent with it.

The cascade is durable without an event of its own: a cancelled run's ``RunCancelled``
is the record that what it caused must end. A process that dies between the two leaves
runs pending under a cancelled ancestor; the gateway cancels those as it opens (before it
resumes any run), and a cancel of the run asked again cascades again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from uuid import UUID

from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.application.orchestration.runs import PENDING, RunEngine
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.run_read_model import RunQuery
from sessionwire.domain.run import RunState

log = library_logger("sessionwire.runs")

# How often a gateway on a real clock looks for cancellations of the runs it executes
# that another process recorded (the owner stops them within a second).
CANCEL_POLL_SECONDS = 0.25
# Children read per query while the cascade walks the runs a cancelled run caused.
CASCADE_PAGE = 1000


@dataclass(frozen=True)
class CancelOutcome:
    state: RunState
    cancelled: bool
    """This call recorded the cancellation (False: the run had ended already)."""
    cascaded: list[str] = field(default_factory=list)
    """Runs it caused that were cancelled with it, in the order cancelled."""


class RunCancellation:
    def __init__(self, *, engine: RunEngine, store: AsyncStore, clock: Clock, in_flight: InFlight):
        self.engine = engine
        self.store = store
        self.clock = clock
        self.in_flight = in_flight
        self._watching = False
        engine.turn_started = self.watch

    async def cancel(self, run_id: UUID, reason: str) -> CancelOutcome | None:
        """Cancel the run and, if it was not over, the runs it caused; None: no such run."""
        outcome = await self.engine.record_cancel(run_id, reason)
        if outcome is None:
            return None
        state, cancelled = outcome
        if not cancelled and state.status != "cancelled":
            return CancelOutcome(state=state, cancelled=False)
        # Cancelled before (this call is a retry): its cascade again, for a process that
        # died before it had cancelled everything the run caused.
        return CancelOutcome(
            state=state, cancelled=cancelled, cascaded=await self._cascade(str(run_id))
        )

    async def resume(self) -> list[str]:
        """Finish the cascades a dead process left unfinished: each pending run with a
        cancelled ancestor that was cancelled after the run started is cancelled now
        (as the cascade would have). Called as the gateway opens, before runs resume.
        The runs cancelled, in the order they started."""
        cancelled: list[str] = []
        for stored in await self.store.pending_work("run", PENDING):
            run = await self.store.run(str(stored.id))
            if run is None or run.ended:
                continue
            ancestor = await self._cancelled_ancestor(run.parent_run_id, since=run.created_at)
            if ancestor is None:
                continue
            outcome = await self.engine.record_cancel(
                stored.id, f"caused by cancelled run {ancestor}"
            )
            if outcome is not None and outcome[1]:
                cancelled.append(str(stored.id))
        if cancelled:
            log.info("cancel cascade resumed", cancelled=len(cancelled))
        return cancelled

    async def _cancelled_ancestor(self, parent: str | None, *, since: int) -> str | None:
        """The nearest run up the chain from ``parent`` cancelled at or after ``since``
        (ms): a cancel whose cascade should have reached the run that started then."""
        seen: set[str] = set()
        while parent is not None and parent not in seen:
            seen.add(parent)
            found = await self.store.run(parent)
            if found is None:
                return None
            if found.status == "cancelled" and (found.ended_at or since) >= since:
                return found.run_id
            parent = found.parent_run_id
        return None

    async def _cascade(self, root: str) -> list[str]:
        """Cancel every not-ended run ``root`` caused, through runs that ended too (a
        finished turn's spawned child may still run)."""
        cancelled: list[str] = []
        seen = {root}
        parents = deque([root])
        reason = f"caused by cancelled run {root}"
        while parents:
            parent = parents.popleft()
            before: tuple[int, str] | None = None
            while True:
                page = await self.store.list_runs(
                    RunQuery(limit=CASCADE_PAGE, parent_run_id=parent, before=before)
                )
                for child in page:
                    if child.run_id in seen:
                        continue
                    seen.add(child.run_id)
                    parents.append(child.run_id)
                    if child.ended:
                        continue
                    outcome = await self.engine.record_cancel(UUID(child.run_id), reason)
                    if outcome is not None and outcome[1]:
                        cancelled.append(child.run_id)
                if len(page) < CASCADE_PAGE:
                    break
                before = (page[-1].created_at, page[-1].run_id)
        return cancelled

    # Cancellations recorded by other processes --------------------------------------------

    def watch(self) -> None:
        """A runtime call started here: on a clock that moves by itself (another process
        may share the store), poll for its run's cancellation while any call runs. On a
        VirtualClock there is one process, and its cancels stop calls directly."""
        if self._watching or not self.clock.moves_by_itself:
            return
        self._watching = True
        # Started by the turn that starts first, inside its run: it watches every run.
        self.in_flight.start(self._poll(), Owner("cancel-watch", "runs"), context=outside_any_run())

    async def _poll(self) -> None:
        try:
            while True:
                running = self.engine.runs_in_flight()
                if not running:
                    return
                for run_id in running:
                    found = await self.store.run(str(run_id))
                    cancelled = found is not None and found.status == "cancelled"
                    if cancelled and self.engine.stop(run_id):
                        log.info("run cancelled by another process", run_id=str(run_id))
                # Parked: a real clock's wait_idle does not wait for this watch.
                await self.in_flight.sleep(CANCEL_POLL_SECONDS, parked=True)
        finally:
            self._watching = False
