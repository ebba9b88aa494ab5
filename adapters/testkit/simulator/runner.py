"""Running a script against a real gateway and checking the invariants after each step.

Everything runs on one event loop over a VirtualClock with seeded ids, and the store's
calls complete in the order asked (``in_submission_order``: off the loop, yet each result
reaches the loop where it was asked, not when a thread happens to finish), so a script
always does the same thing. After each step the loop is run until nothing is runnable
(the clock's sleepers wait for the next ``advance``); at the end every channel comes
back up and the clock jumps from timer to timer until none is left, and the end-state
invariants are checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit
from uuid import UUID

from sessionwire.adapters.bootstrap import Gateway, open_service
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.in_order import in_submission_order
from sessionwire.adapters.store.loop_guard import arm, armed, blocking_access_allowed, watching
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.adapters.testkit.internals import internals
from sessionwire.adapters.testkit.simulator.agents import (
    DeliveryRecord,
    Incarnation,
    Observation,
    SimulatedAgents,
    SimulatedChannels,
)
from sessionwire.adapters.testkit.simulator.faults import (
    die_without_goodbye,
    drop_next_commit,
    expire,
    held_fence,
    is_postgres,
    keeper_of,
)
from sessionwire.adapters.testkit.simulator.invariants import (
    DEFAULT_MAX_HOPS,
    INVARIANTS,
    Follower,
    LogReader,
    Violation,
    subscriber_problems,
)
from sessionwire.adapters.testkit.simulator.oracle import LogModel, World
from sessionwire.adapters.testkit.simulator.oracle import check as oracle_check
from sessionwire.adapters.testkit.simulator.oracle.facts import PLAN_MARK, ForkRead
from sessionwire.adapters.testkit.simulator.scopes import ScopeCheck, ScopedCall
from sessionwire.adapters.testkit.simulator.script import (
    Advance,
    Answer,
    Busy,
    Cancel,
    ChannelDown,
    Command,
    Crash,
    DropConnection,
    Fork,
    Message,
    Policy,
    Read,
    Route,
    Send,
    SimulationScript,
    Spawn,
    Stale,
    Steer,
    Step,
    StoreFault,
    Subscribe,
    plan_text,
    read_plan,
)
from sessionwire.adapters.testkit.simulator.stores import FreshStores, MemoryStores
from sessionwire.adapters.testkit.virtual_clock import VirtualClock
from sessionwire.application.audit.verify import verify
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.event_stream.subscription import Subscription
from sessionwire.application.ports.clock_and_ids import IdSource
from sessionwire.application.ports.runtime import AgentRuntime, ChannelDelivery, RunRequest
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import is_subagent_key
from sessionwire.domain.session import single_appends

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# The announce run a simulated agent's announce reply names (agents.py): whose post it is.
ANNOUNCE_TAG = re.compile(r"\(announce ([0-9a-f-]{36})\)")
# Work one step may record before it counts as never ending (a loop with no hop limit).
EVENT_BUDGET = 600
# The word every plan-carrying message holds ("sim:{...}"): what the searches look for.
SEARCHED_WORD = PLAN_MARK.rstrip(":")
MAX_DRAIN_WAKEUPS = 2_000
KILL_ROUNDS = 20
DRAIN_BUDGETS = 10
VIOLATIONS_KEPT = 3
PENDING_RUN = ("queued", "running")
PENDING_EXCHANGE = ("open",)
PENDING_SPAWN = ("running", "announcing", "waiting_archive")
# A hang is a failure, not a wait: the play is stopped when nothing changes (nothing
# recorded, handed to an agent or posted, no work in flight changing state, the virtual
# clock still) for this many seconds of real time. Real time only because a stuck loop
# moves nothing else: a seed plays in well under a second of it.
STALL_SECONDS = 60.0
WATCH_EVERY = 0.25
# Real seconds the stuck gateway's shutdown may take before it is left behind.
STUCK_STOP_SECONDS = 10.0
# Virtual time after the last step by which every timer has fired (run timeouts are
# minutes, archives an hour, an outbox gives up after a day): a timer still set later is
# work that never ends.
DRAIN_HORIZON = timedelta(days=60)
# Records read per call when following the sealed log (the subscribers' reference).
LOG_PAGE = 500
# Runs looked at to find a session's newest run in flight.
RUNS_LOOKED_AT = 50


class SimulatedStoreError(SessionwireError, ConnectionError):
    """A transient store failure the simulator injects into a save."""


class SeededIds(IdSource):
    """Ids from a seeded generator: the same script makes the same ids."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def new_id(self) -> UUID:
        return UUID(int=self._random.getrandbits(128), version=4)


@dataclass
class SimulationResult:
    seed: int
    steps: int
    violations: list[Violation]
    """The first few of each invariant broken, in the order seen."""
    counts: dict[str, int]
    """How many times each broken invariant was seen."""
    events: int
    crashes: int
    crashes_skipped: int
    unchecked: list[str]
    """Invariants this gateway gave no way to check (say, its lane is not visible)."""
    fingerprint: str
    """A digest of the events (type, aggregate, version, time) in log order: equal for
    two runs that recorded the same events, whatever the store."""
    seconds: float
    store: str
    takeovers: int = 0
    """Takeovers of a dead gateway by another (two gateways on PostgreSQL)."""
    search_hits: int = 0
    """Messages the searches showed, each checked against the scope (decision 35)."""
    stuck: str | None = None
    """Where the play stopped making progress (a ``liveness`` violation says it too)."""

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def first_invariant(self) -> str | None:
        return self.violations[0].invariant if self.violations else None

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "store": self.store,
            "steps": self.steps,
            "events": self.events,
            "crashes": self.crashes,
            "crashesSkipped": self.crashes_skipped,
            "takeovers": self.takeovers,
            "stuck": self.stuck,
            "fingerprint": self.fingerprint,
            "seconds": round(self.seconds, 4),
            "violations": [violation.to_json() for violation in self.violations],
            "counts": self.counts,
            "unchecked": self.unchecked,
        }


RuntimeWrapper = Callable[[AgentRuntime], AgentRuntime]
DeliveryWrapper = Callable[[ChannelDelivery], ChannelDelivery]


@dataclass
class _Armed:
    after_events: int
    down_seconds: float
    at: str = "save"
    saved: int = 0


@dataclass(frozen=True)
class _LostLeases:
    """The session leases a paused gateway held when they expired (their fences, read
    from the database as they were expired): what it lost to the taker."""

    url: str
    schema: str
    owner: str
    fences: dict[str, int]

    async def claimed_again(self, key: str | None) -> bool:
        """The gateway holds session ``key``'s lease now, claimed since it lost it (a
        larger fence), by the database."""
        if key is None:
            return False
        fence = await asyncio.to_thread(held_fence, self.url, self.schema, self.owner, key)
        return fence is not None and fence > self.fences.get(key, 0)


