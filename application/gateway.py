"""The gateway: records messages, patches sessions and answers tool calls.

Every change goes through a session aggregate and is saved with its read-model changes
in one transaction. A save that collides with another writer (another process on the
same store) is retried from fresh state, never surfaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter, ValidationError
from sessionwire.application.audit.auditor import Auditor
from sessionwire.application.audit.state import SessionAsOf
from sessionwire.application.audit.timeline import Timeline
from sessionwire.application.audit.trace import Trace
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import Requester, ToolContext, ToolServices
from sessionwire.application.event_stream.scoped_reader import ScopedReader
from sessionwire.application.event_stream.subscription import (
    EventFilter,
    EventStream,
    Subscription,
    parse_cursor,
)
from sessionwire.application.forks import ForkRefused, fork_json, fork_point
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.callbacks import (
    RUN_TOOLS,
    callback_refusal,
    run_in_progress,
    with_recorded_hop,
)
from sessionwire.application.orchestration.cancellation import RunCancellation
from sessionwire.application.orchestration.exchanges import ExchangeDriver
from sessionwire.application.orchestration.in_flight import InFlight, Owner
from sessionwire.application.orchestration.outbox import DeliveryOutbox
from sessionwire.application.orchestration.pushes import RunPushes
from sessionwire.application.orchestration.runs import (
    RunEngine,
    RunTurn,
    current_run,
    current_turn,
)
from sessionwire.application.orchestration.schedules import ScheduleDriver
from sessionwire.application.orchestration.spawns import SpawnDriver
from sessionwire.application.orchestration.takeover import Takeover
from sessionwire.application.orchestration.trace_budgets import TraceBudgets
from sessionwire.application.orchestration.yields import YieldDriver
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock, IdSource
from sessionwire.application.ports.runtime import (
    AgentRuntime,
    ChannelDelivery,
)
from sessionwire.application.ports.session_read_model import StoredSession
from sessionwire.application.ports.store import Store
from sessionwire.application.ports.telemetry import (
    Telemetry,
    ToolSpan,
)
from sessionwire.application.run_queries import RUNS_DEFAULT_LIMIT, RunQueries
from sessionwire.application.tool_calls import (
    ToolAccess,
    ToolCall,
    answer,
    shorten,
    tool_call,
)
from sessionwire.application.tools.params import friendly
from sessionwire.application.tools.registry import REGISTRY, ToolEntry
from sessionwire.application.tools.results import ToolError
from sessionwire.application.tools.run_input import TOOL as INPUT_TOOL
from sessionwire.application.tools.run_input import RunInputResult, provide_input
from sessionwire.application.tools.schemas import tool_schemas
from sessionwire.application.tools.session_refs import (
    SessionNotResolved,
    SessionRefused,
    resolve_session,
)
from sessionwire.application.unit_of_work import UnitOfWork, retrying
from sessionwire.domain.control_commands import parse_send_command
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import agent_id_of
from sessionwire.domain.policy import Refusal
from sessionwire.domain.run import Run
from sessionwire.domain.schedule import schedule_view
from sessionwire.domain.session import (
    InvalidPatch,
    MessageOrigin,
    Session,
    SessionClosed,
    validate_patch,
)
from sessionwire.domain.transcript import (
    MAX_MESSAGE_BYTES,
    ROLES,
    TranscriptMessage,
    Usage,
    content_blocks,
)

# record_many: messages per call (one transaction), and the fields a message may carry.
MAX_BATCH = 10_000
BATCH_FIELDS = frozenset({"role", "content", "usage", "model"})
# Rounds of cancelling (one event-loop turn each) close() gives its tasks to stop.
CLOSE_ROUNDS = 50
MAX_CANCEL_REASON = 1000
CHAT_TYPES = {"direct": "direct", "dm": "direct", "group": "group", "channel": "channel"}

# Every registered tool, its handler imported (tools/registry.py).
TOOLS: dict[str, ToolEntry] = REGISTRY.entries()


class SessionNotFound(SessionwireError, LookupError):
    pass


class RunNotInFlight(SessionwireError, LookupError):
    """A call names a run (by its token) that is not in flight for the calling session."""


@dataclass(frozen=True)
class GatewayParts:
    """What a gateway service runs on, built and wired by the composition root
    (``adapters/bootstrap.py``, ADR 0037): the service receives them, it builds none."""

    in_flight: InFlight
    run_engine: RunEngine
    budgets: TraceBudgets
    outbox: DeliveryOutbox
    exchanges: ExchangeDriver
    pushes: RunPushes
    spawns: SpawnDriver
    yields: YieldDriver
    schedules: ScheduleDriver
    run_queries: RunQueries
    cancellation: RunCancellation
    services: ToolServices
    events: EventStream
    takeover: Takeover


class GatewayService:
    def __init__(
        self,
        *,
        store: AsyncStore,
        config: GatewayConfig,
        clock: Clock,
        ids: IdSource,
        runtime: AgentRuntime,
        delivery: ChannelDelivery,
        telemetry: Telemetry,
        parts: GatewayParts,
    ) -> None:
        self.store = store
        # Metrics and spans (ADR 0019).
        self.telemetry = telemetry
        self.config = config
        self.clock = clock
        self.ids = ids
        self.runtime = runtime
        self.delivery = delivery
        self.rules = config.key_rules
        self.log = library_logger("sessionwire.gateway").bind(store=store.location)
        # The tools each session may call (a sub-agent's set, decision 30).
        self.tool_access = ToolAccess(config, store)
        # Every task the gateway runs is registered in in_flight; a clock moved by hand
        # settles it (several gateways may share one clock).
        self.in_flight = parts.in_flight
        self.run_engine = parts.run_engine
        # Budgets per trace (decision 31): every start of a run in a trace asks them.
        self.budgets = parts.budgets
        self.outbox = parts.outbox
        self.exchanges = parts.exchanges
        # Push requests (A2A push-notification configs, ADR 0035).
        self.pushes = parts.pushes
        self.spawns = parts.spawns
        self.yields = parts.yields
        # Schedules (decision 36): each active one driven on this gateway's clock.
        self.schedules = parts.schedules
        self.schedules.open_session = self.ensure_session
        self.run_queries = parts.run_queries
        self.cancellation = parts.cancellation
        self.services = parts.services
        # The live event stream's followers (ADR 0023).
        self.events = parts.events
        # Dead gateways' work, resumed here (decision 24); watched once resume() ran.
        self.takeover = parts.takeover

    async def resume(self) -> None:
        """Carry on with what the store says is unfinished: queued runs, open exchanges."""
        # Timers that came due while the gateway was down fire first (late, once), so no
        # resumed run reaches an agent in a child that is archived by now.
        archived = await self.spawns.archive_overdue()
        # A cancel's cascade cut short by a crash: finished before any run is resumed.
        cascaded = await self.cancellation.resume()
        runs = await self.run_engine.resume()
        exchanges = await self.exchanges.resume()
        spawns = await self.spawns.resume()
        yields = await self.yields.resume()
        deliveries = await self.outbox.resume()
        pushes = await self.pushes.resume()
        # Last: a schedule whose due times passed while no gateway ran fires now, once.
        schedules = await self.schedules.resume()
        if (
            runs
            or exchanges
            or spawns
            or yields
            or deliveries
            or archived
            or pushes
            or cascaded
            or schedules
        ):
            self.log.info(
                "resumed pending work",
                archived=archived,
                cascaded=len(cascaded),
                runs=runs,
                exchanges=exchanges,
                spawns=spawns,
                yields=yields,
                deliveries=deliveries,
                pushes=pushes,
                schedules=schedules,
            )
        self.takeover.start()

    async def took_over(self, gateways: list[str]) -> None:
        # Their pending work is the store's pending work: resumed like at a start.
        await self.resume()

    def pending_runs(self) -> dict[str, int]:
        # Read when metrics are collected, on the collector's thread.
        return {
            status: len(self.store.blocking.pending_work("run", (status,)))
            for status in ("queued", "running")
        }

    async def tools_for(self, run: Run) -> tuple[str, ...]:
        """The tools a run may use: sub-agents get the full set minus the session tools
        (but sessions_yield), and sessions_spawn too while they may nest (decision 30)."""
        return await self.tools_of_session(run.state.session_key)

    async def tools_of_session(self, key: str) -> tuple[str, ...]:
        return await self.tool_access.of_session(key)

    # Commands ---------------------------------------------------------------------------

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
        """Append one transcript message (opening the session on its first message).

        Raises ValueError (InvalidSessionKey, InvalidPatch, ...) for bad input; nothing
        is written then.
        """
        key = self.rules.canonical(session_key)
        if not isinstance(sender_is_owner, bool):
            raise ValueError("sender_is_owner must be true or false")
        normalized_chat_type = _chat_type(chat_type)
        now = self.clock.now()
        message = _message(role, content, usage=usage, model=model, at=now)
        origin = MessageOrigin(
            channel=_clean(channel),
            chat_type=normalized_chat_type,
            display_name=_clean(display_name),
            to=_clean(to),
            account_id=_clean(account_id),
        )
        patch = validate_patch({"label": label}) if label is not None else {}

        command = parse_send_command(message.text()) if role == "user" else None

        async def append(session: Session) -> None:
            if patch:
                await self._check_label_free(session.state.key, patch.get("label"))
                session.patch(patch, at=now)
            # No provenance stored: a recorded line is its role's default (user or agent),
            # which readers get from with_provenance.
            session.append_message(message, at=now, origin=origin, sender_is_owner=sender_is_owner)
            if command is not None:
                session.handle_send_command(command, sender_is_owner=sender_is_owner, at=now)

        session = await self._change_session(key, append, create=True)
        if self.log.isEnabledFor(logging.DEBUG):
            # Checked first: binding and dropping a record cost more than the check, on
            # every append.
            self.log.debug("message recorded", session_key=key, role=role, version=session.version)
        recorded: dict[str, Any] = {"sessionKey": key, "sessionId": session.state.session_id}
        if command is not None:
            # An owner's command answers; anyone else's is ignored (and recorded as such).
            self.log.info(
                "/send command", session_key=key, mode=command.mode, applied=sender_is_owner
            )
            recorded["command"] = {
                "name": "send",
                "mode": command.mode,
                "applied": sender_is_owner and command.mode is not None,
                "reply": command.reply if sender_is_owner else None,
                "sendPolicy": session.state.send_policy,
            }
        return recorded

    async def record_many(
        self,
        session_key: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        channel: str | None = None,
        chat_type: str | None = None,
        display_name: str | None = None,
        to: str | None = None,
        account_id: str | None = None,
    ) -> dict[str, Any]:
        """Append a batch of transcript messages to one session, all or nothing.

        Each message is a mapping with ``role`` and ``content`` (and optionally ``usage``
        and ``model``), checked as ``record_message`` checks one; the batch is saved in
        one transaction, so a bad message or a failed write records none of them. For
        prefills and imports: ``/send`` lines are recorded as text, not applied, and the
        routing fields apply to every message. At most MAX_BATCH messages per call.
        """
        key = self.rules.canonical(session_key)
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise ValueError("messages must be a list of {role, content} objects")
        if len(messages) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} messages per batch, not {len(messages)}")
        now = self.clock.now()
        checked = batch_messages(messages, timestamp=int(now.timestamp() * 1000))
        origin = MessageOrigin(
            channel=_clean(channel),
            chat_type=_chat_type(chat_type),
            display_name=_clean(display_name),
            to=_clean(to),
            account_id=_clean(account_id),
        )

        async def append(session: Session) -> None:
            # One event for the whole batch (Session.MessagesAppended): one state update,
            # one stored record, one chain link; the transcript rows in one statement.
            session.append_messages(checked, at=now, origin=origin)

        session = await self._change_session(key, append, create=True)
        self.log.debug("messages recorded", session_key=key, count=len(checked))
        return {
            "sessionKey": key,
            "sessionId": session.state.session_id,
            "recorded": len(checked),
        }

    async def patch_session(self, session_key: str, **changes: Any) -> dict[str, Any]:
        """``sessions.patch``: set or clear (``None``) label, model, levels, sendPolicy, busy
        (what a send into the session does while it has a run in flight, ADR 0022)."""
        key = self.rules.canonical(session_key)
        checked = validate_patch(changes)

        async def apply(session: Session) -> None:
            await self._check_label_free(session.state.key, checked.get("label"))
            session.patch(checked, at=self.clock.now())

        session = await self._change_session(key, apply, create=False)
        self.log.info("session patched", session_key=key, fields=sorted(checked))
        return {"ok": True, "key": key, "entry": session.state.model_dump(mode="json")}

    async def ensure_session(self, session_key: str) -> None:
        """Open the session (canonical key) unless it exists: a remote context's session
        is opened by its first task, before any message is in it."""

        async def nothing(session: Session) -> None:
            return None

        if await self.store.session(session_key) is None:
            await self._change_session(session_key, nothing, create=True)

    async def fork_session(
        self,
        session_key: str,
        *,
        new_key: str | None = None,
        at_version: int | None = None,
        requester: str | None = None,
    ) -> dict[str, Any]:
        """A new session whose history is ``session_key``'s up to ``at_version`` (its
        latest version when None), by reference to the source's chain (decision 34).

        With ``requester``, the source must be a session it may read (else SessionNotFound,
        as for a session that does not exist: decision 41) and the fork is in its tree.
        Raises ForkRefused for a position the source never had or a key already taken.
        """
        source_key = self.rules.canonical(session_key)
        parent: StoredSession | None = None
        owner: str | None = None
        if requester is None:
            source = await self.store.session(source_key)
            if source is None:
                raise SessionNotFound(f"Session not found: {source_key}")
        else:
            context = ToolContext(
                store=self.store,
                config=self.config,
                clock=self.clock,
                requester=Requester.from_key(self.rules, requester),
            )
            try:
                source = await resolve_session(context, session_key, access="history")
            except (SessionNotResolved, SessionRefused) as hidden:
                raise SessionNotFound(str(hidden)) from None
            owner = context.requester.key
            parent = await self.store.session(owner)
        point = await self.store.read(fork_point, source, at_version)
        key = (
            self.rules.canonical(new_key)
            if new_key is not None
            else f"agent:{source.state.agent_id}:fork:{self.ids.new_id()}"
        )
        now = self.clock.now()
        with self.in_flight.entered(Owner("session", key)):
            async for uow in retrying(self.store, f"session {key}"):
                with uow:
                    if await uow.session(key) is not None:
                        raise ForkRefused(f"a session is already stored under {key}")
                    fork = uow.add(
                        Session.open(
                            key=key,
                            session_id=self.ids.new_id(),
                            agent_id=agent_id_of(key),
                            at=now,
                            # The requester's: in its tree, under its own ancestors.
                            spawned_by=owner,
                            lineage=parent.state.spawn_ancestors() if parent else (),
                        )
                    )
                    fork.fork_from(point, at=now)
                    await uow.commit()
        self.log.info(
            "session forked", session_key=key, source=point.source_key, version=point.version
        )
        return {
            "sessionKey": key,
            "sessionId": fork.state.session_id,
            "forkedFrom": fork_json(point),
        }

    async def _check_label_free(self, key: str, label: str | None) -> None:
        if label is None:
            return
        if any(other.state.key != key for other in await self.store.sessions_by_label(label)):
            raise InvalidPatch(f"label already in use: {label}")

    async def _change_session(
        self, key: str, change: Callable[[Session], Awaitable[None]], *, create: bool
    ) -> Session:
        with self.in_flight.entered(Owner("session", key)):
            async for uow in retrying(self.store, f"session {key}"):
                with uow:
                    session = await uow.session(key) or self._open_session(uow, key, create=create)
                    await change(session)
                    await uow.commit()
        return session

    def _open_session(self, uow: UnitOfWork, key: str, *, create: bool) -> Session:
        if not create:
            raise SessionNotFound(f"Session not found: {key}")
        return uow.add(
            Session.open(
                key=key,
                session_id=self.ids.new_id(),
                agent_id=agent_id_of(key),
                at=self.clock.now(),
            )
        )

    # Tools ------------------------------------------------------------------------------

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas()

    async def call_tool(
        self,
        requester: str,
        name: str,
        params: Any,
        *,
        run_token: str | None = None,
        callback: bool = False,
    ) -> dict[str, Any]:
        """Run one tool for the session ``requester``; never raises.

        ``run_token`` (``RunRequest.run_token``) links a call made from outside the
        runtime's own task (over HTTP or MCP) to the run in flight it is made for, so it
        joins that run's chain and hop limit (decision 17). ``callback``: the call came
        over a transport an agent calls back on (HTTP, MCP); without a token it is
        attributed to the requester's run in progress, if any (ADR 0034).
        """
        caller_run = current_run()
        # In-flight work while it runs (a send waiting for its reply waits as work).
        with (
            self.in_flight.entered(Owner("tool", shorten(str(name)))),
            self.telemetry.tool_span(
                ToolSpan(
                    tool=shorten(str(name)),
                    requester=shorten(str(requester)),
                    run_id=caller_run.run_id if caller_run else None,
                    trace_id=caller_run.trace_id if caller_run else None,
                )
            ) as span,
        ):
            result = await self._call_tool(requester, name, params, run_token, callback)
            status = result.get("status")
            span.status = status if isinstance(status, str) else "ok"
            if span.status in ("error", "forbidden"):
                span.error = str(result.get("error", ""))[:200]
        return result

    async def _call_tool(
        self, requester: str, name: str, params: Any, run_token: str | None, callback: bool
    ) -> dict[str, Any]:
        log = self.log.bind(tool=shorten(str(name)), requester=shorten(str(requester)))
        call = tool_call(TOOLS, self.rules, requester, name)
        if not isinstance(call, ToolCall):
            return call
        turn = current_turn()
        caller = turn.state if turn else None
        refusal: Refusal | None = None
        if run_token is not None:
            try:
                turn = self.turn_for(call.caller.key, run_token)
            except RunNotInFlight as refused:
                log.info("tool refused: run not in flight", error=str(refused))
                return ToolError(
                    status="forbidden", tool=call.name, error=str(refused)
                ).to_json_dict()
            caller = turn.state
        elif turn is None and callback:
            found = await run_in_progress(self.run_engine, self.store, call.caller.key)
            if found is not None:
                # Its session's run in progress makes the call (ADR 0034): its chain, or
                # refused (then recorded on that run's chain, in its trace's audit).
                caller, turn = found
                if self.config.session.agentToAgent.callbacksWithoutRun == "refuse":
                    refusal = callback_refusal(call.caller.key, caller.run_id)
                else:
                    log.info("tool call attributed to the session's run", run_id=caller.run_id)
        if caller is not None and call.name in RUN_TOOLS:
            caller = await with_recorded_hop(self.run_engine, caller)
            if turn is not None:
                turn.state = caller
        context = ToolContext(
            store=self.store,
            config=self.config,
            clock=self.clock,
            requester=call.caller,
            services=self.services,
            caller_run=caller,
            caller_turn=turn,
        )
        if refusal is not None:
            await context.record_refusal(
                refusal, tool=call.name, reference=call.caller.raw, target_key=None
            )
            return ToolError(
                status="forbidden", tool=call.name, error=refusal.message
            ).to_json_dict()
        return await answer(call, context, params, access=self.tool_access, log=log)

    def turn_for(self, requester: str, run_token: str) -> RunTurn:  # internal
        """The turn in flight that ``run_token`` names, when it is a turn of the session
        ``requester`` (canonical key); raises RunNotInFlight otherwise. A caller can so
        only claim a run of its own session that is running now: never a lower hop
        count than its own run's, never an ended run's."""
        turn = self.run_engine.turn_by_token(run_token) if isinstance(run_token, str) else None
        if turn is None:
            raise RunNotInFlight(
                "the run token names no run in flight (unknown, or its turn has ended)"
            )
        if turn.state.session_key != requester:
            raise RunNotInFlight(
                f"the run token names a run of another session, not of {requester!r}"
            )
        return turn

    # Runs (served from the runs read model, ADR 0017) ---------------------------------

    async def run(self, run_id: str, *, requester: str | None = None) -> dict[str, Any] | None:
        """The run as a camelCase dict (``runId``, ``status``, ``sessionKey``, ``step``,
        ``traceId``, ``parentRunId``, ``startedAt``, ``endedAt``, ...); None for an
        unknown or malformed id, or a run of a session ``requester`` may not see."""
        return await self.run_queries.run(run_id, requester=requester)

    async def runs(
        self,
        *,
        session_key: str | None = None,
        status: str | None = None,
        trace_id: str | None = None,
        limit: int = RUNS_DEFAULT_LIMIT,
        requester: str | None = None,
    ) -> dict[str, Any]:
        """``{"runs": [...]}``: runs newest first, filtered, at most ``limit`` (1-1000);
        with ``requester``, only runs of sessions it may see. ValueError for a bad
        ``status``, ``limit`` or key."""
        return await self.run_queries.runs(
            session_key=session_key,
            status=status,
            trace_id=trace_id,
            limit=limit,
            requester=requester,
        )

    # Schedules (decision 36) ----------------------------------------------------------

    async def schedule(
        self,
        schedule_id: str,
        *,
        message: str,
        cron: str | None = None,
        every_seconds: float | None = None,
        session_key: str | None = None,
        tz: str = "UTC",
    ) -> dict[str, Any]:
        """Define a schedule (or define it again); InvalidSchedule (a ValueError) for a
        bad id, cron expression, interval, time zone or message."""
        with self.in_flight.entered(Owner("schedule", shorten(str(schedule_id)))):
            state = await self.schedules.define(
                schedule_id,
                cron=cron,
                every_seconds=every_seconds,
                message=message,
                session_key=session_key,
                tz=tz,
            )
        return schedule_view(state)

    async def unschedule(self, schedule_id: str) -> dict[str, Any] | None:
        """Remove a schedule; None when there is no active schedule by that id."""
        with self.in_flight.entered(Owner("schedule", shorten(str(schedule_id)))):
            state = await self.schedules.remove(schedule_id)
        return None if state is None else schedule_view(state)

    async def list_schedules(self) -> list[dict[str, Any]]:
        return [schedule_view(state) for state in await self.schedules.listing()]

    async def provide_input(
        self, run_id: str, text: str, *, by: str | None = None
    ) -> dict[str, Any]:
        """Answer a run waiting for input (decision 33): ``{"status": "accepted", "runId",
        "sessionKey"}`` with the run's next turn queued, its message ``text``; an
        ``error`` result, nothing written, for a run that is not waiting (answered
        already, ended, never asked), not visible to ``by``, or an answer not among its
        options. ``by`` is the answering session (as ``call_tool``'s requester: who may
        answer is who may send into the run's session); None answers as an operator."""
        if by is not None:
            return await self.call_tool(by, "run_input", {"runId": run_id, "text": text})
        # The operator: no session's policy applies; the answer's own checks still do.
        return (await self.answer_unchecked(run_id, text, by=None)).to_json_dict()

    async def answer_unchecked(
        self, run_id: str, text: str, *, by: str | None
    ) -> RunInputResult | ToolError:
        """The answer recorded without asking whether ``by`` may send into the run's
        session (an operator, or a transport that checked the caller may see the run:
        A2A's task visibility); the answer's own checks apply."""
        with self.in_flight.entered(Owner("tool", INPUT_TOOL)):
            return await provide_input(self.services, run_id, text, by=by)

    async def cancel_run(
        self, run_id: str, reason: str = "", *, requester: str | None = None
    ) -> dict[str, Any] | None:
        """Cancel a queued or running run: ``RunCancelled`` is recorded, its runtime call
        stopped (in whichever gateway process runs it), whoever waits for it hears
        ``cancelled``, its exchange or spawn carries on as after a failed run, and the
        runs it caused that have not ended are cancelled with it (``cascaded``).

        Returns the run's dict after the change with ``"cancelled": true``; for a run
        that had ended, the dict unchanged with ``"cancelled": false`` and a ``reason``;
        None as ``run`` gives None. ValueError for a reason that is not a short string.
        """
        if not isinstance(reason, str) or len(reason) > MAX_CANCEL_REASON:
            raise ValueError(f"reason must be a string of at most {MAX_CANCEL_REASON} characters")
        # In-flight work from its first step: its lookup is an awaited read, and a
        # wait_idle meanwhile must not take the gateway for idle with the cancel to come.
        with self.in_flight.entered(Owner("cancel", shorten(str(run_id)))):
            found = await self.run_queries.find(run_id, requester=requester)
            if found is None:
                return None
            outcome = await self.cancellation.cancel(UUID(found.run_id), reason.strip())
            after = await self.store.run(found.run_id)
        if outcome is None or after is None:
            return None
        answer = after.to_json_dict()
        answer["cancelled"] = outcome.cancelled
        if outcome.cancelled or outcome.cascaded:
            # A retried cancel of a cancelled run says what its cascade cancelled now.
            answer["cascaded"] = outcome.cascaded
        if not outcome.cancelled:
            answer["reason"] = f"the run had already ended ({after.status})"
        return answer

    # Audit (reads recorded events only: no runtime, no delivery) -----------------------

    # Each is read and assembled whole on a reader thread of the store: a long session's
    # timeline costs the loop nothing (decision 23).

    async def session_as_of(
        self, session_key: str, *, version: int | None = None, at: datetime | None = None
    ) -> SessionAsOf:
        """The session's row and transcript at ``version`` or instant ``at`` (else now)."""
        rules = self.rules

        def read(store: Store) -> SessionAsOf:
            return Auditor(store, rules).session_as_of(session_key, version=version, at=at)

        return await self.store.read(read)

    async def timeline(self, session_key: str) -> Timeline:
        """Every event of the session and of the runs, exchanges and spawns it took part in."""
        rules = self.rules
        return await self.store.read(lambda store: Auditor(store, rules).timeline(session_key))

    async def trace(self, trace_id: str) -> Trace:
        """The chain of a trace: who caused what, as a tree in causal order."""
        rules = self.rules
        return await self.store.read(lambda store: Auditor(store, rules).trace(trace_id))

    # The live event stream --------------------------------------------------------------

    def subscribe(
        self,
        after: int | str = 0,
        *,
        session_key: str | None = None,
        trace_id: str | None = None,
        requester: str | None = None,
    ) -> Subscription:
        """The recorded events after sealed-log position ``after``, in that order, as
        public dicts (docs/events.md), then each new one as it is recorded, until
        ``close()`` (of the subscription or the gateway). ``session_key``: only events
        of that session (its own and those of the runs, exchanges and spawns it took
        part in, as its audit timeline); ``trace_id``: only that chain's; ``requester``:
        only events of sessions that session may read the history of.

        Raises ValueError for a bad position or key. Resume after a reconnect or a
        restart from the last event's ``cursor`` (its ``position``, or inside a batch of
        messages ``"position.k"``): nothing is missed or repeated.
        """
        parse_cursor(after)  # a clear ValueError now, not at the first read
        if trace_id is not None and not isinstance(trace_id, str):
            raise ValueError("trace_id must be a string")
        reader = None
        if requester is not None:
            reader = ScopedReader(
                ToolContext(
                    store=self.store,
                    config=self.config,
                    clock=self.clock,
                    requester=Requester.from_key(self.rules, requester),
                )
            )
        events = EventFilter(
            session_key=self.rules.canonical(session_key) if session_key is not None else None,
            trace_id=trace_id,
            sees=reader.sees if reader is not None else None,
            view=reader.view if reader is not None else None,
            prepare=reader.prepare if reader is not None else None,
        )
        return self.events.subscribe(after, events)

    def end_subscriptions(self) -> None:
        """End every open subscription (a server stopping: its event streams close, so
        it need not wait for clients that would never hang up)."""
        self.events.close()

    async def wait_idle(self) -> None:
        """Return once no work of this gateway is runnable before the clock's next due time.

        Every run, runtime call, exchange and spawn step, timer and delivery attempt is
        registered work (``application/orchestration/in_flight.py``), so this is exact:
        work waiting on a clock that only moves when told (``moves_by_itself`` False, a
        test's virtual clock) counts as settled; on a real clock every clock wait is
        waited for, except parked timers (archive timers, delivery back-offs).
        """
        # A save in the store's writer thread is work in progress, not idleness (the
        # coroutine awaiting it is registered work too; a save started elsewhere is not).
        await self.store.writes_settled()
        await self.in_flight.wait_idle()
        await self.store.writes_settled()

    async def close(self) -> None:
        """Stop every task the gateway started, then close the store; never hangs.

        Each round cancels what is still running and lets the loop turn once: a task
        whose cleanup itself waits (a lane slot taken back, a delivery that swallows its
        cancellation) is cancelled again. After CLOSE_ROUNDS rounds whatever still runs
        is named in a warning and left; the store closes anyway.
        """
        self.clock.detach(self.in_flight)
        self.end_subscriptions()
        self.run_engine.stop_taking_runs()
        stuck: list[asyncio.Task[Any]] = []
        for _ in range(CLOSE_ROUNDS):
            stuck = self._tasks_to_stop()
            if not stuck:
                break
            for task in stuck:
                task.cancel()
            await asyncio.wait(stuck, timeout=0)
        else:
            stuck = self._tasks_to_stop()
        if stuck:
            self.log.warning(
                "gateway closed with tasks that would not stop",
                tasks=sorted(task.get_name() for task in stuck),
            )
        await self.store.close()

    def _tasks_to_stop(self) -> list[asyncio.Task[Any]]:
        # Every task the registry knows, and runtime calls abandoned at their timeout;
        # never the task that is closing (it may itself be registered work).
        closing = asyncio.current_task()
        tasks = {*self.in_flight.tasks(), *self.run_engine.abandoned_calls()}
        return [task for task in tasks if not task.done() and task is not closing]


def _chat_type(chat_type: str | None) -> str | None:
    if chat_type is None:
        return None
    normalized = CHAT_TYPES.get(str(chat_type).strip().lower())
    if normalized is None:
        raise ValueError("chat_type must be direct, dm, group or channel")
    return normalized


def _message(role: Any, content: Any, *, usage: Any, model: Any, at: datetime) -> TranscriptMessage:
    """One transcript message, checked (ValueError says what is wrong)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    try:
        message = TranscriptMessage(
            role=role,
            content=content_blocks(content),
            timestamp=int(at.timestamp() * 1000),
            usage=Usage.model_validate(usage) if usage is not None else None,
            model=model,
        )
    except ValidationError as error:
        raise ValueError(f"invalid message: {friendly(error)}") from None
    # JSON-escaping makes a character at most 6 bytes: only a message that could be
    # too large pays for serialising it here.
    if not isinstance(content, str) or 6 * len(content) + 4096 > MAX_MESSAGE_BYTES:
        size = len(message.to_json().encode())
        if size > MAX_MESSAGE_BYTES:
            raise ValueError(
                f"message is too large ({size} bytes of JSON, max {MAX_MESSAGE_BYTES})"
            )
    return message


_MESSAGES = TypeAdapter(list[TranscriptMessage])


def batch_messages(
    messages: Sequence[Mapping[str, Any]], *, timestamp: int
) -> list[TranscriptMessage]:
    """A batch of ``{role, content, usage?, model?}`` checked as ``_message`` checks one,
    validated in one pydantic call; ValueError names the first bad message's index."""
    rows: list[dict[str, Any]] = []
    sized: list[int] = []  # messages that could be too large: their JSON is measured
    for index, item in enumerate(messages):
        if type(item) is not dict and not isinstance(item, Mapping):
            raise ValueError(f"message {index}: not an object with role and content")
        if not BATCH_FIELDS.issuperset(item):
            unknown = ", ".join(sorted(set(item) - BATCH_FIELDS))
            raise ValueError(f"message {index}: unknown fields {unknown}")
        role = item.get("role")
        if role not in ROLES:
            raise ValueError(
                f"message {index}: role must be one of {', '.join(ROLES)}, not {role!r}"
            )
        content: Any = item.get("content")
        if type(content) is str:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
            if 6 * len(content) + 4096 > MAX_MESSAGE_BYTES:
                sized.append(index)
        else:
            try:
                blocks = content_blocks(content)
            except ValueError as error:
                raise ValueError(f"message {index}: {error}") from None
            sized.append(index)
        row = {"role": role, "content": blocks, "timestamp": timestamp}
        usage, model = item.get("usage"), item.get("model")
        if usage is not None:
            row["usage"] = usage
        if model is not None:
            row["model"] = model
        rows.append(row)
    try:
        checked = _MESSAGES.validate_python(rows)
    except ValidationError as error:
        first = error.errors()[0]
        bad, *where = first["loc"]
        cause = (first.get("ctx") or {}).get("error")
        detail = (
            str(cause)
            if isinstance(cause, ValueError)
            else f"{'.'.join(map(str, where))}: {first['msg']}"
        )
        raise ValueError(f"message {bad}: invalid message: {detail}") from None
    for index in sized:
        # As _message: only a message that could be too large pays for serialising it.
        size = len(checked[index].to_json().encode())
        if size > MAX_MESSAGE_BYTES:
            raise ValueError(
                f"message {index}: message is too large ({size} bytes of JSON, "
                f"max {MAX_MESSAGE_BYTES})"
            )
    return checked


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("routing fields (channel, to, display_name, account_id) must be strings")
    return value.strip() or None


__all__ = ["GatewayService", "RunNotInFlight", "SessionClosed", "SessionNotFound"]
