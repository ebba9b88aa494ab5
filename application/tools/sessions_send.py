"""``sessions_send``: a message into another session, a wait, and the exchange after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.runs import PENDING
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.session_read_model import StoredSession
from sessionwire.application.ports.store import Store, StoreInUse
from sessionwire.application.tools.run_params import SessionsSendParams
from sessionwire.application.tools.run_results import (
    HopLimitRefused,
    SendDeliveryShown,
    SendResult,
    TraceBudgetRefused,
)
from sessionwire.application.tools.session_refs import (
    SessionNotResolved,
    SessionRefused,
    resolve_label,
    resolve_session,
)
from sessionwire.application.tools.steering import steer_run
from sessionwire.domain.agent_to_agent import (
    is_silent,
    message_context,
    reply_text,
    resolve_announce_target,
)
from sessionwire.domain.busy_decision import (
    BusyDecision,
    BusyDecisionState,
    BusyOutcome,
    busy_decision_id,
)
from sessionwire.domain.causality import Causality
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.keys import InvalidSessionKey, agent_id_of, is_thread_key
from sessionwire.domain.policy import BusyChoice
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.send_delivery import SendDelivery
from sessionwire.domain.session import SessionState
from sessionwire.domain.trace_budget import BudgetExceeded

THREAD_REFUSAL = (
    "sessions_send cannot target a thread session ({key}) for inter-agent coordination; "
    "use the parent channel session key instead"
)

log = library_logger("sessionwire.tools")

# The busy decisions that started no run: an attempt after them answers as they did.
SETTLED = ("rejected", "steered")


class SendRefused(SessionwireError):
    """Bad or unresolvable input (an ``error`` result, not a policy refusal)."""

    def __init__(self, status: str, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


def announce_channel(target: SessionState) -> str:
    """The target channel the step texts name: the announce target's, or "unknown" (§6.6)."""
    announce_target = resolve_announce_target(
        target.key,
        stored_channel=target.last_channel,
        stored_to=target.last_to,
        stored_account_id=target.last_account_id,
    )
    return announce_target.channel if announce_target else "unknown"


async def _target(context: ToolContext, params: SessionsSendParams) -> StoredSession:
    """The session to send into, checked against every policy (§6.2, then the send policy)."""
    if params.sessionKey and params.label:
        raise SendRefused("error", "Provide either sessionKey or label (not both).")
    try:
        reference = params.sessionKey
        if reference is None and params.label:
            reference = await resolve_label(context, params.label, params.agentId)
        if reference is None and params.agentId:
            # agentId alone: that agent's main session (decision 29, as OpenClaw).
            reference = context.rules.main_key_of(params.agentId)
        if reference is None:
            raise SendRefused("error", "Either sessionKey or label is required")
        _refuse_thread(context, reference)
        target = await resolve_session(context, reference, access="messaging")
    except SessionNotResolved as error:
        raise SendRefused("error", error.message) from None
    refusal = context.access.send_refusal(target.state.policy_target(context.rules))
    if refusal:
        key = target.state.key
        raise SessionRefused(
            refusal,
            reference=reference.strip(),
            target_key=key,
            display_key=context.display_key(key),
        )
    return target


def _refuse_thread(context: ToolContext, reference: str) -> None:
    """A thread's session is a human-facing conversation: never a send's target. Judged on
    the key's shape alone, so the refusal says nothing about whether the session exists."""
    try:
        key = context.rules.canonical(reference, agent_id=context.requester.agent_id)
    except InvalidSessionKey:
        return  # resolve_session gives its own error
    if is_thread_key(key):
        raise SendRefused("error", THREAD_REFUSAL.format(key=reference.strip()))


async def sessions_send(
    context: ToolContext, params: SessionsSendParams
) -> SendResult | HopLimitRefused | TraceBudgetRefused:
    services = context.services
    assert services is not None, "sessions_send needs the gateway's run engine"
    hop_refusal = context.hop_refusal()
    if hop_refusal is not None:
        # Whatever the target: the chain this run belongs to has sent enough (decision 17).
        reference = (params.sessionKey or params.label or "").strip()
        await context.record_refusal(
            hop_refusal, tool="sessions_send", reference=reference, target_key=None
        )
        return HopLimitRefused(error=hop_refusal.message)
    run_id = context.new_run_id("sessions_send", params)
    # Its run, exchange and busy decision saved by another attempt meanwhile: answered for.
    return await context.once_more_on_conflict(lambda: _send(context, params, run_id))