@dataclass
class _Run:
    """The state of one simulation run (one script on one fresh store)."""

    script: SimulationScript
    url: str
    clock: VirtualClock
    agents: SimulatedAgents
    channels: SimulatedChannels
    ids: SeededIds
    config: GatewayConfig
    gateway: Gateway | None = None
    incarnation: Incarnation = field(default_factory=lambda: Incarnation(0))
    calls: list[asyncio.Task[None]] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    log: LogReader = field(default_factory=LogReader)
    violations: list[Violation] = field(default_factory=list)
    armed: _Armed | None = None
    crashes: int = 0
    crashes_skipped: int = 0
    runaway: bool = False
    saved_events: int = 0
    settling: tuple[asyncio.Future[None], int] | None = None
    """The settle under way and the count of saved events when it began."""
    step: int | None = None
    bystanders: set[asyncio.Task[Any]] = field(default_factory=set)
    seen: Counter[str] = field(default_factory=Counter)
    unchecked: set[str] = field(default_factory=set)
    followers: list[Follower] = field(default_factory=list)
    subscriptions: list[Subscription] = field(default_factory=list)
    """Each follower's subscription on the gateway open now (same order)."""
    sealed: list[tuple[int, str]] = field(default_factory=list)
    """The sealed log as single appends (position, type): what subscribers must see."""
    cancelled: list[UUID] = field(default_factory=list)
    """Runs whose cancel answered ``cancelled: true``, not checked yet."""
    deliveries: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(runId, delivery) of each send answered, checked against the log at idle."""
    watched: set[tuple[UUID, int]] = field(default_factory=set)
    """(aggregate, version) of every event a save passed the crash point with."""
    standby: Gateway | None = None
    """With two gateways: the one that takes over when the active one dies."""
    standby_incarnation: Incarnation | None = None
    standby_tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    stale: list[tuple[Gateway, Incarnation]] = field(default_factory=list)
    """Gateways that paused past their lease and came back (stale owners), still open."""
    opened: int = 0
    """Gateway processes opened so far (each its incarnation's number)."""
    takeovers: int = 0
    search_hits: int = 0
    stuck: str | None = None
    """Set by the watchdog: the play made no progress (a hang) and was stopped."""
    opening: bool = False
    """A gateway is opening (its resume's saves are spared a store fault)."""
    store_fault: StoreFault | None = None
    """The next save fails (a transient store error), once."""
    cancels: dict[UUID, int] = field(default_factory=dict)
    """Run -> how many cancels of it answered ``cancelled: true``."""
    down: list[tuple[datetime, datetime]] = field(default_factory=list)
    """Each crash: when the gateway died and when the next one had opened."""
    faults: list[tuple[datetime, str]] = field(default_factory=list)
    """(time, aggregate) of each event whose save a store fault failed (retried later)."""
    deaths: list[int] = field(default_factory=list)
    """The log's head at each crash (what the dead process recorded last)."""
    on_loop: list[str] = field(default_factory=list)
    """Each SqlOnLoopThread raised since the last check (the armed loop guard's)."""
    forks: list[tuple[str, str, int | None]] = field(default_factory=list)
    """Each fork asked for: (its key, its source, the version asked for)."""
    fork_reads: list[ForkRead] = field(default_factory=list)
    """What each recorded fork's history showed at the end of the play."""
    answers: list[tuple[UUID, str, dict[str, Any]]] = field(default_factory=list)
    """(run, text, what ``provide_input`` answered) of each answer the script gave."""


class Simulation:
    """Runs scripts; ``skip`` names invariants not to check (see ``INVARIANTS``)."""

    def __init__(
        self,
        stores: FreshStores | None = None,
        *,
        skip: Collection[str] = (),
        wrap_runtime: RuntimeWrapper | None = None,
        wrap_delivery: DeliveryWrapper | None = None,
        deep_every: int = 0,
        event_budget: int = EVENT_BUDGET,
        stall_seconds: float = STALL_SECONDS,
        horizon: timedelta = DRAIN_HORIZON,
    ) -> None:
        unknown = set(skip) - set(INVARIANTS)
        if unknown:
            raise ValueError(
                f"unknown invariant(s) {', '.join(sorted(unknown))}; known: {', '.join(INVARIANTS)}"
            )
        self.stores = stores or MemoryStores()
        self.skip = frozenset(skip)
        self.wrap_runtime = wrap_runtime
        self.wrap_delivery = wrap_delivery
        self.deep_every = deep_every
        self.event_budget = event_budget
        self.stall_seconds = stall_seconds
        self.horizon = horizon

    async def run(self, script: SimulationScript) -> SimulationResult:
        started = time.perf_counter()
        # The loop guard armed for the gateway's work: SQL on the loop is a violation
        # (``off-loop``) wherever it happens, even where the product swallows the error.
        was_armed = armed()
        arm(True)
        try:
            with self.stores.fresh() as url, in_submission_order(), watching() as on_loop:
                state = self._new_run(script, url)
                state.on_loop = on_loop
                # Tasks that are not the simulated gateway's (this one, the test's own).
                state.bystanders = set(asyncio.all_tasks())
                play = asyncio.ensure_future(self._play(state))
                watchdog = asyncio.ensure_future(self._watch(state, play))
                state.bystanders |= {play, watchdog}
                try:
                    await asyncio.wait({play})
                    if state.stuck is None:
                        play.result()
                finally:
                    watchdog.cancel()
                    if not play.done():  # the caller was cancelled: so is the play
                        play.cancel()
                    await self._stop_within(state)
                    self._check_off_loop(state)
        finally:
            arm(was_armed)
        return SimulationResult(
            seed=script.seed,
            steps=len(script.steps),
            violations=state.violations,
            counts=dict(state.seen),
            unchecked=sorted(state.unchecked),
            events=state.log.events,
            crashes=state.crashes,
            crashes_skipped=state.crashes_skipped,
            fingerprint=state.log.fingerprint,
            seconds=time.perf_counter() - started,
            store=self.stores.name,
            takeovers=state.takeovers,
            stuck=state.stuck,
            search_hits=state.search_hits,
        )

    def run_sync(self, script: SimulationScript) -> SimulationResult:
        return asyncio.run(self.run(script))

    # Setting up ---------------------------------------------------------------------

    def _new_run(self, script: SimulationScript, url: str) -> _Run:
        clock = VirtualClock(start=START)
        agents = SimulatedAgents(clock)
        state = _Run(
            script=script,
            url=url,
            clock=clock,
            agents=agents,
            channels=SimulatedChannels(clock),
            ids=SeededIds(script.seed),
            config=GatewayConfig.load(script.config),
        )
        state.log.max_hops = _max_hops(script)
        state.log.max_turns = state.config.session.agentToAgent.max_ping_pong_turns
        agents.inspect = lambda request: self._inspect_dispatch(state, request)
        agents.after_reply = lambda: self._side_effect(state, "reply")
        state.channels.after_post = lambda: self._side_effect(state, "delivery")
        return state

    def _in_a_call(self, state: _Run) -> bool:
        """Is the current task a tool call's or a cancel's (the script's, or an agent's
        from inside its turn), or the gateway opening? Its caller hears a store error (an
        open that fails is retried by whoever opens it); a fault is for the gateway's own
        work once it serves, which must get over it."""
        task = asyncio.current_task()
        if state.opening or task in state.calls or task in state.agents.calling:
            return True
        # A call's new run is saved on a task of its own (so that a cancel of the call
        # cannot leave it saved but never queued); the call waits for it and hears its
        # error. The drivers it then starts are the gateway's own work: not spared.
        return any(
            (work := internals(gateway).in_flight.current()) is not None
            and work.owner.kind == "run-start"
            for gateway in (state.gateway, state.standby, *(g for g, _ in state.stale))
            if gateway is not None
        )

    def _side_effect(self, state: _Run, at: str) -> None:
        """A crash armed for just after a side effect: the process dies before it
        records what it did (the agent answered, the channel posted)."""
        armed = state.armed
        if armed is not None and armed.at == at:
            state.incarnation.dead = True
            state.incarnation.check_alive()

    def _ports(self, state: _Run, incarnation: Incarnation) -> tuple[AgentRuntime, ChannelDelivery]:
        runtime: AgentRuntime = state.agents
        if self.wrap_runtime is not None:
            runtime = self.wrap_runtime(runtime)
        delivery = state.channels.port(incarnation)
        if self.wrap_delivery is not None:
            delivery = self.wrap_delivery(delivery)
        return runtime, delivery

    def _two_gateways(self, state: _Run) -> bool:
        return state.script.gateways == 2 and self.stores.name == "postgres"

    async def _open(self, state: _Run) -> None:
        state.opened += 1
        incarnation = Incarnation(state.opened)
        state.incarnation = incarnation
        state.agents.incarnation = incarnation
        runtime, delivery = self._ports(state, incarnation)
        state.opening = True
        try:
            gateway = await self._open_gateway(state, runtime, delivery, incarnation)
        finally:
            state.opening = False
        state.gateway = gateway
        state.agents.call_tool = gateway.call_tool
        if self._two_gateways(state) and state.standby is None:
            await self._open_standby(state)
        # A follower resumes on the new gateway from the last position it passed.
        state.subscriptions = [gateway.subscribe(f.position) for f in state.followers]

    async def _open_standby(self, state: _Run) -> None:
        """A second gateway on the store, idle until it takes over. It resumes nothing
        as it opens (the active gateway is alive; what is pending is its work): only a
        takeover makes it resume the store's pending work."""
        state.opened += 1
        incarnation = Incarnation(state.opened)
        runtime, delivery = self._ports(state, incarnation)
        before = asyncio.all_tasks()
        state.opening = True
        try:
            state.standby = await self._open_gateway(
                state, runtime, delivery, incarnation, resume=False
            )
        finally:
            state.opening = False
        state.standby_incarnation = incarnation
        state.standby_tasks = asyncio.all_tasks() - before

    async def _open_gateway(
        self,
        state: _Run,
        runtime: AgentRuntime,
        delivery: ChannelDelivery,
        incarnation: Incarnation,
        *,
        resume: bool = True,
    ) -> Gateway:
        """``Gateway.open``, with the crash point on the store before the gateway
        resumes: the saves of a resume (overdue archives, runs timed out while down) are
        saves like any other (the ``crash-points`` invariant found them unwatched)."""
        service = await open_service(
            state.config,
            state.url,
            runtime=runtime,
            clock=state.clock,
            delivery=delivery,
            ids=state.ids,
            resume=resume,
            before_resume=lambda store: self._watch_saves(state, store, incarnation),
        )
        return Gateway(service)

    def _watch_saves(self, state: _Run, store: OffLoopStore, incarnation: Incarnation) -> None:
        """Make the store's saves stop dead at an armed crash point (an event boundary).

        Every save the gateway makes goes through its one awaited ``save`` (decision 23),
        whichever writer then commits it (memory's one thread, SQLite's writer thread,
        PostgreSQL's save threads): the crash point is on every save path, and the
        ``crash-points`` invariant checks that every event recorded passed it."""
        save = store.save

        async def watched_save(*aggregates: Any) -> None:
            incarnation.check_alive()
            armed = state.armed
            pending = [e for a in aggregates for e in getattr(a, "pending_events", ())]
            events = len(pending)
            state.watched.update((e.originator_id, e.originator_version) for e in pending)
            if state.store_fault is not None and not self._in_a_call(state):
                state.store_fault = None
                now = state.clock.now()
                state.faults += [(now, str(event.originator_id)) for event in pending]
                raise SimulatedStoreError("the store failed the save (simulated)")
            if armed is not None and armed.at in ("save", "takeover"):
                if armed.saved >= armed.after_events:
                    incarnation.dead = True
                    incarnation.check_alive()
                armed.saved += events
            await save(*aggregates)
            state.saved_events += events
            self._cut_runaway_settle(state)
            if any(type(event).__name__ == "RunCancelled" for event in pending):
                self._side_effect(state, "cancel")

        store.save = watched_save  # type: ignore[method-assign]

    async def _watch(self, state: _Run, play: asyncio.Future[None]) -> None:
        """Stop the play once it makes no progress for ``stall_seconds`` of real time,
        saying where each runnable piece of work waits (a ``liveness`` violation)."""
        loop = asyncio.get_running_loop()
        seen: tuple[Any, ...] | None = None
        since = loop.time()
        while not play.done():
            await asyncio.sleep(min(WATCH_EVERY, self.stall_seconds))
            now = self._progress(state)
            if now != seen:
                seen, since = now, loop.time()
                continue
            if loop.time() - since < self.stall_seconds:
                continue
            where = "at the end" if state.step is None else f"in step {state.step}"
            state.stuck = (
                f"no progress for {self.stall_seconds:g}s of real time {where} at virtual "
                f"time {state.clock.now().isoformat()}: nothing recorded, handed to an "
                f"agent or posted, no work changed state; {self._stuck_work(state)}"
            )
            self._violate(state, "liveness", state.stuck)
            play.cancel()
            return

    def _progress(self, state: _Run) -> tuple[Any, ...]:
        works: list[str] = []
        for gateway in (state.gateway, state.standby):
            if gateway is not None:
                works += internals(gateway).in_flight.snapshot()
        return (
            state.step,
            state.saved_events,
            state.clock.now(),
            len(state.agents.dispatches),
            len(state.channels.attempts),
            len(state.calls),
            state.crashes,
            tuple(sorted(works)),
        )

    def _stuck_work(self, state: _Run) -> str:
        """Each piece of work the gateway counts runnable, and where its task is."""
        found: list[str] = []
        for gateway in (state.gateway, state.standby):
            if gateway is None:
                continue
            for work in internals(gateway).in_flight.runnable():
                found.append(f"{work.owner} at {_awaiting(work.task)}")
        if not found:
            return "no work is runnable (the simulation itself waits)"
        shown = ", ".join(found[: VIOLATIONS_KEPT * 2])
        more = f" and {len(found) - VIOLATIONS_KEPT * 2} more" if len(found) > 6 else ""
        return f"runnable: {shown}{more}"

    async def _stop_within(self, state: _Run) -> None:
        """Stop the gateways; a stuck one is given ``STUCK_STOP_SECONDS`` and then left
        behind (its shutdown may wait on what made it stuck)."""
        if state.stuck is None:
            await self._stop(state)
            return
        stopping = asyncio.ensure_future(self._stop(state))
        done, _ = await asyncio.wait({stopping}, timeout=STUCK_STOP_SECONDS)
        if not done:
            stopping.cancel()
            await asyncio.wait({stopping}, timeout=STUCK_STOP_SECONDS)

    async def _stop(self, state: _Run) -> None:
        if state.gateway is not None:
            await self._kill(state)
        standby, state.standby = state.standby, None
        if standby is not None:
            await standby.close()

    async def _kill(self, state: _Run) -> None:
        """End the gateway process: every task it started dies, then its store closes.

        Its tasks are cancelled until none is left (``gateway.close()`` alone can wait
        forever on a task whose ``finally`` waits for a leaked lane slot).
        """
        gateway = self._gateway(state)
        state.incarnation.dead = True
        for _ in range(KILL_ROUNDS):
            alive = [
                task
                for task in asyncio.all_tasks()
                if task not in state.bystanders and task not in state.standby_tasks
            ]
            if not alive:
                break
            for task in alive:
                task.cancel()
            # Every one ends (a finally that starts new work is cancelled next round).
            await asyncio.wait(alive)
        state.calls = []
        await gateway.close()
        state.gateway = None
        await self._close_stale(state)

    # Playing ------------------------------------------------------------------------

    async def _play(self, state: _Run) -> None:
        await self._open(state)
        gateway = self._gateway(state)
        self._follow(state, 0)
        for session in state.script.sessions:
            await gateway.record_message(
                session.key,
                role="user",
                content="hello",
                channel=session.channel,
                to=session.to,
                chat_type=session.chat_type,
            )
        self._read_log(state)
        for index, step in enumerate(state.script.steps):
            state.step = index
            await self._take(state, step)
            await self._settle(state)
            if state.incarnation.dead:
                await self._restart(state)
            await self._check_step(state)
            if state.runaway:
                return
            if self.deep_every and (index + 1) % self.deep_every == 0:
                self._check_deep(state)
        state.step = None
        await self._drain(state)
        if state.runaway:
            return
        await self._check_step(state)
        await self._read_forks(state)
        self._check_idle(state)
        self._check_deep(state)

    def _gateway(self, state: _Run) -> Gateway:
        assert state.gateway is not None
        return state.gateway

    @contextlib.contextmanager
    def _observing(self, state: _Run) -> Iterator[EventSourcedStore]:
        """The store behind the gateway, read as the simulation's observer does: blocking
        on purpose, between steps or inside a dispatch it inspects; exempt from the loop
        guard (the gateway's own store work is what the guard watches)."""
        store = internals(self._gateway(state)).store
        assert isinstance(store, OffLoopStore)
        with blocking_access_allowed():
            yield store.event_store

    async def _take(self, state: _Run, step: Step) -> None:
        gateway = self._gateway(state)
        if isinstance(step, Advance):
            await self._advance(state, step.seconds)
        elif isinstance(step, ChannelDown):
            state.channels.take_down(step.channel, step.seconds)
        elif isinstance(step, Crash):
            if not self.stores.can_reopen:
                state.crashes_skipped += 1
            elif state.armed is None:
                state.armed = _Armed(step.after_events, step.down_seconds, step.at)
                if step.after_events == 0 and step.at in ("save", "takeover"):
                    state.incarnation.dead = True
        elif isinstance(step, StoreFault):
            state.store_fault = step
        elif isinstance(step, Stale):
            if self._two_gateways(state) and state.standby is not None:
                made: dict[str, Any] = {"sessionKey": step.target, "timeoutSeconds": 0}
                made["message"] = plan_text(step.plan)
                self._tool(state, step.source, "sessions_send", made)
                await self._settle(state)  # dispatched (its agent works) on this gateway
                if not state.incarnation.dead:
                    await self._go_stale(state)
        elif isinstance(step, DropConnection):
            off_loop = internals(gateway).store
            assert isinstance(off_loop, OffLoopStore)
            if is_postgres(off_loop.event_store):
                drop_next_commit(off_loop.event_store, committed=step.committed)
        elif isinstance(step, Message):
            self._call(state, gateway.record_message(step.session, role="user", content=step.text))
        elif isinstance(step, Command):
            self._call(
                state,
                gateway.record_message(
                    step.session, role="user", content=f"/send {step.mode}", sender_is_owner=True
                ),
            )
        elif isinstance(step, Route):
            self._call(
                state,
                gateway.record_message(
                    step.session, role="user", content="moved", channel=step.channel, to=step.to
                ),
            )
        elif isinstance(step, Policy):
            self._call(state, gateway.patch_session(step.session, sendPolicy=step.send_policy))
        elif isinstance(step, Busy):
            self._call(state, gateway.patch_session(step.session, busy=step.busy))
        elif isinstance(step, Subscribe):
            with self._observing(state) as store:
                head = store.sealed_position()
            self._follow(state, head)
        elif isinstance(step, Cancel):
            run = await self._run_to_cancel(state, step)
            for _ in range(step.copies if run is not None else 0):
                assert run is not None
                self._cancel(state, run, step.reason)
        elif isinstance(step, Send):
            target = self._target(state, step.target)
            if target is not None:
                params = {
                    "sessionKey": target,
                    "message": plan_text(step.plan),
                    "timeoutSeconds": step.wait,
                }
                self._tool(state, step.source, "sessions_send", params)
        elif isinstance(step, Read):
            if step.target is None:
                self._tool(state, step.source, "sessions_list", {})
                if not is_subagent_key(step.source):
                    # Searched beside each list (decision 35): every send's message
                    # holds the plan mark's word; none may come from outside the scope.
                    # (A sub-agent's call would be refused and recorded: not made.)
                    search = {"query": SEARCHED_WORD, "limit": 100, "includeTools": True}
                    self._tool(state, step.source, "sessions_search", search)
            else:
                target = self._target(state, step.target)
                if target is not None:
                    params = {"sessionKey": target, "limit": 5}
                    self._tool(state, step.source, "sessions_history", params)
        elif isinstance(step, Steer):
            child = self._target(state, step.target)
            source = self._spawner(state, child) if step.source == "@parent" else step.source
            if child is not None and source is not None:
                params = {"action": "steer", "target": child, "message": step.text}
                self._tool(state, source, "subagents", params)
        elif isinstance(step, Fork):
            self._fork(state, step)
        elif isinstance(step, Answer):
            self._answer(state, step)
        elif isinstance(step, Spawn):
            params = {"task": plan_text(step.plan), "cleanup": step.cleanup}
            if step.agent is not None:
                params["agentId"] = step.agent
            if step.timeout is not None:
                params["runTimeoutSeconds"] = step.timeout
            self._tool(state, step.source, "sessions_spawn", params)

    def _fork(self, state: _Run, step: Fork) -> None:
        """Fork ``step.session``, then record a line into the source the fork must never
        show (one after the other: the line is later than the fork)."""
        gateway = self._gateway(state)
        at_version = None
        if step.back:
            with self._observing(state) as store:
                found = store.session(step.session)
            if found is None or found.version - step.back < 1:
                return
            at_version = found.version - step.back
        key = f"{step.session}:fork:{state.step}"
        state.forks.append((key, step.session, at_version))

        async def fork_then_write() -> None:
            await gateway.fork_session(step.session, new_key=key, at_version=at_version)
            await gateway.record_message(step.session, role="user", content="after the fork")

        state.calls.append(asyncio.ensure_future(fork_then_write()))

    def _answer(self, state: _Run, step: Answer) -> None:
        """Answer, as the operator, the run whose first turn's plan is ``step.plan``
        (``copies`` answers at once); each answer is kept to be checked against the
        log at idle (``input-answers``)."""
        run = next(
            (
                run
                for run, record in state.log.records.items()
                if record.step == "primary"
                and (read_plan(record.message) or {}).get("id") == step.plan
            ),
            None,
        )
        if run is None:
            return
        gateway = self._gateway(state)

        async def answer() -> None:
            result = await gateway.provide_input(str(run), step.text)
            state.answers.append((run, step.text, result))

        for _ in range(step.copies):
            state.calls.append(asyncio.ensure_future(answer()))

    async def _read_forks(self, state: _Run) -> None:
        """Each fork's whole history, paged back from the newest line, read by the fork
        itself (its own session: every scope shows it); a fork a crash kept from being
        recorded answers not found and is left out."""
        gateway = self._gateway(state)
        for key, source, at_version in state.forks:
            shown: list[tuple[str, int, str | None]] = []
            offset: int | None = 0
            while offset is not None:
                params = {"sessionKey": key, "offset": offset, "limit": 200, "includeTools": True}
                page = await gateway.call_tool(key, "sessions_history", params)
                if "messages" not in page:
                    break
                lines = [(m["role"], m["timestamp"], m.get("forkedFrom")) for m in page["messages"]]
                shown[:0] = lines
                offset = page.get("nextOffset")
            else:
                state.fork_reads.append(ForkRead(key, source, at_version, tuple(shown)))

    async def _advance(self, state: _Run, seconds: float) -> None:
        """Move the clock timer by timer, watching for work that never ends on the way
        (a loop of waiting sends can fill a week of virtual time with hops)."""
        clock = state.clock
        target = clock.now() + timedelta(seconds=seconds)
        start = state.log.position
        while not state.runaway:
            due = clock.next_wake()
            if due is None or due > target:
                break
            await clock.advance_to(max(due, clock.now()))
            await self._settle(state, start)
            if state.incarnation.dead:
                return  # the crash point was reached: the process is gone
        if not state.runaway:
            await clock.advance_to(target)

    def _target(self, state: _Run, target: str) -> str | None:
        if not target.startswith("@child:"):
            return target
        index = int(target.split(":", 1)[1])
        try:
            return state.children[index]
        except IndexError:
            return None

    def _spawner(self, state: _Run, child: str | None) -> str | None:
        """The session that spawned ``child`` (None: no such child)."""
        if child is None:
            return None
        with self._observing(state) as store:
            found = store.session(child)
        return found.state.spawned_by if found is not None else None

    def _follow(self, state: _Run, after: int) -> None:
        follower = Follower(after)
        state.followers.append(follower)
        state.subscriptions.append(self._gateway(state).subscribe(after))

    async def _run_to_cancel(self, state: _Run, step: Cancel) -> UUID | None:
        if step.pick == "tree":
            return _tree_to_cancel(state.log)
        if step.pick == "nth":
            started = list(state.log.runs)
            if -len(started) <= step.index < len(started):
                return started[step.index]
            return None
        if step.session is None:
            return None
        try:
            listed = await self._gateway(state).runs(session_key=step.session, limit=RUNS_LOOKED_AT)
        except ValueError:
            return None
        for run in listed["runs"]:
            if run.get("status") in PENDING_RUN:
                return UUID(str(run["runId"]))
        return None

    def _cancel(self, state: _Run, run: UUID, reason: str) -> None:
        gateway = self._gateway(state)

        async def call() -> None:
            answer = await gateway.cancel_run(str(run), reason)
            if answer is not None and answer.get("cancelled") is True:
                state.cancelled.append(run)
                state.cancels[run] = state.cancels.get(run, 0) + 1
                if state.cancels[run] == 2:
                    self._violate(
                        state,
                        "cancel-outcome",
                        f"two cancels of run {run} both answered that they cancelled it",
                    )

        state.calls.append(asyncio.ensure_future(call()))

    def _call(self, state: _Run, work: Coroutine[Any, Any, Any]) -> None:
        async def call() -> None:
            # Bad input (a patch of a closed session, say) is an answer too.
            with contextlib.suppress(ValueError):
                await work

        state.calls.append(asyncio.ensure_future(call()))

    def _tool(self, state: _Run, requester: str, tool: str, params: dict[str, Any]) -> None:
        gateway = self._gateway(state)

        async def call() -> None:
            result = await gateway.call_tool(requester, tool, params)
            state.agents.tool_results.append((tool, result))
            state.agents.scoped_calls.append(ScopedCall(requester, tool, params, result))

        state.calls.append(asyncio.ensure_future(call()))

    async def _settle(self, state: _Run, start: int | None = None) -> None:
        """Let the gateway's work run until none is runnable before the clock's next due
        time (the clock's exact settle over the in-flight registry), or until the step's
        work records more events than the budget (it never ends: cut short)."""
        start = state.log.position if start is None else start
        if not state.runaway:
            settling = asyncio.ensure_future(state.clock.settle())
            # A step that started before this settle has spent part of its budget.
            spent = max(0, self._recorded_since(state, start))
            state.settling = (settling, state.saved_events - spent)
            try:
                await asyncio.wait({settling})
            finally:
                state.settling = None
                settling.cancel()
        self._runaway(state, start)
        for call in state.calls:
            if call.done() and not call.cancelled() and call.exception() is not None:
                self._violate(state, "tool-answers", f"a call raised {call.exception()!r}")
        state.calls = [call for call in state.calls if not call.done()]

    def _cut_runaway_settle(self, state: _Run) -> None:
        """A save during a settle: past the step's event budget, the settle stops."""
        if state.settling is None:
            return
        settling, mark = state.settling
        if state.saved_events - mark > self.event_budget and not settling.done():
            settling.cancel()

    def _recorded_since(self, state: _Run, start: int) -> int:
        if state.gateway is None or state.incarnation.dead:
            return 0
        with self._observing(state) as store:
            return store.log_position() - start

    def _runaway(self, state: _Run, start: int) -> bool:
        if state.runaway or state.gateway is None or state.incarnation.dead:
            return state.runaway
        with self._observing(state) as store:
            recorded = store.log_position() - start
        if recorded > self.event_budget:
            state.runaway = True
            self._violate(
                state,
                "hop-limit",
                f"work never ends: {recorded} events recorded in one step "
                f"(a loop of sends with no hop limit?)",
            )
        return state.runaway

    async def _restart(self, state: _Run) -> None:
        """The process died: stop its tasks, keep the clock running, open a new one."""
        armed = state.armed
        state.armed = None
        state.crashes += 1
        died = state.clock.now()
        with self._observing(state) as store:
            state.deaths.append(store.log_position())
        if self._two_gateways(state):
            await self._fail_over(state, armed)
        else:
            await self._kill(state)
            if armed is not None and armed.down_seconds:
                await state.clock.advance(armed.down_seconds)
            await self._open(state)
            await self._settle(state)
        # What ran when it died was interrupted (liveness does not hold it to its plan).
        state.down.append((died, state.clock.now()))

    async def _fail_over(self, state: _Run, armed: _Armed | None) -> None:
        """Two gateways: the active one was killed (its leases and heartbeat stay, then
        expire by the database's clock); the standby takes it over and resumes its work;
        a new gateway opens beside it. A crash ``at: takeover`` also kills the one taking
        over, right after its takeover statement: the next one takes over both."""
        dead = await self._kill_leaving_leases(state)
        taker = self._promote(state)
        taken = [dead]
        if armed is not None and armed.at == "takeover":
            await self._open_standby(state)
            # The takeover statement commits; the process dies before it resumes.
            taken_first = await internals(taker).store.take_over_dead_gateways()
            if dead not in taken_first:
                self._violate(state, "runs-end", f"dead gateway {dead} not taken over")
            state.takeovers += 1
            state.incarnation.dead = True
            taken = [await self._kill_leaving_leases(state)]
            taker = self._promote(state)
        found = await internals(taker).takeover.check()
        state.takeovers += 1
        missed = sorted(set(taken) - set(found))
        if missed:
            self._violate(state, "runs-end", f"dead gateway(s) {missed} not taken over")
        if armed is not None and armed.down_seconds:
            await state.clock.advance(armed.down_seconds)
        if state.standby is None:
            await self._open_standby(state)
        await self._settle(state)

    async def _go_stale(self, state: _Run) -> None:
        """The active gateway pauses past its lease: it renews nothing while its
        heartbeat and leases expire (by the database's clock), and the standby takes it
        over and resumes its work. Then it goes on as it was (a stale owner): its runs
        in flight answer, and what it writes for them must be refused."""
        paused = self._gateway(state)
        store = internals(paused).store
        assert isinstance(store, OffLoopStore)
        keeper = keeper_of(store.event_store)
        self._read_log(state)
        lost = {run for run in state.log.dispatched if run not in state.log.ended}
        renew = keeper._renew
        keeper._renew = lambda: None  # type: ignore[method-assign]  # paused: no renewal
        try:
            parts = urlsplit(state.url)
            schema = parse_qs(parts.query)["schema"][0]
            url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
            fences = await asyncio.to_thread(expire, url, schema, keeper.owner)
            incarnation = state.incarnation
            taker = self._promote(state)
            found = await internals(taker).takeover.check()
            state.takeovers += 1
            if keeper.owner not in found:
                self._violate(state, "runs-end", f"paused gateway {keeper.owner} not taken over")
        finally:
            keeper._renew = renew  # type: ignore[method-assign]  # it resumes
        # Still alive, as a process that slept is: its agents answer on its incarnation.
        state.stale.append((paused, incarnation))
        lease = _LostLeases(url, schema, keeper.owner, fences)
        self._refuse_stale_writes(state, store, lost, lease)
        await self._open_standby(state)
        await self._settle(state)

    def _refuse_stale_writes(
        self, state: _Run, store: OffLoopStore, lost: set[UUID], leases: _LostLeases
    ) -> None:
        """Decision 24: the taker resumes the runs the paused gateway had in flight;
        whatever the stale owner then writes for one of them under the lease it lost
        must be refused. Under a lease of the session it claimed again since (the taker
        gave it back, the run not ended: a crash of its own) the run is its own again."""
        save = store.save

        async def stale_save(*aggregates: Any) -> None:
            late = [
                (event, getattr(getattr(aggregate, "state", None), "session_key", None))
                for aggregate in aggregates
                for event in getattr(aggregate, "pending_events", ())
                if event.originator_id in lost
            ]
            await save(*aggregates)
            kept = 0
            for event, key in late:
                if kept == VIOLATIONS_KEPT or await leases.claimed_again(key):
                    continue
                kept += 1
                self._violate(
                    state,
                    "stale-owner",
                    f"gateway {leases.owner}, taken over after its lease expired, still "
                    f"recorded {type(event).__name__} of run {event.originator_id}, which "
                    "it had lost",
                )

        store.save = stale_save  # type: ignore[method-assign]

    async def _close_stale(self, state: _Run) -> None:
        """The gateways that came back stale end with the process that kills the
        active one (their tasks were cancelled with its)."""
        stale, state.stale = state.stale, []
        for gateway, incarnation in stale:
            incarnation.dead = True
            await gateway.close()

    async def _kill_leaving_leases(self, state: _Run) -> str:
        """Kill the active gateway as ``kill -9`` would: it gives no lease back; then
        its heartbeat and leases expire. Its gateway id."""
        store = internals(self._gateway(state)).store
        assert isinstance(store, OffLoopStore)
        keeper = keeper_of(store.event_store)
        die_without_goodbye(keeper)
        await self._kill(state)
        parts = urlsplit(state.url)
        schema = parse_qs(parts.query)["schema"][0]
        url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        await asyncio.to_thread(expire, url, schema, keeper.owner)
        return keeper.owner

    def _promote(self, state: _Run) -> Gateway:
        """The standby becomes the active gateway: steps, agents and subscribers go to it."""
        gateway, incarnation = state.standby, state.standby_incarnation
        assert gateway is not None
        assert incarnation is not None
        state.standby, state.standby_incarnation, state.standby_tasks = None, None, set()
        state.gateway = gateway
        state.incarnation = incarnation
        state.agents.incarnation = incarnation
        state.agents.call_tool = gateway.call_tool
        state.subscriptions = [gateway.subscribe(f.position) for f in state.followers]
        return gateway

    async def _drain(self, state: _Run) -> None:
        """Bring every channel up and run every timer until none is left."""
        if state.armed is not None:
            state.incarnation.dead = True
            await self._settle(state)
            await self._restart(state)
        state.channels.all_up()
        # Schedules fire for ever: the workload ends by removing them (each due time up
        # to now was fired, or the oracle says so), so the timers left can run out.
        gateway = self._gateway(state)
        for schedule in await gateway.schedules():
            try:
                await gateway.unschedule(schedule["id"])
            except SimulatedStoreError:  # an armed store fault took this save: once
                await gateway.unschedule(schedule["id"])
        clock = state.clock
        drain_start = state.log.position
        drained_from = clock.now()
        horizon = drained_from + self.horizon
        for _ in range(MAX_DRAIN_WAKEUPS):
            await self._settle(state)
            if state.runaway:
                return
            # The event budget is per timer here (draining may fire many), with a total.
            self._read_log(state)
            if state.log.position - drain_start > DRAIN_BUDGETS * self.event_budget:
                state.runaway = True
                self._violate(
                    state,
                    "hop-limit",
                    f"work never ends: {state.log.position - drain_start} events while "
                    "draining the timers (a loop of waiting sends with no hop limit?)",
                )
                return
            if state.incarnation.dead:  # never armed now; a dead process is a bug here
                await self._restart(state)
            due = clock.next_wake()
            if due is None:
                return
            if due > horizon:
                self._violate(
                    state,
                    "liveness",
                    f"work still waits on the clock {due - drained_from} after the last "
                    f"step (timers are due within {self.horizon}): "
                    f"{'; '.join(self._waiting_work(state))}",
                )
                return
            await clock.advance_to(max(due, clock.now()))
        self._violate(state, "hop-limit", f"timers still firing after {MAX_DRAIN_WAKEUPS}")

    def _waiting_work(self, state: _Run) -> list[str]:
        gateway = state.gateway
        if gateway is None:
            return []
        return internals(gateway).in_flight.snapshot()[: VIOLATIONS_KEPT * 2]

    # Checking -----------------------------------------------------------------------

    def _violate(self, state: _Run, invariant: str, detail: str) -> None:
        if invariant in self.skip:
            return
        # The first few of each kind: one bug tends to break an invariant at every step.
        state.seen[invariant] += 1
        if state.seen[invariant] <= VIOLATIONS_KEPT:
            state.violations.append(Violation(invariant, detail, state.step))

    def _observe(self, state: _Run, observations: list[Observation]) -> None:
        for observation in observations:
            self._violate(state, observation.invariant, observation.detail)
        observations.clear()

    def _read_log(self, state: _Run) -> None:
        with self._observing(state) as store:
            problems = state.log.read(store)
        for invariant, problem in problems:
            self._violate(state, invariant, problem)
        for problem in state.log.steer_problems:
            self._violate(state, "steers", problem)
        state.log.steer_problems.clear()
        for aggregate, version in state.log.recorded:
            if (aggregate, version) not in state.watched:
                self._violate(
                    state,
                    "crash-points",
                    f"event {version} of {aggregate} was recorded by a save that passed "
                    "no crash point",
                )
        state.log.recorded.clear()

    def _check_off_loop(self, state: _Run) -> None:
        for message in state.on_loop:
            self._violate(state, "off-loop", message)
        state.on_loop.clear()

    async def _check_step(self, state: _Run) -> None:
        self._check_off_loop(state)
        self._read_log(state)
        await self._check_followers(state)
        self._check_cancels(state)
        self._observe(state, state.agents.observations)
        self._observe(state, state.channels.observations)
        for tool, result in state.agents.tool_results:
            error = str(result.get("error", ""))
            if "internal error" in error:
                self._violate(state, "tool-answers", f"{tool} answered {error!r}")
            if tool == "subagents" and result.get("status") == "ok":
                steered = _uuid_or_none(result.get("runId"))
                if steered is not None and steered not in state.log.steered:
                    self._violate(
                        state, "steers", f"a steer into run {steered} answered ok, unrecorded"
                    )
            delivery = result.get("delivery")
            if tool == "sessions_send" and isinstance(delivery, dict):
                state.deliveries.append((str(result.get("runId")), delivery))
            if tool == "sessions_spawn" and result.get("status") == "accepted":
                child = result.get("childSessionKey")
                if isinstance(child, str):
                    state.children.append(child)
        state.agents.tool_results.clear()
        scope = ScopeCheck(state.config)
        for call in state.agents.scoped_calls:
            if call.tool == "sessions_search":
                state.search_hits += len(call.result.get("results") or [])
            for problem in scope.problems(call, state.log.spawned_by):
                self._violate(state, "visibility", problem)
        state.agents.scoped_calls.clear()
        limit = _max_hops(state.script)
        for depth in state.agents.hop_refusals:
            if 0 < depth <= limit:
                # As configured, both ways: a send within the limit is never refused.
                self._violate(
                    state,
                    "hop-limit",
                    f"a send {depth} sends deep was refused for the hop limit (maxHops {limit})",
                )
        state.agents.hop_refusals.clear()
        held, capacity = _lane_use(self._gateway(state))
        if held is None:
            state.unchecked.add("slots-free")
        elif not state.runaway:  # a runaway step was cut short: the lane is mid-work
            with self._observing(state) as store:
                running = len(store.pending_work("run", ("running",)))
            if held > running:
                self._violate(
                    state,
                    "slots-free",
                    f"{held} of {capacity} lane slots held with {running} run(s) running",
                )

    def _read_sealed(self, state: _Run) -> int:
        """Follow the sealed log (as the stream publishes it) to its head; the head."""
        after = state.sealed[-1][0] if state.sealed else 0
        while True:
            with self._observing(state) as store:
                records = store.records_after(after, LOG_PAGE)
            for position, event in single_appends(records):
                state.sealed.append((position, type(event).__name__))
            if len(records) < LOG_PAGE:
                return state.sealed[-1][0] if state.sealed else 0
            after = records[-1][0]

    async def _check_followers(self, state: _Run) -> None:
        """Each subscriber reads what is there (never waiting); what it saw must be the
        sealed log after its P, in order, and reach at least the head read before."""
        if not state.followers:
            return
        head = self._read_sealed(state)
        for follower, subscription in zip(state.followers, state.subscriptions, strict=True):
            async for event in subscription.recorded():
                follower.seen.append((int(event["position"]), str(event["type"])))
            follower.position = subscription.position
        # What was sealed while they read: a follower may be ahead of ``head``.
        self._read_sealed(state)
        for follower in state.followers:
            for problem in subscriber_problems(follower, state.sealed, head, complete=True):
                self._violate(state, "subscribers", problem)

    def _check_cancels(self, state: _Run) -> None:
        """Each answered cancel: RunCancelled is the run's one outcome, and the runs it
        caused that had started before it have all ended (cascade, or by themselves)."""
        log = state.log
        for run in state.cancelled:
            outcome = log.ended.get(run)
            if outcome is None or outcome[0] != "RunCancelled":
                self._violate(
                    state,
                    "cancel-outcome",
                    f"cancel_run({run}) answered cancelled, but the run's outcome is "
                    f"{outcome[0] if outcome else 'not recorded'}",
                )
                continue
            cancelled_at = outcome[1]
            left = [
                child
                for child in log.descendants(run)
                if log.started_at.get(child, cancelled_at) < cancelled_at and child not in log.ended
            ]
            for child in left[:VIOLATIONS_KEPT]:
                session, step = log.runs.get(child, ("?", "?"))
                self._violate(
                    state,
                    "cancel-outcome",
                    f"run {child} ({step} in {session}), caused by cancelled run {run}, "
                    "has not ended after the cancel answered",
                )
        state.cancelled.clear()

    def _check_idle(self, state: _Run) -> None:
        self._check_oracle(state)
        for problem in state.log.busy_problems():
            self._violate(state, "busy-decided", problem)
        for problem in state.log.yield_problems():
            self._violate(state, "yields-wake-once", problem)
        for run_id, delivery in state.deliveries:
            mismatch = state.log.delivery_problem(run_id, delivery)
            if mismatch is not None:
                self._violate(state, "send-delivery", mismatch)
        state.deliveries.clear()
        for problem in state.log.cascade_problems():
            self._violate(state, "cancel-outcome", problem)
        for problem in state.log.line_problems():
            self._violate(state, "transcript-lines", problem)
        lane = state.config.agents.defaults.maxConcurrent
        for problem in state.log.liveness_problems(lane=lane, down=state.down):
            self._violate(state, "liveness", problem)
        for kind, statuses, invariant in (
            ("run", PENDING_RUN, "runs-end"),
            ("exchange", PENDING_EXCHANGE, "runs-end"),
            ("spawn", PENDING_SPAWN, "runs-end"),
            ("yield", ("waiting",), "yields-wake-once"),
        ):
            with self._observing(state) as store:
                pending = store.pending_work(kind, statuses)
            for work in pending:
                self._violate(state, invariant, f"{kind} {work.id} still pending at idle")
        for run in state.log.runs_without_one_outcome():
            session, step = state.log.runs.get(run, ("?", "?"))
            count = state.log.outcomes[run]
            self._violate(
                state, "runs-end", f"run {run} ({step} in {session}) has {count} outcomes"
            )
        held, capacity = _lane_use(self._gateway(state))
        if held:
            self._violate(state, "slots-free", f"{held} of {capacity} lane slots held at idle")
        self._check_deliveries(state)
        for key, record in _failed_never_delivered(state).items():
            self._violate(
                state,
                "deliveries-settle",
                f"delivery {key} to {record.channel} for {record.session_key} failed at "
                f"{record.at.isoformat()} and was never delivered nor abandoned",
            )

    def _check_oracle(self, state: _Run) -> None:
        """The reference model's checks over the whole log (``oracle/``): fed the
        script's config and what the simulator did, nothing of the product's."""
        world = World(
            config=state.script.config,
            down=tuple(state.down),
            deaths=tuple(state.deaths),
            faults=tuple(state.faults),
            gateways=2 if self._two_gateways(state) else 1,
            fork_reads=tuple(state.fork_reads),
            answers=tuple(
                (str(run), text, result.get("status") == "accepted")
                for run, text, result in state.answers
            ),
            until=state.clock.now(),
        )
        for name, problem in oracle_check(LogModel.of(state.log.facts), world):
            self._violate(state, name, problem)

    def _check_deliveries(self, state: _Run) -> None:
        """Per owner (exchange or spawn), not per key: each posts its announce or report
        at most once, whatever idempotency keys its attempts carried (a key that changes
        per attempt is a duplicate a real channel shows); a report goes to the route its
        spawn captured."""
        keys: dict[UUID, set[str]] = {}
        for record in state.channels.delivered.values():
            owner = _owner_of(state.log, record.message)
            if owner is None:
                continue
            keys.setdefault(owner, set()).add(record.idempotency_key)
            route = state.log.captured_routes.get(owner)
            if route is not None and (record.channel, record.to) != route:
                self._violate(
                    state,
                    "report-route",
                    f"the report of spawn {owner} was posted to {record.channel}:{record.to}, "
                    f"not to the route it captured when spawned ({route[0]}:{route[1]})",
                )
        for owner, used in keys.items():
            if len(used) > 1:
                self._violate(
                    state,
                    "exactly-once",
                    f"{owner}'s announce or report was posted {len(used)} times, under "
                    f"keys {', '.join(sorted(used))}",
                )

    def _check_deep(self, state: _Run) -> None:
        with self._observing(state) as store:
            self._check_deep_in(state, StoreAuditLog(store))

    def _check_deep_in(self, state: _Run, log: StoreAuditLog) -> None:
        if "read-models" not in self.skip:
            differences = log.rebuild_and_compare(replace=False)
            for table, difference in differences.items():
                if difference.total:
                    self._violate(
                        state,
                        "read-models",
                        f"table {table} differs from a rebuild: {difference.added} added, "
                        f"{difference.removed} removed, {difference.changed} changed "
                        f"({'; '.join(difference.examples[:2])})",
                    )
        if "hash-chain" not in self.skip:
            report = verify(log)
            for finding in report.findings[:VIOLATIONS_KEPT]:
                self._violate(state, "hash-chain", str(finding.to_json()))

    def _inspect_dispatch(self, state: _Run, request: RunRequest) -> list[Observation]:
        """What is wrong with handing this run to an agent now."""
        if state.gateway is None:
            return []
        with self._observing(state) as store:
            return self._inspect_dispatch_in(state, store, request)

    def _inspect_dispatch_in(
        self, state: _Run, store: EventSourcedStore, request: RunRequest
    ) -> list[Observation]:
        found: list[Observation] = []
        now = state.clock.now()
        stored = store.session(request.session_key)
        if stored is not None and stored.state.status != "active":
            found.append(
                Observation(
                    "closed-sessions",
                    f"run {request.run_id} ({request.step}) handed to an agent in "
                    f"{request.session_key}, which is {stored.state.status}",
                )
            )
        stored_run = store.run(request.run_id)
        if stored_run is not None and stored_run.status == "cancelled":
            found.append(
                Observation(
                    "cancel-outcome",
                    f"run {request.run_id} ({request.step} in {request.session_key}) "
                    "handed to an agent after it was cancelled",
                )
            )
        work = store.work(UUID(request.run_id))
        if work is not None:
            deadline = _deadline_of(work.created_on, work.state_json)
            if deadline is not None and now >= deadline:
                found.append(
                    Observation(
                        "deadlines",
                        f"run {request.run_id} ({request.step} in {request.session_key}) "
                        f"handed to an agent at {now.isoformat()}, at or past its "
                        f"deadline {deadline.isoformat()}",
                    )
                )
        tasks = ("primary", "subagent_task")
        plan = read_plan(request.message) if request.step in tasks else None
        limit = _max_hops(state.script)
        if plan is not None and int(plan.get("depth", 1)) > limit:
            found.append(
                Observation(
                    "hop-limit",
                    f"run {request.run_id} in {request.session_key} is hop "
                    f"{plan.get('depth')} of a chain (limit {limit})",
                )
            )
        return found


def _tree_to_cancel(log: LogReader) -> UUID | None:
    """The oldest run not ended that has a run still pending below a run that ended (a
    cascade must go through the ended middle)."""
    children: dict[UUID, list[UUID]] = {}
    for child, parent in log.parents.items():
        children.setdefault(parent, []).append(child)
    for run in log.runs:
        if run in log.ended:
            continue
        for middle in children.get(run, ()):
            if middle in log.ended and any(
                below not in log.ended for below in log.descendants(middle)
            ):
                return run
    return None


def _awaiting(task: asyncio.Task[Any]) -> str:
    """Where a task waits: the innermost frames of its chain of awaits (asyncio's own
    left out)."""
    frames: list[str] = []
    awaiting: Any = task.get_coro()
    while awaiting is not None:
        frame = getattr(awaiting, "cr_frame", None) or getattr(awaiting, "gi_frame", None)
        if frame is not None and "/asyncio/" not in frame.f_code.co_filename:
            code = frame.f_code
            frames.append(f"{code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} {code.co_name}")
        awaiting = getattr(awaiting, "cr_await", None) or getattr(awaiting, "gi_yieldfrom", None)
        if awaiting is not None and not (
            hasattr(awaiting, "cr_frame") or hasattr(awaiting, "gi_frame")
        ):
            frames.append(type(awaiting).__name__)
            break
    return " > ".join(frames[-4:]) if frames else "not started"


def _deadline_of(started: datetime, state_json: str) -> datetime | None:
    """The run's recorded deadline if it has one (contract decision 16), else its start
    plus its timeout."""
    state = json.loads(state_json)
    for name in ("deadline_ms", "deadline_at", "deadline"):
        value = state.get(name)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value / 1000, tz=UTC)
        if isinstance(value, str):
            return datetime.fromisoformat(value)
    timeout = state.get("timeout_seconds")
    if not isinstance(timeout, int | float) or timeout <= 0:
        return None
    return started + timedelta(seconds=timeout)


