"""The composition root: ``Gateway.open`` picks the adapters and wires the application."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

# Also the read path's (read_composition.py); named here too, where the gateway's
# callers and tests have always found it.
from sessionwire.adapters.read_composition import open_event_store as open_event_store
from sessionwire.adapters.store.off_loop import OffLoopStore, open_off_loop
from sessionwire.application.audit.state import SessionAsOf
from sessionwire.application.audit.timeline import Timeline
from sessionwire.application.audit.trace import Trace
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import ToolServices
from sessionwire.application.event_stream.subscription import EventStream, Subscription
from sessionwire.application.gateway import GatewayParts, GatewayService
from sessionwire.application.orchestration.cancellation import RunCancellation
from sessionwire.application.orchestration.exchanges import ExchangeDriver
from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.outbox import DeliveryOutbox
from sessionwire.application.orchestration.pushes import RunPushes
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.application.orchestration.schedules import ScheduleDriver
from sessionwire.application.orchestration.spawns import SpawnDriver
from sessionwire.application.orchestration.takeover import Takeover
from sessionwire.application.orchestration.trace_budgets import TraceBudgets
from sessionwire.application.orchestration.yields import YieldDriver
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock, IdSource, RandomIds, SystemClock
from sessionwire.application.ports.runtime import (
    AgentRuntime,
    ChannelDelivery,
    NoRuntime,
    RecordedDelivery,
)
from sessionwire.application.ports.telemetry import NO_TELEMETRY, GatewayGauges, Telemetry
from sessionwire.application.run_queries import RUNS_DEFAULT_LIMIT, RunQueries
from sessionwire.application.served_gateway import ServedGateway

T = TypeVar("T")
P = ParamSpec("P")


def wire_service(
    *,
    store: AsyncStore,
    config: GatewayConfig,
    clock: Clock,
    ids: IdSource,
    runtime: AgentRuntime | None = None,
    delivery: ChannelDelivery | None = None,
    telemetry: Telemetry | None = None,
) -> GatewayService:
    """The gateway service on an open store: its runs, exchanges, spawns, yields,
    deliveries, budgets, cancellation, event stream and takeover built and wired to one
    another and to the service (the one composition root, ADR 0037)."""
    # Metrics and spans (ADR 0019); none unless the host or `serve` asks.
    telemetry = telemetry or NO_TELEMETRY
    store.telemetry = telemetry
    runtime = runtime or NoRuntime()
    delivery = delivery or RecordedDelivery()
    defaults = config.agents.defaults
    # Every task the gateway runs is registered here; a clock moved by hand settles
    # it (several gateways may share one clock).
    in_flight = InFlight(clock)
    clock.attach(in_flight)
    run_engine = RunEngine(
        store=store,
        clock=clock,
        runtime=runtime,
        max_concurrent=defaults.maxConcurrent,
        in_flight=in_flight,
    )
    # Budgets per trace (decision 31): every start of a run in a trace asks them.
    budgets = TraceBudgets(
        store=store, config=config, clock=clock, ids=ids, in_flight=in_flight, engine=run_engine
    )
    outbox = DeliveryOutbox(
        store=store,
        in_flight=in_flight,
        clock=clock,
        delivery=delivery,
        policy=config.deliveries.retry_policy,
    )
    exchanges = ExchangeDriver(
        store=store,
        in_flight=in_flight,
        clock=clock,
        runs=run_engine,
        delivery=delivery,
        outbox=outbox,
        run_timeout_seconds=defaults.timeoutSeconds,
        send_policy=config.send_policy,
        rules=config.key_rules,
        budgets=budgets,
    )
    # An exchange's (a spawn's) step on a run's end commits with that end (ADR 0057).
    run_engine.outcome_reactions.append(exchanges.record_with_outcome)
    # Push requests (A2A push-notification configs, ADR 0035): queued in the outbox
    # when their run ends.
    pushes = RunPushes(
        store=store, in_flight=in_flight, clock=clock, runs=run_engine, outbox=outbox
    )
    spawns = SpawnDriver(
        store=store,
        in_flight=in_flight,
        clock=clock,
        runs=run_engine,
        delivery=delivery,
        outbox=outbox,
        config=config,
        budgets=budgets,
    )
    run_engine.outcome_reactions.append(spawns.record_with_outcome)
    # The process managers that start runs of their own when their time comes (a yield's
    # wake, a schedule's firing, decision 36) share what they are built on.
    timed: dict[str, Any] = {
        "store": store,
        "in_flight": in_flight,
        "clock": clock,
        "runs": run_engine,
        "config": config,
        "budgets": budgets,
    }
    yields = YieldDriver(**timed)
    spawns.on_report = yields.child_reported
    spawns.reports_of = yields.reports_of
    spawns.until_woken = yields.until_woken
    cancellation = RunCancellation(engine=run_engine, store=store, clock=clock, in_flight=in_flight)
    budgets.cancellation = cancellation
    services = ToolServices(
        runs=run_engine,
        exchanges=exchanges,
        spawns=spawns,
        ids=ids,
        run_timeout_seconds=defaults.timeoutSeconds,
        cancellation=cancellation,
        budgets=budgets,
        yields=yields,
    )
    service: GatewayService | None = None

    async def took_over(gateways: list[str]) -> None:
        assert service is not None, "a takeover is watched only once the service resumed"
        await service.took_over(gateways)

    service = GatewayService(
        store=store,
        config=config,
        clock=clock,
        ids=ids,
        runtime=runtime,
        delivery=delivery,
        telemetry=telemetry,
        parts=GatewayParts(
            in_flight=in_flight,
            run_engine=run_engine,
            budgets=budgets,
            outbox=outbox,
            exchanges=exchanges,
            pushes=pushes,
            spawns=spawns,
            yields=yields,
            schedules=ScheduleDriver(**timed),
            run_queries=RunQueries(store, config, clock),
            cancellation=cancellation,
            services=services,
            # The live event stream's followers (ADR 0023).
            events=EventStream(store, in_flight, clock),
            # Dead gateways' work, resumed here (decision 24); watched once resume() ran.
            takeover=Takeover(locks=store, clock=clock, in_flight=in_flight, on_takeover=took_over),
        ),
    )
    # The service's own answers, which its parts call back: the tools a run may use,
    # the tool calls a runtime makes during its run, and the gauges' pending runs.
    run_engine.tools_for = service.tools_for
    run_engine.call_tool = service.call_tool
    telemetry.watch(
        GatewayGauges(
            free_slots=run_engine.free_slots,
            slots=defaults.maxConcurrent,
            pending_runs=service.pending_runs,
            # Read when metrics are collected, on the collector's thread.
            outbox_depth=lambda: len(store.blocking.pending_work("delivery", ("pending",))),
        )
    )
    return service


async def open_service(
    config: GatewayConfig,
    store: str,
    *,
    runtime: AgentRuntime | None,
    clock: Clock,
    delivery: ChannelDelivery | None,
    ids: IdSource,
    resume: bool,
    telemetry: Telemetry | None = None,
    before_resume: Callable[[OffLoopStore], None] | None = None,
) -> GatewayService:
    """``Gateway.open``'s wiring: the store opened off the loop, the service on it, and
    its unfinished work resumed. ``before_resume`` sees the store first (the simulator
    puts its crash point there, so the saves of a resume are watched too)."""
    opened = await open_off_loop(lambda: open_event_store(store, config, writer=resume))
    if before_resume is not None:
        before_resume(opened)
    service = wire_service(
        store=opened,
        config=config,
        clock=clock,
        ids=ids,
        runtime=runtime,
        delivery=delivery,
        telemetry=telemetry,
    )
    if resume:
        try:
            # The config's schedules section (decision 36) first: resume then drives it.
            await service.schedules.sync_config(config.schedules)
            await service.resume()
        except BaseException:
            await service.close()
            raise
    return service


async def open_gateway_service(
    config: GatewayConfig | dict[str, Any] | str | Path | None = None,
    store: str = "memory",
    *,
    runtime: AgentRuntime | None = None,
    clock: Clock | None = None,
    delivery: ChannelDelivery | None = None,
    ids: IdSource | None = None,
    resume: bool = True,
    telemetry: Telemetry | None = None,
) -> GatewayService:
    """``Gateway.open``'s service, its defaults filled in: for the CLI, which composes
    its commands on the service it opens (it never reaches under a ``Gateway``)."""
    if not isinstance(config, GatewayConfig):
        config = GatewayConfig.load(config)
    return await open_service(
        config,
        store,
        runtime=runtime,
        clock=clock or SystemClock(),
        delivery=delivery,
        ids=ids or RandomIds(),
        resume=resume,
        telemetry=telemetry,
    )


class Gateway:
    """The public gateway. Open it with ``await Gateway.open(...)``; close it when done.

    Every method is a coroutine but ``tool_schemas`` and ``subscribe`` (decision 23):
    the store's work runs off the event loop, which only waits for it. What the gateway
    runs on (its store, run engine, resume) is not part of it: the transports that serve
    it take it whole, and reach what serving needs besides through ``served`` (a narrow
    port, ADR 0043).
    """

    def __init__(self, service: GatewayService) -> None:
        self._service = service
        self._served = ServedGateway(service)

    @classmethod
    async def open(
        cls,
        config: GatewayConfig | dict[str, Any] | str | Path | None = None,
        store: str = "memory",
        runtime: AgentRuntime | None = None,
        clock: Clock | None = None,
        delivery: ChannelDelivery | None = None,
        ids: IdSource | None = None,
        resume: bool = True,
        telemetry: Telemetry | None = None,
    ) -> Gateway:
        """Open (or resume) a gateway on ``store``: 'memory', 'sqlite:///file.db' or a
        'postgresql://user@host:port/db' URL (``?schema=name`` picks a schema).

        ``resume=False`` leaves the store's unfinished runs, loops, announces and timers
        alone (a reader, or a process with no agent runtime to carry them on).

        One writer per SQLite file (decision 20): a resuming gateway on a file another
        live gateway holds raises StoreInUse naming the holder (pid, host, since when);
        ``resume=False`` opens beside it; it takes the lock at its first write.

        ``telemetry``: metrics and spans (``sessionwire.adapters.telemetry``: Prometheus,
        OpenTelemetry); none by default."""
        service = await open_gateway_service(
            config,
            store,
            runtime=runtime,
            clock=clock,
            delivery=delivery,
            ids=ids,
            resume=resume,
            telemetry=telemetry,
        )
        return cls(service)

    @property
    def served(self) -> ServedGateway:
        """What a transport serving this gateway reaches besides its coroutines (its
        config, clock, gateway methods, a callback's tool call...): a narrow port, for
        the adapters that serve it (HTTP, MCP, A2A, the console; ADR 0043)."""
        return self._served

    async def record_message(
        self,
        session_key: str,
        *,
        role: str,
        content: str | list[dict[str, Any]],
        channel: str | None = None,
        chat_type: str | None = None,
        display_name: str | None = None,
        to: str | None = None,
        account_id: str | None = None,
        label: str | None = None,
        sender_is_owner: bool = False,
        usage: dict[str, Any] | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """Append one transcript message (opening the session on its first message)."""
        return await self._service.record_message(
            session_key,
            role=role,
            content=content,
            channel=channel,
            chat_type=chat_type,
            display_name=display_name,
            to=to,
            account_id=account_id,
            label=label,
            sender_is_owner=sender_is_owner,
            usage=usage,
            model=model,
        )

    # ``self`` positional-only: a ``**`` parameter could otherwise be given one named
    # "self" (mypy then refuses the method's ``SyncGateway`` twin).
    async def record_many(
        self, /, session_key: str, messages: Sequence[Mapping[str, Any]], **routing: Any
    ) -> dict[str, Any]:
        """Append a batch of messages to one session, all or nothing (``channel``,
        ``chat_type``, ``display_name``, ``to``, ``account_id`` apply to each)."""
        return await self._service.record_many(session_key, messages, **routing)

    async def patch_session(self, /, session_key: str, **changes: Any) -> dict[str, Any]:
        """``sessions.patch``: set or clear label, model, levels, sendPolicy, busy."""
        return await self._service.patch_session(session_key, **changes)

    async def fork_session(
        self,
        key: str,
        new_key: str | None = None,
        at_version: int | None = None,
        *,
        requester: str | None = None,
    ) -> dict[str, Any]:
        """A new session whose history is ``key``'s up to ``at_version`` (else its latest
        version), by reference to the source's chain (docs/fork.md). ``requester``: the
        source must be one it may read, and the fork joins its tree."""
        return await self._service.fork_session(
            key, new_key=new_key, at_version=at_version, requester=requester
        )

    async def call_tool(
        self, requester: str, name: str, params: Any = None, *, run_token: str | None = None
    ) -> dict[str, Any]:
        """Run one tool for the session ``requester``; never raises. ``run_token`` (a
        ``RunRequest.run_token``) joins the call to that run's chain (ADR 0011)."""
        return await self._service.call_tool(requester, name, params, run_token=run_token)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self._service.tool_schemas()

    @property
    def delivery(self) -> ChannelDelivery:
        """The channel delivery it was opened with (a test's ``CapturingDelivery``)."""
        return self._service.delivery

    async def run(self, run_id: str, *, requester: str | None = None) -> dict[str, Any] | None:
        """The run as a camelCase dict; None for an unknown, malformed or hidden id."""
        return await self._service.run(run_id, requester=requester)

    async def runs(
        self,
        *,
        session_key: str | None = None,
        status: str | None = None,
        trace_id: str | None = None,
        limit: int = RUNS_DEFAULT_LIMIT,
        requester: str | None = None,
    ) -> dict[str, Any]:
        """``{"runs": [...]}``: runs newest first, filtered, at most ``limit``."""
        return await self._service.runs(
            session_key=session_key,
            status=status,
            trace_id=trace_id,
            limit=limit,
            requester=requester,
        )

    async def cancel_run(
        self, run_id: str, reason: str = "", *, requester: str | None = None
    ) -> dict[str, Any] | None:
        """Cancel a queued or running run, and the runs it caused."""
        return await self._service.cancel_run(run_id, reason, requester=requester)

    async def schedule(
        self,
        id: str,
        *,
        message: str,
        cron: str | None = None,
        every_seconds: float | None = None,
        session_key: str | None = None,
        tz: str = "UTC",
    ) -> dict[str, Any]:
        """Send ``message`` into ``cron:<id>`` (or ``session_key``) at each due time of a
        five-field ``cron`` expression read in ``tz``, or every ``every_seconds`` from now
        (decision 36, docs/schedules.md). Defining an id again replaces its definition;
        the same definition again changes nothing. ValueError (InvalidSchedule) says
        what is wrong with a bad one."""
        return await self._service.schedule(
            id,
            message=message,
            cron=cron,
            every_seconds=every_seconds,
            session_key=session_key,
            tz=tz,
        )

    async def unschedule(self, id: str) -> dict[str, Any] | None:
        """Remove a schedule: it fires no more. None when no active schedule has ``id``."""
        return await self._service.unschedule(id)

    async def schedules(self) -> list[dict[str, Any]]:
        """The active schedules, oldest first, each with its next due time and counts."""
        return await self._service.list_schedules()

    async def provide_input(
        self, run_id: str, text: str, *, by: str | None = None
    ) -> dict[str, Any]:
        """Answer a run waiting for input (decision 33): its next turn is queued with
        ``text`` as its message; ``by`` answers as that session (who may send there),
        None as an operator. Refusals are ``status: "error"`` results."""
        return await self._service.provide_input(run_id, text, by=by)

    async def session_as_of(
        self, session_key: str, *, version: int | None = None, at: datetime | None = None
    ) -> SessionAsOf:
        """The session's row and transcript at ``version`` or instant ``at`` (else now)."""
        return await self._service.session_as_of(session_key, version=version, at=at)

    async def timeline(self, session_key: str) -> Timeline:
        """Every event of the session and of the runs, exchanges and spawns it took part in."""
        return await self._service.timeline(session_key)

    async def trace(self, trace_id: str) -> Trace:
        """The chain of a trace: who caused what, as a tree in causal order."""
        return await self._service.trace(trace_id)

    def subscribe(
        self,
        after: int | str = 0,
        *,
        session_key: str | None = None,
        trace_id: str | None = None,
        requester: str | None = None,
    ) -> Subscription:
        """The recorded events after position ``after``, then each new one (docs/events.md)."""
        return self._service.subscribe(
            after, session_key=session_key, trace_id=trace_id, requester=requester
        )

    async def wait_idle(self) -> None:
        """Return once no work of this gateway is runnable before the clock's next due time."""
        await self._service.wait_idle()

    async def close(self) -> None:
        """Stop every task the gateway started, then close the store; never hangs."""
        await self._service.close()