async def _send(
    context: ToolContext, params: SessionsSendParams, run_id: UUID
) -> SendResult | TraceBudgetRefused:
    """The send with id ``run_id``: answered for an earlier attempt's, or started."""
    services = context.services
    assert services is not None
    earlier = await _earlier_attempt(context, run_id)
    if earlier.run is not None:
        # The calling run's earlier attempt (before a crash) made this very send: it goes
        # on as it was (a reopen resumes it); answer for it rather than start it again.
        display = context.display_key(earlier.run.session_key)
        return await _answer(context, params, run_id, display, earlier.delivery())
    chain = context.next_hop(str(run_id))
    # The trace's budget (decision 31) before anything else: a spent trace sends nowhere.
    async with services.budgets.admit(chain.trace_id) as exceeded:
        started = None if exceeded else await _start(context, params, earlier, chain)
    if isinstance(started, BudgetExceeded):
        exceeded = started  # the busy policy would steer it: a steer the trace may not send
    if exceeded is not None:
        reference = (params.sessionKey or params.label or "").strip()
        await context.refuse_over_budget(exceeded, chain, tool="sessions_send", reference=reference)
        return TraceBudgetRefused(error=exceeded.message)
    if isinstance(started, SendResult):
        return started
    assert started is not None
    assert not isinstance(started, BudgetExceeded)
    display, delivery = started
    return await _answer(context, params, run_id, display, delivery)


async def _start(
    context: ToolContext, params: SessionsSendParams, earlier: _EarlierAttempt, chain: Causality
) -> SendResult | tuple[str, SendDelivery] | BudgetExceeded:
    """Resolve the target and start the run with its exchange: the target's display key
    and what became of the message (decision 29), the result of a send that started
    nothing, or the limit a steer would pass (called under the trace's admission)."""
    services = context.services
    assert services is not None
    run_id = earlier.run_id
    try:
        target = await _target(context, params)
    except SessionRefused as refused:
        await context.record_refusal(
            refused.refusal,
            tool="sessions_send",
            reference=refused.reference,
            target_key=refused.target_key,
        )
        refusal = refused.refusal
        return SendResult(
            runId=str(run_id),
            status=refusal.status,
            tool="sessions_send",
            error=refusal.message,
            sessionKey=refused.display_key,
        )
    except SendRefused as refused:
        return SendResult(
            runId=str(run_id),
            status=refused.status,
            tool="sessions_send",
            error=refused.error,
        )
    display = context.display_key(target.state.key)

    requester = context.requester
    requester_session, in_flight = await context.store.read(
        _requester_and_target, requester.key, target.state.key
    )
    requester_channel = requester_session.state.last_channel if requester_session else None
    now = context.clock.now()
    # The calling run's earlier attempt (before a crash or takeover) had this very send
    # rejected or steered: it stays so, busy or not now (one send, one decision).
    settled = earlier.settled()
    if settled is not None and settled.decision == "rejected":
        return _rejected(
            run_id, display, settled.in_flight_run_id, settled.rule, settled.runs_ahead
        )
    if settled is not None:
        return display, _delivery_of(settled)
    busy = await _busy_decision(context, target.state, in_flight, run_id, chain)
    if busy is not None and busy.state.decision == "steered":
        # A steer counts in the sender's trace (maxSteers; from outside there is none).
        sender_trace = chain.trace_id if context.caller_run is not None else None
        over = await services.budgets.steer_exceeded(sender_trace)
        if over is not None:
            return over
        steered = await _steer(context, busy, params.message, run_id, chain)
        if steered is not None:
            return display, steered
        # The run ended between the decision and the steer: queue instead, as OpenClaw's
        # steer does when injection fails; recorded as what it became (enqueued).
        busy = await _steer_fell_back(context, target.state, run_id, chain, busy)
    if busy is not None:
        log.info(
            "send into a busy session",
            session_key=target.state.key,
            decision=busy.state.decision,
            in_flight_run_id=busy.state.in_flight_run_id,
            rule=busy.state.rule,
        )
    if busy is not None and busy.state.decision == "rejected":
        await _record_rejection(context, busy)
        state = busy.state
        return _rejected(run_id, display, state.in_flight_run_id, state.rule, state.runs_ahead)
    run = Run.start(
        run_id=run_id,
        session_key=target.state.key,
        agent_id=agent_id_of(target.state.key),
        step="primary",
        message=params.message,
        context=message_context(
            requester_key=requester.raw,
            requester_channel=requester_channel,
            target_display=display,
        ),
        timeout_seconds=services.run_timeout_seconds,
        requester_key=requester.key,
        at=now,
        causality=chain,
        sender_key=requester.key,
    )
    exchange = Exchange.open(
        primary_run_id=run_id,
        requester_key=requester.key,
        requester_display=requester.raw,
        requester_channel=requester_channel,
        target_key=target.state.key,
        target_display=display,
        target_channel=announce_channel(target.state),
        original_message=params.message,
        max_turns=context.config.session.agentToAgent.max_ping_pong_turns,
        at=now,
        causality=chain,
    )
    await services.runs.save_and_enqueue(
        run,
        exchange,
        *([busy] if busy is not None else []),
        then=lambda: services.exchanges.start(exchange.id),
    )
    # What was just recorded decides the answer: the decision saved with the run, or none.
    if busy is None:
        return display, SendDelivery.of(None, None)
    return display, SendDelivery.of(busy.state.decision, busy.state.runs_ahead)


