"""Running agent turns: one mailbox (actor) per session, a gateway-wide concurrency cap.

Runs in one session run strictly one at a time, in arrival order; runs in different
sessions run concurrently, at most ``agents.defaults.maxConcurrent`` at once. Every step
of a run is recorded before the next begins, so after a crash the runs still pending are
found in the store and run again: a run's user message is appended to the transcript at
its first dispatch only, its outcome exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import secrets
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.application.forks import forked_window
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.conflicts import back_off
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.orchestration.run_scope import outside_any_run, run_scoped
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.application.ports.session_locks import LeaseLost
from sessionwire.application.ports.session_read_model import TranscriptWindow
from sessionwire.application.ports.telemetry import RunSpan
from sessionwire.application.unit_of_work import UnitOfWork, retrying
from sessionwire.domain.base import Aggregate
from sessionwire.domain.run import InputRequest, Run, RunAlreadyEnded, RunState
from sessionwire.domain.session import SessionClosed
from sessionwire.domain.transcript import TranscriptMessage, Usage

log = library_logger("sessionwire.runs")

PENDING = ("queued", "running")
# Runs not ended: pending, or waiting for input (decision 33), which hold no lane slot,
# lease or connection, only a deadline timer.
OPEN = (*PENDING, "input_required")
# Times a run is retried in this process when executing it raises (not the agent
# failing, which is an outcome, but the gateway: a lost connection, say).
MAX_RUN_CRASHES = 3


class Lane:
    """The ``maxConcurrent`` permits, handed to waiting runs in arrival order, but first
    back to a run that lent its permit and whose wait is over (``LaneSlot``).

    A wait for a permit is a lock wait of the registry: its grant is a future, done the
    moment a permit is handed over, so the wait counts as runnable from then on.
    """

    def __init__(self, permits: int, in_flight: InFlight) -> None:
        self.free = permits
        self._in_flight = in_flight
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._lent: list[LaneSlot] = []
        """Slots that lent their permit: owed one back, ahead of the waiters, the moment
        every run they wait for has ended."""

    async def acquire(self, *, first: bool = False) -> None:
        """A permit; ``first``: ahead of the runs waiting for one (a lender's take-back
        whose wait ended otherwise: its timeout, say)."""
        self._repay_free()
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        grant: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if first:
            self._waiters.appendleft(grant)
        else:
            self._waiters.append(grant)
        try:
            await self._in_flight.wait_for(grant, kind="lock")
        except asyncio.CancelledError:
            if grant.done() and not grant.cancelled():
                self.release()  # handed over just as the wait was cancelled
            else:
                grant.cancel()
            raise

    def release(self) -> None:
        # A lender whose runs have ended first. Decided here, as the permit comes free
        # (the ended run's own, as a rule): the lender's task, woken by that end, runs
        # only later, and by then a waiter would have the permit and the lender, its
        # answer in hand and its session locked, would wait behind it (simulator seed
        # 129: tests/integration/test_simulator.py).
        for slot in self._lent:
            if slot.owed:
                self._lent.remove(slot)
                slot.held = True
                return
        while self._waiters:
            grant = self._waiters.popleft()
            if not grant.done():
                grant.set_result(None)
                return
        self.free += 1

    def _repay_free(self) -> None:
        """Free permits to the lenders owed one first (a run they waited for ended
        without taking theirs: cancelled while queued, say, or run by another gateway)."""
        for slot in list(self._lent):
            if self.free == 0:
                return
            if slot.owed:
                self._lent.remove(slot)
                slot.held = True
                self.free -= 1

    def lent(self, slot: LaneSlot) -> None:
        if slot not in self._lent:
            self._lent.append(slot)

    def repaid(self, slot: LaneSlot) -> None:
        if slot in self._lent:
            self._lent.remove(slot)


class LaneSlot:
    """The lane slot of one executing run: it holds at most one of the ``maxConcurrent``
    permits, lends it while the run waits for another run, and takes it back: the
    permit next freed once the runs it waits for have ended, before any run that
    waits for one (a lent place is the lender's: docs/openai-runtime.md)."""

    def __init__(self, lane: Lane, run_id: UUID) -> None:
        self._lane = lane
        self.run_id = run_id
        self.held = False
        self._lenders = 0
        self._awaited: list[tuple[asyncio.Future[Any], ...]] = []
        """Each wait lending the permit: the futures any one of which done ends it."""
        self._closed = False

    async def acquire(self) -> None:
        await self._lane.acquire()
        self.held = True

    @property
    def owed(self) -> bool:
        """Lent, and every run it waits for has ended: the next permit freed is its."""
        return (
            not self.held
            and not self._closed
            and bool(self._awaited)
            and len(self._awaited) == self._lenders
            and all(any(f.done() for f in awaited) for awaited in self._awaited)
        )

    def lend(self, *awaited: asyncio.Future[Any]) -> None:
        """The run waits (until one of ``awaited`` is done: the end of the run it waits
        on, say): free its permit for the run it waits on (nested sends)."""
        self._lenders += 1
        if awaited:
            self._awaited.append(awaited)
        if self.held:
            self.held = False
            self._lane.release()
        self._lane.lent(self)

    async def take_back(self, *awaited: asyncio.Future[Any]) -> None:
        """The wait is over: the run gets a permit again (unless it has ended meanwhile or
        another of its waits still lends it); handed back already if freed since its
        wait ended, else the first one freed."""
        self._lenders -= 1
        if awaited in self._awaited:
            self._awaited.remove(awaited)
        if self._lenders > 0 or self._closed or self.held:
            if self.held or self._closed:
                self._lane.repaid(self)
            return
        self._lane.repaid(self)
        await self._lane.acquire(first=True)
        if self._closed or self._lenders > 0:
            # Ended, or lent again, while this wait queued for the permit.
            self._lane.release()
            return
        self.held = True

    def close(self) -> None:
        """The run is done with the lane: its permit, if it holds one, goes back."""
        self._closed = True
        self._lane.repaid(self)
        if self.held:
            self.held = False
            self._lane.release()


# The slot of the run whose turn the current task is in. A run that waits for another
# run (sessions_send in wait mode from inside its turn) lends its slot while it waits,
# so a nested send never starves on maxConcurrent (OpenClaw gives nested runs a lane of
# their own). Tool calls from an in-process runtime run in the run's turn, so they see
# it; the exchange and spawn drivers are started outside any run (``outside_any_run``),
# so they never lend, nor take back, a slot that is not theirs.
_current_slot: ContextVar[LaneSlot | None] = run_scoped(
    ContextVar("sessionwire_lane_slot", default=None), None
)

NESTED_CALLS = uuid5(NAMESPACE_URL, "https://sessionwire.dev/nested-calls")


class RunTurn:
    """One dispatch of a run to its agent: what the tool calls the agent makes during it
    are linked to (its chain, decision 17), in process or over HTTP/MCP by ``token``."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        # Handed to the runtime (RunRequest.run_token): a caller over HTTP or MCP proves
        # with it that it speaks for this turn; unguessable, and dead once the turn ends.
        self.token = secrets.token_urlsafe(24)
        self._calls: Counter[str] = Counter()

    def call_id(self, tool: str, fingerprint: str) -> UUID:
        """The id of the run a call starts: the same for the n-th identical call in every
        attempt of this run, so a turn dispatched again after a crash that repeats a send
        or spawn finds what its first attempt started instead of starting it twice (a
        second copy would fork the chain, each copy with a full hop budget)."""
        key = f"{tool}\x1f{fingerprint}"
        self._calls[key] += 1
        return uuid5(NESTED_CALLS, f"{self.state.run_id}\x1f{key}\x1f{self._calls[key]}")


# The turn the current task is in: a tool call an in-process runtime makes during its
# turn (sessions_send, sessions_spawn) belongs to that run's chain (decision 17).
_current_turn: ContextVar[RunTurn | None] = run_scoped(
    ContextVar("sessionwire_current_turn", default=None), None
)


def current_turn() -> RunTurn | None:
    """The turn making the current call, when it is made from inside a run's turn."""
    return _current_turn.get()


def current_run() -> RunState | None:
    """The run making the current call, when it is made from inside a run's turn."""
    turn = _current_turn.get()
    return None if turn is None else turn.state


class RunEngine:
    def __init__(
        self,
        *,
        store: AsyncStore,
        clock: Clock,
        runtime: AgentRuntime,
        max_concurrent: int,
        in_flight: InFlight | None = None,
        tools_for: Callable[[Run], Awaitable[tuple[str, ...]]] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.runtime = runtime
        self.tools_for = tools_for
        self.call_tool: ToolCall | None = None
        """The gateway's ``call_tool``: a runtime calls its run's tools through it."""
        self.in_flight = in_flight or InFlight(clock)
        # What a runtime sleeps on: the gateway clock, as its run's work.
        self.work_clock = WorkClock(clock, self.in_flight)
        self._lane = Lane(max_concurrent, self.in_flight)
        self._mailboxes: dict[str, asyncio.Queue[UUID]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._endings: dict[UUID, asyncio.Future[RunState]] = {}
        # Runs queued here and not settled yet: this gateway's actor settles their ending
        # when it records (or finds) their end, so a wait for one need not read the store.
        self._queued: set[UUID] = set()
        # Waits that end when the run asks for input as well as when it ends (a waited
        # sessions_send answers input_required at once, decision 33).
        self._pauses: dict[UUID, asyncio.Future[RunState]] = {}
        # Waiting runs whose deadline this process watches (one timer a run).
        self._deadlines: dict[UUID, asyncio.Task[None]] = {}
        self._turns: dict[str, RunTurn] = {}
        # Runs whose runtime call is in flight here: done when the run is cancelled.
        self._stops: dict[UUID, asyncio.Future[None]] = {}
        # Runs whose cancel is being committed, each with what resolves when it is: from
        # the decision on, their runtime is never asked (a writer thread's commit leaves
        # the loop free, and the run's actor may reach the runtime call meanwhile).
        self._cancelling: dict[UUID, asyncio.Future[None]] = {}
        # Runs executing here, with whether a cancel came before their runtime call.
        self._executing: dict[UUID, bool] = {}
        # Outcomes in hand whose save failed (a store fault): the run's next attempt here
        # records this one instead of asking its agent again (the agent has answered).
        self._unsaved: dict[UUID, object] = {}
        # Runs dispatched with the end of the run before them in their session, by that
        # ended run's id: its actor runs them next, in the same lock hold (ADR 0057).
        self._chained: dict[UUID, Run] = {}
        self.turn_started: Callable[[], None] = lambda: None
        """Called as a runtime call starts (the cancellation watch starts polling)."""
        self.outcome_lock: Callable[[RunState], AbstractAsyncContextManager[None]] = lambda state: (
            nullcontext()
        )
        """Held while a run's outcome (its usage) is recorded: the trace budget's lock
        (ADR 0034), so no run is admitted into its trace on a count missing that usage."""
        self.run_ended: Callable[[RunState], None] = lambda state: None
        """Called once a run's outcome is recorded here (the trace budget's cancel)."""
        self.outcome_reactions: list[OutcomeReaction] = []
        """The process managers' share of a run's end (ADR 0057): each may add to the
        unit of work that records the outcome what its aggregate decides on it (the
        exchange's next steps, say), so the end and the reaction are one commit."""
        # Runtime calls of this engine's runs cancelled at their timeout (or cancel), kept
        # until they stop (one may ignore cancellation): this gateway's close waits for
        # its own only.
        self._abandoned: set[asyncio.Task[object]] = set()
        self._closing = False

    # Accepting runs -------------------------------------------------------------------

    async def save_and_enqueue(
        self, run: Run, *others: Aggregate, then: Callable[[], object] | None = None
    ) -> None:
        """Record a new run (with any aggregates that change with it), queue it, and
        ``then`` start what drives it on (its exchange or spawn driver).

        On a task of their own: a caller cancelled meanwhile (the turn of a run cancelled
        while its tool call saves a send) must not leave a run, or its exchange, that is
        recorded but never queued or driven, pending until the next reopen."""
        await asyncio.shield(
            self.in_flight.start(
                self._save_and_enqueue(run, others, then),
                Owner("run-start", str(run.id)),
                context=outside_any_run(),
            )
        )

    async def _save_and_enqueue(
        self, run: Run, others: tuple[Aggregate, ...], then: Callable[[], object] | None
    ) -> None:
        await self.store.save(run, *others)
        self.enqueue(run.id, run.state.session_key)
        if then is not None:
            then()

    async def ensure_started(self, run: Run, *others: Aggregate, absent: bool = False) -> None:
        """Start ``run`` (saved with ``others``) unless a run with its id exists already.

        Process managers derive their runs' ids from their own, so asking again after a
        restart, or from a second gateway, finds the run instead of starting it twice.
        ``absent``: the caller has just read that no run has the id, so it is not read
        again; the save still finds one started since (a new stream's save conflicts).
        """
        existing = None if absent else await self.load(run.id)
        if existing is None:
            try:
                await self.save_and_enqueue(run, *others)
                return
            except StoreConflict:
                existing = await self.load(run.id)
                if existing is None:
                    raise
        if not existing.state.ended and existing.id not in self._queued:
            # Not queued here (started before a restart, or by another gateway): queued,
            # so it runs and whoever waits here hears its end.
            self.enqueue(existing.id, existing.state.session_key)

    def enqueue(self, run_id: UUID, session_key: str) -> None:
        self._ending(run_id)
        self._queued.add(run_id)
        mailbox = self._mailboxes.setdefault(session_key, asyncio.Queue())
        mailbox.put_nowait(run_id)
        worker = self._workers.get(session_key)
        if worker is None or worker.done():
            worker = self.in_flight.start(
                self._work(session_key, mailbox),
                Owner("session", session_key),
                context=outside_any_run(),
            )
            self._workers[session_key] = worker
            worker.add_done_callback(lambda done: self._retire(session_key, done))

    def _retire(self, session_key: str, worker: asyncio.Task[None]) -> None:
        # An idle session keeps neither a task nor a mailbox.
        if self._workers.get(session_key) is worker:
            del self._workers[session_key]
            mailbox = self._mailboxes.get(session_key)
            if mailbox is not None and mailbox.empty():
                del self._mailboxes[session_key]

    async def resume(self) -> int:
        """Queue every run the store still has pending, in the order they arrived, and
        watch the deadline of every run waiting for input."""
        pending = await self.store.pending_work("run", OPEN)
        now = self.clock.now()
        for stored in pending:
            run = stored.to_aggregate(Run, RunState)
            if run.state.status == "input_required" and not run.overdue(now):
                self.watch_deadline(run.state)
                continue
            if run.overdue(now):
                # Decision 16: recorded as timed out now, whatever else is queued before
                # it; its actor then only settles it (never dispatches it).
                await self._time_out_overdue(run, now)
            self.enqueue(run.id, run.state.session_key)
        return len(pending)

    async def _time_out_overdue(self, run: Run, now: datetime) -> None:
        run.time_out(at=now)
        try:
            await self.store.save(run)
        except StoreConflict:
            pass  # another gateway recorded its end (or a dispatch) first: its actor sees
        else:
            log.info("overdue run timed out", session_key=run.state.session_key, run_id=str(run.id))

    # Waiting for outcomes -------------------------------------------------------------

    def _ending(self, run_id: UUID) -> asyncio.Future[RunState]:
        future = self._endings.get(run_id)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._endings[run_id] = future
        return future

    async def load(self, run_id: UUID) -> Run | None:
        stored = await self.store.work(run_id)
        return None if stored is None else stored.to_aggregate(Run, RunState)

    async def wait(
        self, run_id: UUID, timeout: float | None = None, *, until_input: bool = False
    ) -> RunState | None:
        """The run's final state, or None if ``timeout`` seconds pass on the gateway clock;
        ``until_input``: its state as soon as it waits for input, too."""
        if run_id not in self._queued:
            # Not queued here (or ended already, or waiting for input: its next turn may
            # run on any gateway): the store says whether it has ended or waits.
            run = await self.load(run_id)
            if run is not None and (
                run.state.ended or (until_input and run.state.status == "input_required")
            ):
                return run.state
            if run is not None and run_id not in self._endings:
                # Another gateway started it (a resume can find its exchange but not its
                # run). Only this gateway's session actor settles the future, so queue
                # the run: the actor runs it, or finds it ended once the owner is done.
                self.enqueue(run_id, run.state.session_key)
        ending = future = self._ending(run_id)
        if until_input:
            future = self._either_end_or_pause(run_id, future)
        # Over the moment the run ends: the end's own future, done as it is recorded
        # (the pause's is done a loop step later), so the lane gives this run the permit
        # the ended run frees.
        waits = (future,) if future is ending else (future, ending)
        slot = _current_slot.get()
        if slot is not None:
            slot.lend(*waits)
        try:
            due = None if timeout is None else self.clock.now() + timedelta(seconds=timeout)
            ended = await self.in_flight.wait_for(future, due=due)
            return future.result() if ended else None
        finally:
            if slot is not None:
                await slot.take_back(*waits)

    def _either_end_or_pause(
        self, run_id: UUID, ending: asyncio.Future[RunState]
    ) -> asyncio.Future[RunState]:
        """What is done as the run ends or asks for input, whichever comes first."""
        pause = self._pauses.get(run_id)
        if pause is None or pause.done():
            pause = self._pauses[run_id] = asyncio.get_running_loop().create_future()

        def ended(done: asyncio.Future[RunState]) -> None:
            if self._pauses.get(run_id) is pause:
                del self._pauses[run_id]  # nothing pauses an ended run
            if not pause.done() and not done.cancelled():
                pause.set_result(done.result())

        ending.add_done_callback(ended)
        return pause

    def _paused(self, run: Run) -> None:
        """The run waits for input: waits that end there hear it; its deadline is watched.
        It is no longer this gateway's to settle: the answer may start its next turn on
        any gateway, so a later wait reads the store."""
        self._queued.discard(run.id)
        pause = self._pauses.pop(run.id, None)
        if pause is not None and not pause.done():
            pause.set_result(run.state)
        self.watch_deadline(run.state)

    # Waiting for input (decision 33) -------------------------------------------------

    def watch_deadline(self, state: RunState) -> None:
        """Time the waiting run out at its deadline unless an answer comes first: a timer
        on the gateway clock, armed again by every gateway that opens (``resume``), so
        the deadline holds across crashes; whichever fires first records the end."""
        run_id = UUID(state.run_id)
        if state.deadline_at is None or run_id in self._deadlines:
            return
        timer = self.in_flight.start(
            self._time_out_waiting(run_id, state.seconds_left(self.clock.now())),
            Owner("input-deadline", state.run_id),
            context=outside_any_run(),
        )
        self._deadlines[run_id] = timer
        timer.add_done_callback(lambda _: self._deadlines.pop(run_id, None))

    async def _time_out_waiting(self, run_id: UUID, seconds: float) -> None:
        # Parked: a real clock's wait_idle does not wait for a person's deadline.
        await self.in_flight.sleep(seconds, parked=True)
        for attempt in range(MAX_RUN_CRASHES):
            try:
                await self._record_waiting_timeout(run_id)
                return
            except Exception:
                # A failing save must not leave the run waiting past its deadline until
                # a restart arms the timer again (the simulator's store fault found it).
                log.exception("waiting run's timeout not recorded", run_id=str(run_id))
                await back_off(attempt + 1)

    async def _record_waiting_timeout(self, run_id: UUID) -> None:
        async for uow in retrying(self.store, f"run {run_id}"):
            with uow:
                found = await uow.work(run_id, Run, RunState)
                if found is None:
                    return
                if found.state.status != "input_required":
                    # Answered meanwhile, maybe in another gateway: queued here too, so
                    # whoever waits here for it (an exchange, a send) hears its end (the
                    # actor finds it ended, or runs it, fenced by the session's lock).
                    self.enqueue(run_id, found.state.session_key)
                    return
                run = found
                run.time_out(at=self.clock.now())
                await uow.commit()
        log.info(
            "run waiting for input timed out", session_key=run.state.session_key, run_id=str(run_id)
        )
        self.store.telemetry.run_ended(run.state.status)
        self._settle(run)
        self.run_ended(run.state)

    async def provide_input(self, run_id: UUID, text: str, *, by: str | None) -> RunState:
        """Record the answer and queue the run's next turn: RunNotWaiting for a run not
        waiting (a second answer meets the first's record: one wins), AnswerNotAnOption
        for one its options do not hold; nothing is recorded then."""
        async for uow in retrying(self.store, f"run {run_id}"):
            with uow:
                found = await uow.work(run_id, Run, RunState)
                assert found is not None
                run = found
                run.provide_input(text=text, by=by, at=self.clock.now())
                await uow.commit()
        timer = self._deadlines.pop(run_id, None)
        if timer is not None:
            self.in_flight.cancel(timer)
        log.info("run's input provided", session_key=run.state.session_key, run_id=str(run_id))
        self.enqueue(run_id, run.state.session_key)
        return run.state

    def _settle(self, run: Run) -> None:
        self._queued.discard(run.id)
        future = self._endings.pop(run.id, None)
        if future is not None and not future.done():
            future.set_result(run.state)

    # The session actor ----------------------------------------------------------------

    async def _work(self, session_key: str, mailbox: asyncio.Queue[UUID]) -> None:
        while not mailbox.empty() and not self._closing:
            run_id = mailbox.get_nowait()
            self.in_flight.owns("run", str(run_id))
            try:
                await self._execute_retrying(session_key, run_id)
            finally:
                self._unsaved.pop(run_id, None)

    async def _execute_retrying(self, session_key: str, run_id: UUID) -> None:
        for attempt in range(MAX_RUN_CRASHES):
            try:
                await self._execute_in_lane(session_key, run_id)
                return
            except asyncio.CancelledError:
                raise
            except LeaseLost as error:
                # Taken for dead and taken over (decision 24): the save was refused
                # whole. The retry waits for the session's lease and finds the run
                # ended by its new owner (or given back unended: runs it, fenced anew).
                log.warning(
                    "run's save refused: its session's lease moved on to another gateway",
                    session_key=session_key,
                    run_id=str(run_id),
                    error=str(error),
                )
                await back_off(attempt + 1)
            except Exception:  # one broken run must not stop the session's mailbox
                log.exception(
                    "run crashed", session_key=session_key, run_id=str(run_id), attempt=attempt
                )
                await back_off(attempt + 1)
        # Still breaking (a database that keeps failing, say): record the failure so
        # whoever waits for this run hears its end instead of waiting forever.
        await self._fail_crashed(run_id)

    async def _execute_in_lane(self, session_key: str, run_id: UUID) -> None:
        slot = LaneSlot(self._lane, run_id)
        token = _current_slot.set(slot)
        try:
            # The lane first: a session lock may hold a database connection (PostgreSQL),
            # so at most maxConcurrent of them are held, never the whole pool (a run
            # lending its slot while it waits for a nested run keeps its lock).
            await slot.acquire()
            async with self.in_flight.session_lock(self.store, self.store.location, session_key):
                await self._execute(run_id)
                await self._execute_chained(session_key, run_id)
        finally:
            _current_slot.reset(token)
            slot.close()

    async def _fail_crashed(self, run_id: UUID) -> None:
        # An answer the agent gave is still its outcome, if the store takes it now.
        crashed = RuntimeError(f"the run crashed {MAX_RUN_CRASHES} times in the gateway")
        outcome = self._unsaved.get(run_id, crashed)
        try:
            loaded = await self.load(run_id)
            # An answer's usage counts in its trace's budget: recorded under its lock.
            lock = nullcontext() if loaded is None else self.outcome_lock(loaded.state)
            async with lock:
                run = await self._record_outcome(run_id, outcome)
        except Exception:  # the store itself is failing: a restart will run it again
            log.exception("crashed run not recorded", run_id=str(run_id))
            return
        self.store.telemetry.run_ended(run.state.status)
        self._settle(run)

    async def _execute_chained(self, session_key: str, run_id: UUID) -> None:
        """Run the runs dispatched with the end of the one before, in the same lock hold
        and lane slot. One that breaks is queued as any run is: its retry records the
        outcome in hand, or finds it dispatched and dispatches it again."""
        while (chained := self._chained.pop(run_id, None)) is not None:
            self.in_flight.owns("run", str(chained.id))
            try:
                await self._execute(chained.id, dispatched=chained)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "chained run crashed", session_key=session_key, run_id=str(chained.id)
                )
                self.enqueue(chained.id, session_key)
                return
            run_id = chained.id

    async def _execute(self, run_id: UUID, *, dispatched: Run | None = None) -> None:
        # Executing here from now: a cancel recorded before its runtime call starts
        # (while the dispatch is saved, say) still stops that call as it starts.
        self._executing[run_id] = False
        try:
            await self._execute_run(run_id, dispatched)
        finally:
            self._executing.pop(run_id, None)

    async def _execute_run(self, run_id: UUID, dispatched: Run | None = None) -> None:
        run = await self.load(run_id)
        if run is None:
            return
        bound = log.bind(session_key=run.state.session_key, run_id=str(run_id))
        if run.state.ended:
            self._settle(run)
            return
        if run.state.status == "input_required":
            # Queued for a waiter (a send waiting from another gateway), not to run: the
            # run has no turn until its answer comes.
            self._paused(run)
            return
        unsaved = self._unsaved.get(run_id, _NOTHING)
        if (
            unsaved is _NOTHING
            and dispatched is not None
            and run.state.status == "running"
            and run.version == dispatched.version
        ):
            # Dispatched with the end of the run before it (ADR 0057), nothing since.
            bound.info("run dispatched", step=run.state.step, attempt=run.state.attempts)
        elif unsaved is _NOTHING:
            run = await self._record_dispatch(run)
            if run.state.ended:
                self._settle(run)
                return
            if run.state.status == "input_required":
                self._paused(run)
                return
            bound.info("run dispatched", step=run.state.step, attempt=run.state.attempts)
        else:
            bound.info("run's outcome recorded again", step=run.state.step)
        state = run.state
        telemetry = self.store.telemetry
        with telemetry.run_span(
            RunSpan(
                run_id=state.run_id,
                session_key=state.session_key,
                agent_id=state.agent_id,
                step=state.step,
                trace_id=state.trace_id,
                parent_run_id=state.parent_run_id,
            )
        ) as span:
            outcome = await self._call_runtime(run) if unsaved is _NOTHING else unsaved
            try:
                async with self.outcome_lock(run.state):
                    run = await self._record_outcome(run_id, outcome, locked=True)
            except Exception:
                # Not saved (or not known to be: a retry that finds it saved reads it
                # back). The mailbox tries this run again; that attempt records this
                # outcome, never dispatching the run or asking its agent a second time.
                self._unsaved[run_id] = outcome
                raise
            span.status, span.error = run.state.status, run.state.error
        if run.state.status == "input_required":
            bound.info("run waits for input")
            self._paused(run)
            return
        bound.info("run ended", status=run.state.status)
        telemetry.run_ended(run.state.status)
        self._settle(run)
        self.run_ended(run.state)

    async def _record_dispatch(self, run: Run) -> Run:
        """Mark the run dispatched; its first dispatch appends its user message."""
        async for uow in retrying(self.store, f"run {run.id}"):
            with uow:
                # The run just loaded serves the first attempt; after a conflict it is stale.
                reloaded = await uow.work(run.id, Run, RunState) if uow.attempt else uow.add(run)
                assert reloaded is not None
                run = reloaded
                if run.state.ended or run.state.status == "input_required":
                    return run
                now = self.clock.now()
                if run.overdue(now):
                    # Decision 16: past its deadline (the gateway was down, or the run
                    # waited in its mailbox that long) it is timed out, never dispatched.
                    run.time_out(at=now)
                    await uow.commit()
                    continue
                session = await uow.session(run.state.session_key)
                if session is None:
                    run.fail(error=f"Session not found: {run.state.session_key}", at=now)
                elif not session.is_active:
                    # No work for an archived or deleted session, whichever attempt: a
                    # run queued before the close, or resumed after a reopen that fired
                    # the archive timer, ends here instead of reaching an agent.
                    run.fail(
                        error=f"session {run.state.session_key} is {session.state.status}",
                        at=now,
                    )
                else:
                    run.dispatch(at=now)
                    if run.state.first_dispatch_of_turn:
                        session.append_message(
                            _user_message(run, now),
                            at=now,
                            provenance=run.state.message_provenance(),
                        )
                await uow.commit()
        return run

    async def _call_runtime(self, run: Run) -> object:
        """What the runtime returned, the error it raised, TIMED_OUT or CANCELLED."""
        if self._executing.get(run.id) or run.id in self._cancelling:
            return CANCELLED  # cancelled since this execution began: never asked
        state = run.state
        request = RunRequest(
            run_id=state.run_id,
            session_key=state.session_key,
            agent_id=state.agent_id,
            step=state.step,
            message=state.message,
            context=state.context,
            clock=self.work_clock,
            # The dispatch just found the run's session active (a run whose session is
            # missing or closed ends there, never reaching its agent): the session is
            # read again only if the runtime asks for its transcript.
            transcript=_transcript_reader(self.store, state.session_key),
            turn=state.turn,
            requester_key=state.requester_key,
            tools=await self.tools_for(run) if self.tools_for is not None else (),
            call_tool=_tool_caller(self.call_tool, state.session_key),
        )
        # The deadline was recorded when the run started: time spent queued, or before
        # a crash, counts against it.
        seconds = max(0.0, state.seconds_left(self.clock.now()))
        turn = RunTurn(state)
        request = dataclasses.replace(request, run_token=turn.token)
        self._turns[turn.token] = turn
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stops[run.id] = stop
        # Set while the runtime's task is created, so its tool calls see their run.
        token = _current_turn.set(turn)
        try:
            call = self.in_flight.start(self._ask(request, stop), Owner("runtime", state.run_id))
        finally:
            _current_turn.reset(token)
        self.turn_started()
        try:
            return await self._with_timeout(call, seconds, stop)
        finally:
            self._turns.pop(turn.token, None)
            if self._stops.get(run.id) is stop:
                del self._stops[run.id]

    def running_turn(self, session_key: str) -> RunTurn | None:
        """The turn of the session's run executing here now, if one is (at most one: a
        session runs one run at a time)."""
        return next((t for t in self._turns.values() if t.state.session_key == session_key), None)

    def turn_by_token(self, token: str) -> RunTurn | None:
        """The turn in flight whose token is ``token``; None once it has ended (or never
        was: a caller over HTTP/MCP cannot tell which)."""
        return self._turns.get(token)

    async def _with_timeout(
        self, task: asyncio.Task[object], seconds: float, stop: asyncio.Future[None]
    ) -> object:
        due = self.clock.now() + timedelta(seconds=seconds)
        # The runtime's end or the run's cancellation, whichever comes first.
        either: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: object) -> None:
            if not either.done():
                either.set_result(None)

        task.add_done_callback(wake)
        stop.add_done_callback(wake)
        try:
            await self.in_flight.wait_for(either, due=due, ready=lambda: task.done() or stop.done())
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            task.remove_done_callback(wake)
            stop.remove_done_callback(wake)
        if stop.done() and not task.done():
            # Cancelled (its RunCancelled is recorded): the runtime is told to stop, and
            # the session's next run waits until it has (one run per session), for the
            # rest of its deadline at most; one that ignores it is then abandoned.
            self.in_flight.cancel(task)
            try:
                await self.in_flight.wait_for(task, due=due)
            except asyncio.CancelledError:
                task.cancel()
                raise
            if not task.done():
                self._abandon(task)
            return CANCELLED
        if task.done():
            if task.cancelled():
                return asyncio.CancelledError("the agent runtime cancelled the run")
            error = task.exception()
            return error if error is not None else task.result()
        # The outcome is recorded now, whether or not the runtime honours the
        # cancellation; a runtime that ignores it is no longer this gateway's work.
        self._abandon(task)
        return TIMED_OUT

    def _abandon(self, task: asyncio.Task[object]) -> None:
        task.cancel()
        self.in_flight.release(task)
        self._abandoned.add(task)
        task.add_done_callback(self._abandoned.discard)

    # Cancelling -----------------------------------------------------------------------

    async def record_cancel(self, run_id: UUID, reason: str) -> tuple[RunState, bool] | None:
        """Record ``RunCancelled`` unless the run has ended: (its state after, whether this
        call cancelled it); None for no such run. The run's runtime call, if in flight
        here, is stopped, and whoever waits for the run hears it ended."""
        if await self.load(run_id) is None:
            return None
        committed = asyncio.get_running_loop().create_future()
        self._cancelling[run_id] = committed
        try:
            async for uow in retrying(self.store, f"run {run_id}"):
                with uow:
                    found = await uow.work(run_id, Run, RunState)
                    assert found is not None
                    run = found
                    if run.state.ended:
                        return run.state, False
                    # After a conflict (the run's own end, say), the reload above decides.
                    run.cancel(reason=reason, at=self.clock.now())
                    await uow.commit()
        finally:
            if self._cancelling.get(run_id) is committed:
                del self._cancelling[run_id]
            committed.set_result(None)
        log.info("run cancelled", session_key=run.state.session_key, run_id=str(run_id))
        self.stop(run_id)
        # A queued run never reaches its agent (its actor finds it ended); its waiters
        # hear now rather than when the actor gets to it.
        self._settle(run)
        return run.state, True

    def stop(self, run_id: UUID) -> bool:
        """Stop the run's runtime call if it is in flight here (its end is recorded)."""
        stop = self._stops.get(run_id)
        if stop is None and run_id in self._executing:
            self._executing[run_id] = True  # its runtime call, about to start, stops
            return True
        if stop is None or stop.done():
            return False
        stop.set_result(None)
        return True

    def runs_in_flight(self) -> list[UUID]:
        """Runs whose runtime call is in flight in this process, not yet told to stop."""
        return [run_id for run_id, stop in self._stops.items() if not stop.done()]

    async def _ask(self, request: RunRequest, stop: asyncio.Future[None]) -> object:
        if stop.done() or UUID(request.run_id) in self._cancelling:
            # Cancelled after this task was created but before it first ran (an
            # interrupting send, say): the agent is never asked.
            return CANCELLED
        # Any runtime, however broken: a plain function, or one that returns no coroutine.
        answer: object = self.runtime.run(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    async def _record_outcome(self, run_id: UUID, outcome: object, *, locked: bool = False) -> Run:
        """Record the run's end (and its reactions); ``locked``: the caller holds the
        session's lock and lane slot, and runs next a run chained to this end."""
        cancelling = self._cancelling.get(run_id)
        if outcome is CANCELLED and cancelling is not None:
            # Its canceller records the outcome (with its reason): wait for that.
            await asyncio.shield(cancelling)
        async for uow in retrying(self.store, f"run {run_id}"):
            with uow:
                found = await uow.work(run_id, Run, RunState)
                assert found is not None
                run = found
                if run.state.ended or run.state.status == "input_required":
                    return run  # recorded already (a retry after its save conflicted)
                now = self.clock.now()
                try:
                    if outcome is CANCELLED:
                        # Stopped for a cancel another process recorded, not seen yet.
                        run.cancel(reason="", at=now)
                    elif outcome is TIMED_OUT:
                        run.time_out(at=now)
                    elif isinstance(outcome, BaseException):
                        run.fail(error=_describe(outcome), at=now)
                    elif isinstance(outcome, RunReply) and isinstance(
                        outcome.input_request, InputRequest
                    ):
                        await self._record_question(uow, run, outcome, outcome.input_request)
                    elif not isinstance(outcome, RunReply) or not _is_text(outcome.text):
                        run.fail(
                            error=f"the agent runtime returned {_kind(outcome)}, not a reply",
                            at=now,
                        )
                    else:
                        usage = _usage(outcome.usage)
                        model = outcome.model if isinstance(outcome.model, str) else None
                        run.complete(reply=outcome.text, usage=usage, model=model, at=now)
                        session = await uow.session(run.state.session_key)
                        if session is not None and outcome.text:
                            session.append_message(
                                _assistant_message(outcome.text, usage, model, now),
                                at=now,
                                provenance=run.state.reply_provenance(),
                            )
                except (RunAlreadyEnded, SessionClosed) as error:
                    log.warning("outcome not recorded", run_id=str(run_id), error=str(error))
                reacted: list[Reacted] = []
                if run.state.ended:
                    for react in self.outcome_reactions:
                        answer = await react(uow, run)
                        if answer is not None:
                            reacted.append(answer)
                chained = await self._chain(uow, run, reacted) if locked else None
                await uow.commit()
                self._reacted(run, reacted, chained)
        return run

    async def _chain(self, uow: UnitOfWork, ended: Run, reacted: list[Reacted]) -> Run | None:
        """The run a reaction started in the ended run's own session, dispatched in the
        same commit (ADR 0057), when nothing is queued here before it: its actor, which
        holds the session's lock and a lane slot, runs it next without letting go of
        either (a dispatched run whose session lock is free is a crashed one to every
        other gateway). Not if its session is gone or closed, or it is overdue: then it
        is queued, and its own dispatch decides."""
        key = ended.state.session_key
        started = [r.started for r in reacted if r.started is not None]
        if len(started) != 1 or started[0].state.session_key != key or self._closing:
            return None
        mailbox = self._mailboxes.get(key)
        if mailbox is not None and not mailbox.empty():
            return None
        run = started[0]
        now = self.clock.now()
        session = uow.loaded_session(key) or await uow.session(key)
        if session is None or not session.is_active or run.overdue(now):
            return None
        run.dispatch(at=now)
        if run.state.first_dispatch_of_turn:
            session.append_message(
                _user_message(run, now), at=now, provenance=run.state.message_provenance()
            )
        return run

    def _reacted(self, ended: Run, reacted: list[Reacted], chained: Run | None) -> None:
        """The reactions' commit is in: their runs are queued (a chained one is its
        ended run's actor's next), and told."""
        for answer in reacted:
            started = answer.started
            if started is chained and started is not None:
                self._ending(started.id)
                self._queued.add(started.id)
                self._chained[ended.id] = started
            elif started is not None:
                self.enqueue(started.id, started.state.session_key)
            answer.committed()

    async def _record_question(
        self, uow: UnitOfWork, run: Run, reply: RunReply, question: InputRequest
    ) -> None:
        """The turn asks a person: the run waits, and the prompt is the agent's line in
        its session (what the person answers, in the transcript as said)."""
        now = self.clock.now()
        usage = _usage(reply.usage)
        model = reply.model if isinstance(reply.model, str) else None
        run.request_input(request=question, usage=usage, model=model, at=now)
        session = await uow.session(run.state.session_key)
        if session is not None:
            session.append_message(
                _assistant_message(question.prompt, usage, model, now),
                at=now,
                provenance=run.state.reply_provenance(),
            )

    # Idle and shutdown ----------------------------------------------------------------

    def free_slots(self) -> int:
        """How many of the ``maxConcurrent`` lane slots no run holds now."""
        return self._lane.free

    def stop_taking_runs(self) -> None:
        """Closing: session actors stop at their current run."""
        self._closing = True

    def abandoned_calls(self) -> list[asyncio.Task[object]]:
        """Runtime calls of runs that timed out, still stopping (or refusing to)."""
        return [task for task in self._abandoned if not task.done()]


TIMED_OUT = object()
CANCELLED = object()
_NOTHING = object()  # no outcome kept (a runtime may return None: that is one)


class WorkClock(Clock):
    """The gateway clock as a runtime sees it: its sleeps are its run's clock waits."""

    def __init__(self, clock: Clock, in_flight: InFlight) -> None:
        self._clock = clock
        self._in_flight = in_flight

    @property
    def moves_by_itself(self) -> bool:
        return self._clock.moves_by_itself

    def now(self) -> datetime:
        return self._clock.now()

    async def sleep(self, seconds: float) -> None:
        await self._in_flight.sleep(seconds)


ToolCall = Callable[..., Awaitable[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class Reacted:
    """What a reaction added to an outcome's unit of work: the run it started there (the
    engine queues it once the commit is in), and what to do then."""

    started: Run | None
    committed: Callable[[], None]


OutcomeReaction = Callable[[UnitOfWork, Run], Awaitable[Reacted | None]]
"""Adds to the outcome's unit of work what follows from the ended run (None: nothing);
it raises nothing (a reaction that cannot decide leaves the step to its driver)."""


def _tool_caller(
    call_tool: ToolCall | None, session_key: str
) -> Callable[[str, Any], Awaitable[dict[str, Any]]] | None:
    """``call_tool(name, params)`` as the run's session; made in the runtime's task, the
    call belongs to the run's turn (its chain, its hop limit)."""
    if call_tool is None:
        return None

    async def call(name: str, params: Any = None) -> dict[str, Any]:
        return await call_tool(session_key, name, params)

    return call


def _transcript_reader(
    store: AsyncStore, session_key: str
) -> Callable[[int], Awaitable[list[dict[str, Any]]]]:
    async def read(limit: int) -> list[dict[str, Any]]:
        session = await store.session(session_key)
        if session is None:
            return []
        window = TranscriptWindow(limit=max(1, limit), include_tools=True)
        texts = await store.transcript(session.id, limit=window.limit, include_tools=True)
        if session.state.forked_from is not None:
            # A forked child's turns see what it inherited before its own lines.
            texts = (await store.read(forked_window, session, texts, None, window)).lines
        return [json.loads(text) for text in texts]

    return read


def _user_message(run: Run, at: Any) -> TranscriptMessage:
    return TranscriptMessage(
        role="user",
        content=[{"type": "text", "text": run.state.message}],
        timestamp=int(at.timestamp() * 1000),
    )


def _assistant_message(
    text: str, usage: Usage | None, model: str | None, at: Any
) -> TranscriptMessage:
    return TranscriptMessage(
        role="assistant",
        content=[{"type": "text", "text": text}],
        timestamp=int(at.timestamp() * 1000),
        usage=usage,
        model=model,
    )


def _is_text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    try:
        return Usage.model_validate(raw)
    except ValueError:
        return None


def _kind(value: object) -> str:
    return f"a {type(value).__name__}"


# What an error without a message is called (OpenClaw conformance D4.4: its send answers
# ``wait.error ?? "agent error"``); the exception's type goes to the log.
UNNAMED_ERROR = "agent error"


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    if not text:
        log.info("agent runtime error without a message", exception=type(error).__name__)
    return text or UNNAMED_ERROR


__all__: Sequence[str] = ["RunEngine"]