def blocking(
    method: Callable[Concatenate[Gateway, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncGateway, P], T]:
    """``SyncGateway``'s twin of a ``Gateway`` coroutine: the same parameters (and
    docstring), run to completion on the sync gateway's own loop. Its type is derived
    from the coroutine's, so mypy checks a script's call as it checks an ``await``."""

    @functools.wraps(method)
    def run_blocking(self: SyncGateway, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self._gateway, *args, **kwargs))

    return run_blocking


class SyncGateway:
    """The same methods without ``await``, for scripts; runs its own event loop.

    Each coroutine of ``Gateway`` has its twin here, built from it (``blocking``), so
    the two cannot drift; a test checks every public method has its twin, with the
    same parameters, both ways (tests/unit/test_sync_gateway.py)."""

    def __init__(self, gateway: Gateway, loop: asyncio.AbstractEventLoop) -> None:
        self._gateway = gateway
        self._loop = loop

    @classmethod
    def open(cls, *args: Any, **kwargs: Any) -> SyncGateway:
        loop = asyncio.new_event_loop()
        gateway = loop.run_until_complete(Gateway.open(*args, **kwargs))
        return cls(gateway, loop)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coroutine)

    record_message = blocking(Gateway.record_message)
    record_many = blocking(Gateway.record_many)
    patch_session = blocking(Gateway.patch_session)
    fork_session = blocking(Gateway.fork_session)
    call_tool = blocking(Gateway.call_tool)
    run = blocking(Gateway.run)
    runs = blocking(Gateway.runs)
    cancel_run = blocking(Gateway.cancel_run)
    provide_input = blocking(Gateway.provide_input)
    session_as_of = blocking(Gateway.session_as_of)
    timeline = blocking(Gateway.timeline)
    trace = blocking(Gateway.trace)
    wait_idle = blocking(Gateway.wait_idle)
    schedule = blocking(Gateway.schedule)
    unschedule = blocking(Gateway.unschedule)
    schedules = blocking(Gateway.schedules)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self._gateway.tool_schemas()

    def subscribe(
        self,
        after: int | str = 0,
        *,
        session_key: str | None = None,
        trace_id: str | None = None,
        requester: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """``Gateway.subscribe`` as a plain iterator: each ``next`` runs the loop until
        the next event is recorded (it waits for it, so a script ends it by breaking
        out or closing the gateway)."""
        subscription = self._gateway.subscribe(
            after, session_key=session_key, trace_id=trace_id, requester=requester
        )
        while True:
            try:
                yield self._run(subscription.__anext__())
            except StopAsyncIteration:
                return

    def close(self) -> None:
        """Stop every task the gateway started, close the store, then the loop."""
        try:
            self._run(self._gateway.close())
        finally:
            self._loop.close()

    def __enter__(self) -> SyncGateway:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