@dataclass(frozen=True)
class _EarlierAttempt:
    """What the calling run's earlier attempt (before a crash or takeover) recorded of
    this very send: its run, its busy decision; neither from outside a turn, whose send
    is always a new one."""

    run_id: UUID
    run: RunState | None = None
    decided: BusyDecision.BusyDecided | None = None

    def delivery(self) -> SendDelivery:
        """The delivery of the send it made: its busy decision's (none recorded: the
        session was idle)."""
        if self.decided is None:
            return SendDelivery.of(None, None)
        return _delivery_of(self.decided)

    def settled(self) -> BusyDecision.BusyDecided | None:
        """Its decision when it started no run (rejected or steered)."""
        decided = self.decided
        return decided if decided is not None and decided.decision in SETTLED else None


async def _earlier_attempt(context: ToolContext, run_id: UUID) -> _EarlierAttempt:
    """From a turn: the send's run and busy decision if an earlier attempt recorded
    them, in one trip to the store (a send's id is the same in every attempt)."""
    if context.caller_turn is None:
        return _EarlierAttempt(run_id)
    return await context.store.read(_earlier_records, run_id)


def _earlier_records(store: Store, run_id: UUID) -> _EarlierAttempt:
    """On a reader thread: the run ``run_id`` and the busy decision of its send."""
    stored = store.work(run_id)
    run = stored.to_aggregate(Run, RunState).state if stored is not None else None
    events = store.stream(busy_decision_id(run_id))
    decided = next((e for e in events if isinstance(e, BusyDecision.BusyDecided)), None)
    return _EarlierAttempt(run_id, run, decided)


def _requester_and_target(
    store: Store, requester_key: str, target_key: str
) -> tuple[StoredSession | None, list[RunState]]:
    """On a reader thread, in one trip: the requester's session (its channel goes into
    the message's context) and the target's runs in flight (the busy decision's)."""
    return store.session(requester_key), _runs_in_flight(store, target_key)


def _delivery_of(event: BusyDecision.BusyDecided) -> SendDelivery:
    return SendDelivery.of(event.decision, event.runs_ahead, event.steered_run_id)


def _shown(delivery: SendDelivery) -> SendDeliveryShown:
    return SendDeliveryShown.model_validate(delivery.to_json())


def _runs_in_flight(store: Store, session_key: str) -> list[RunState]:
    """The session's runs not ended yet (queued or running), oldest first."""
    pending = store.pending_work("run", PENDING, session_key=session_key)
    return [work.to_aggregate(Run, RunState).state for work in pending]