def _max_hops(script: SimulationScript) -> int:
    """The hop limit the script configures, else decision 17's default: read from the
    script, not from the gateway's config model, whose default is the product's own."""
    session = script.config.get("session", {})
    value = session.get("agentToAgent", {}).get("maxHops") if isinstance(session, dict) else None
    return int(value) if isinstance(value, int | float) else DEFAULT_MAX_HOPS


def _lane_use(gateway: Gateway) -> tuple[int | None, int]:
    """Lane slots held now and the lane's size (None when the gateway hides its lane)."""
    service = internals(gateway)
    capacity = service.config.agents.defaults.maxConcurrent
    free = getattr(service.run_engine, "free_slots", None)
    value = free() if callable(free) else None
    if not isinstance(value, int):
        return None, capacity
    return capacity - value, capacity


def _owner_of(log: LogReader, message: str) -> UUID | None:
    """The exchange or spawn a posted message is for: by the announce run the simulated
    agent names in its reply, else (a report whose announce failed) by the child's key
    in the report's stats line."""
    for match in ANNOUNCE_TAG.finditer(message):
        owner = log.announce_owner.get(match.group(1))
        if owner is not None:
            return owner
    for child, owner in log.child_owner.items():
        if child in message:
            return owner
    return None


def _failed_never_delivered(state: _Run) -> dict[str, DeliveryRecord]:
    failed: dict[str, DeliveryRecord] = {}
    for record in state.channels.attempts:
        if not record.delivered and record.idempotency_key not in state.channels.delivered:
            owner = state.log.delivery_owner.get(record.idempotency_key)
            if owner is None or owner not in state.log.abandoned:
                failed.setdefault(record.idempotency_key, record)
    return failed


__all__ = ["SeededIds", "Simulation", "SimulationResult"]


def _uuid_or_none(value: object) -> UUID | None:
    try:
        return UUID(str(value)) if value is not None else None
    except ValueError:
        return None