async def _busy_decision(
    context: ToolContext,
    target: SessionState,
    runs: list[RunState],
    run_id: UUID,
    chain: Causality,
) -> BusyDecision | None:
    """What the busy policy decides for a send into ``target`` whose ``runs`` are in
    flight (None when none is: nothing to decide). Read from the store, so a run another
    gateway on the same database is running counts too. ``interrupt`` cancels the runs
    in flight here, before the send's own run is queued."""
    if not runs:
        return None
    # The run in flight is the one running; else the next to run.
    in_flight = next((run for run in runs if run.status == "running"), runs[0])
    choice = context.config.busy_policy.decide(target.policy_target(context.rules))
    decision: BusyOutcome | None = None
    cancelled: tuple[str, ...] = ()
    steered: str | None = None
    if choice.action in ("interrupt", "steer"):
        # Never the sender's own run nor a run it descends from: cancelling those would
        # cancel the very call being made (a cancel takes the runs it caused with it), and
        # a send joining one would wait for its own caller's reply.
        own = await _sender_lineage(context)
        others = [run for run in runs if run.run_id not in own]
        if not others:
            decision = "enqueued"
        elif choice.action == "interrupt":
            cancelled = await _interrupt(context, others, target.key)
        else:
            # The run working now, else the next to run (it reads the message as it starts).
            steered = next((run for run in others if run.status == "running"), others[0]).run_id
    # The send's place: every run of the session in flight ahead of it but those cancelled.
    ahead = sum(1 for run in runs if run.run_id not in cancelled)
    return BusyDecision.record(
        send_run_id=run_id,
        session_key=target.key,
        requester_key=context.requester.key,
        choice=choice,
        decision=decision,
        in_flight_run_id=in_flight.run_id,
        cancelled_run_ids=cancelled,
        chain=chain,
        at=context.clock.now(),
        runs_ahead=ahead,
        steered_run_id=steered,
    )


async def _steer(
    context: ToolContext, busy: BusyDecision, message: str, run_id: UUID, chain: Causality
) -> SendDelivery | None:
    """Inject the message into the run the decision chose, saving the decision with the
    run's RunSteered (one transaction: the answer ``steered`` is what was recorded); None
    when that run has ended meanwhile (nothing recorded)."""
    decided = busy.state
    joined = decided.steered_run_id
    assert joined is not None

    def decision() -> BusyDecision:
        # Made again for each attempt: a save that conflicted took the events with it.
        return _decided_again(context, decided, run_id, chain, decision="steered")

    if await steer_run(context, UUID(joined), message, chain=chain, recorded_with=decision) is None:
        return None
    log.info("send steered into a busy session's run", session_key=decided.session_key, run=joined)
    return SendDelivery.of("steered", decided.runs_ahead, joined)


async def _steer_fell_back(
    context: ToolContext,
    target: SessionState,
    run_id: UUID,
    chain: Causality,
    busy: BusyDecision,
) -> BusyDecision:
    """The decision for a steer that found its run ended: the send is queued behind
    whatever is still in flight (none: it is the next the session runs)."""
    ahead = len(await context.store.read(_runs_in_flight, target.key))
    return _decided_again(context, busy.state, run_id, chain, decision="enqueued", ahead=ahead)


def _decided_again(
    context: ToolContext,
    decided: BusyDecisionState,
    run_id: UUID,
    chain: Causality,
    *,
    decision: BusyOutcome,
    ahead: int | None = None,
) -> BusyDecision:
    return BusyDecision.record(
        send_run_id=run_id,
        session_key=decided.session_key,
        requester_key=decided.requester_key,
        choice=BusyChoice(decided.policy, decided.rule),
        decision=decision,
        in_flight_run_id=decided.in_flight_run_id,
        chain=chain,
        at=context.clock.now(),
        runs_ahead=decided.runs_ahead if ahead is None else ahead,
        steered_run_id=decided.steered_run_id if decision == "steered" else None,
    )


async def _sender_lineage(context: ToolContext) -> set[str]:
    """The calling run and every run it descends from (by ``parentRunId``)."""
    services = context.services
    assert services is not None
    lineage: set[str] = set()
    caller = context.caller_run
    run_id = caller.run_id if caller is not None else None
    while run_id is not None and run_id not in lineage:
        lineage.add(run_id)
        parent = await services.runs.load(UUID(run_id))
        run_id = parent.state.parent_run_id if parent is not None else None
    return lineage


async def _interrupt(
    context: ToolContext, runs: list[RunState], session_key: str
) -> tuple[str, ...]:
    """Cancel ``runs`` (and what they caused), in order; the ids actually cancelled."""
    services = context.services
    assert services is not None
    reason = f"interrupted by a send from {context.requester.key} (busy policy: interrupt)"
    cancelled: list[str] = []
    for run in runs:
        outcome = await services.cancellation.cancel(UUID(run.run_id), reason)
        if outcome is not None and outcome.cancelled:
            cancelled.extend([run.run_id, *outcome.cascaded])
    log.info("busy session interrupted", session_key=session_key, cancelled=cancelled)
    return tuple(cancelled)


def busy_refusal(display: str, in_flight_run_id: str, rule: str) -> str:
    return (
        f"session {display} is busy (run {in_flight_run_id} in flight) and refuses "
        f"sends while it is ({rule}: reject); try again once that run has ended"
    )


def _rejected(
    run_id: UUID, display: str, in_flight_run_id: str, rule: str, runs_ahead: int | None
) -> SendResult:
    return SendResult(
        runId=str(run_id),
        status="error",
        tool="sessions_send",
        error=busy_refusal(display, in_flight_run_id, rule),
        sessionKey=display,
        delivery=_shown(SendDelivery.of("rejected", runs_ahead)),
    )


async def _record_rejection(context: ToolContext, busy: BusyDecision) -> None:
    try:
        await context.store.save(busy)
    except StoreConflict:
        pass  # the same send, repeated by its run's next attempt: recorded already
    except StoreInUse:
        # A reader beside the SQLite file's live writer may not write (decision 20).
        log.warning("busy decision not recorded: another gateway holds the store")


async def _answer(
    context: ToolContext,
    params: SessionsSendParams,
    run_id: UUID,
    display: str,
    sent: SendDelivery,
) -> SendResult:
    """What the send answers: accepted at once, or the run's outcome within the wait;
    each says what became of the message when it was sent (``sent``, decision 29). A
    steered send started no run: it answers for the run it joined (its ``runId``, its
    wait, its reply), which may have answered before it read the message."""
    services = context.services
    assert services is not None
    delivery = _shown(sent)
    if sent.run_id is not None:
        run_id = UUID(sent.run_id)
    if params.timeoutSeconds == 0:
        return SendResult(
            runId=str(run_id), status="accepted", sessionKey=display, delivery=delivery
        )
    state = await services.runs.wait(run_id, timeout=params.timeoutSeconds, until_input=True)
    if state is not None and state.status == "input_required" and state.input_request:
        # The target's turn asks a person (decision 33): said at once; the run's outcome
        # comes with the answer (gw.run, sessions_history).
        asked = state.input_request
        return SendResult(
            runId=str(run_id),
            status="input_required",
            prompt=asked.prompt,
            options=asked.options,
            sessionKey=display,
            delivery=delivery,
        )
    if state is None:
        after = (
            "the run the message joined goes on, and its reply is recorded when it "
            "finishes (read it with sessions_history)"
            if sent.status == "steered"
            else "the run goes on, and its reply, the agent-to-agent loop and the announce "
            "are recorded when it finishes (read them with sessions_history)"
        )
        return SendResult(
            runId=str(run_id),
            status="timeout",
            error=f"no reply within {params.timeoutSeconds}s; {after}",
            sessionKey=display,
            delivery=delivery,
        )
    if state.status == "cancelled":
        # Stopped on request (gw.cancel_run): the exchange carries on as after a failure.
        return SendResult(
            runId=str(run_id),
            status="cancelled",
            tool="sessions_send",
            error=state.error or "run cancelled",
            sessionKey=display,
        )
    if state.status != "ok":
        return SendResult(
            runId=str(run_id),
            status="error",
            tool="sessions_send",
            error=state.error or "agent error",
            sessionKey=display,
        )
    reply: Any = reply_text(state.reply)
    if is_silent(reply):
        # Decision 37: a turn that said nothing (or only a skip token) is OpenClaw's
        # terminal no_reply, not an ok with an empty reply.
        return SendResult(
            runId=str(run_id), status="no_reply", sessionKey=display, delivery=delivery
        )
    return SendResult(
        runId=str(run_id),
        status="ok",
        reply=reply,
        sessionKey=display,
        delivery=delivery,
    )
