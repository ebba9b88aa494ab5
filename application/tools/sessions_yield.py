"""``sessions_yield``: end the turn; the session is woken by a new turn when its
sub-agents have reported (all, or any), or at the deadline (decision 26, ADR 0031)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal, cast
from uuid import UUID

from sessionwire.application.context import ToolContext, ToolServices
from sessionwire.application.orchestration.yields import last_wake, spawns_of
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.tools.run_params import SessionsYieldParams
from sessionwire.application.tools.run_results import YieldChildRow, YieldResult
from sessionwire.domain.run import RunState
from sessionwire.domain.run_yield import RunYield, RunYieldState, YieldChild, yield_id_for
from sessionwire.domain.session import to_millis

TOOL = "sessions_yield"
# The turns that may yield: a session's own work. A reply-back or announce step answers
# another run's exchange or spawn, whose driver would never follow a wake.
YIELDING_STEPS = frozenset({"primary", "subagent_task", "yield_wake", "scheduled"})
NO_CHILDREN = (
    "sessions_yield: no sub-agent of this session is in flight to wait for "
    "(spawn one with sessions_spawn first)"
)


def _answer(state: RunYieldState) -> YieldResult:
    return YieldResult(
        status="yielded",
        yieldId=state.yield_id,
        waitFor=state.wait_for,
        dueAt=state.due_at,
        children=[
            YieldChildRow(childSessionKey=child.child_key, runId=child.run_id, label=child.label)
            for child in state.children
        ],
    )


def _error(message: str) -> YieldResult:
    return YieldResult(status="error", tool=TOOL, error=message)


async def sessions_yield(context: ToolContext, params: SessionsYieldParams) -> YieldResult:
    """The yield's steps: may this turn yield, did it already, does the session wait
    already, which children it waits for, then the record, saved within the trace's
    budget. The order of every store read and id drawn is the one before these steps."""
    services = context.services
    assert services is not None, "sessions_yield needs the gateway's yield driver"
    caller = context.caller_run
    if caller is not None and caller.step not in YIELDING_STEPS:
        return _error(
            f"sessions_yield: a {caller.step} step cannot yield (only a session's own "
            "turn: primary, subagent_task, scheduled or a woken yield_wake turn)"
        )
    yield_id = yield_id_for(caller.run_id) if caller is not None else services.ids.new_id()
    earlier = await _earlier_yield(services, caller, yield_id)
    if earlier is not None:
        # This turn yielded already (or its attempt before a crash did): one yield.
        return _answer(earlier)
    refusal = await _already_waiting(context)
    if refusal is not None:
        return refusal
    children = await _children_to_wait_for(context.store, context.requester.key)
    if not children:
        return _error(NO_CHILDREN)
    yielded = _yield_record(context, params, yield_id, children)
    return await _save_within_budget(context, yielded, yield_id)


async def _earlier_yield(
    services: ToolServices, caller: RunState | None, yield_id: UUID
) -> RunYieldState | None:
    """The yield this very turn recorded already (a call from outside has no turn)."""
    if caller is None:
        return None
    earlier = await services.yields.load(yield_id)
    return earlier.state if earlier is not None else None


async def _already_waiting(context: ToolContext) -> YieldResult | None:
    """The refusal when the session waits on a yield already (one wait at a time)."""
    waiting = await context.store.pending_work(
        "yield", ("waiting",), session_key=context.requester.key
    )
    if not waiting:
        return None
    return _error(
        f"sessions_yield: this session already waits (yield {waiting[0].id}); "
        "it is woken by a new turn when that wait ends"
    )


async def _children_to_wait_for(store: AsyncStore, session_key: str) -> list[YieldChild]:
    """The children in flight, and those the session's last wake listed as still running
    that have reported since: their reports go to this wake (each report reaches one
    wake, once). Empty when none is in flight (nothing to wait for)."""
    spawns = await spawns_of(store, session_key)
    in_flight = [state for state in spawns if not state.reported]
    if not in_flight:
        return []
    chosen = {state.spawn_id: state for state in in_flight}
    previous = await last_wake(store, session_key)
    carried = {pending.spawn_id for pending in previous.still_running} if previous else set()
    for state in spawns:
        if state.spawn_id in carried:
            chosen.setdefault(state.spawn_id, state)
    return [
        YieldChild(
            spawn_id=state.spawn_id,
            child_key=state.child_key,
            run_id=state.run_id,
            label=state.label,
        )
        for state in sorted(chosen.values(), key=lambda s: (s.started_at or 0, s.child_key))
    ]


def _due_at(context: ToolContext, params: SessionsYieldParams, now: datetime) -> int | None:
    """When the wait ends at the latest: the call's timeout, else the calling run's own
    deadline (None: it has none), else from outside a run the runs' timeout."""
    caller = context.caller_run
    if params.timeoutSeconds is not None:
        return to_millis(now) + params.timeoutSeconds * 1000
    if caller is not None:
        return caller.deadline_at
    assert context.services is not None
    seconds = context.services.run_timeout_seconds
    return to_millis(now) + round(seconds * 1000) if math.isfinite(seconds) else None


def _yield_record(
    context: ToolContext, params: SessionsYieldParams, yield_id: UUID, children: list[YieldChild]
) -> RunYield:
    requester = context.requester
    caller = context.caller_run
    now = context.clock.now()
    return RunYield.record(
        yield_id=yield_id,
        session_key=requester.key,
        agent_id=requester.agent_id,
        run_id=caller.run_id if caller is not None else None,
        wait_for=cast(Literal["all", "any"], params.waitFor),
        due_at=_due_at(context, params, now),
        message=params.message,
        children=children,
        causality=caller.causality if caller is not None else None,
        at=now,
    )


async def _save_within_budget(
    context: ToolContext, yielded: RunYield, yield_id: UUID
) -> YieldResult:
    """Save the yield unless the trace's budget (decision 31) is spent: the woken turn is
    one more run of the trace."""
    services = context.services
    assert services is not None
    chain = context.caller_run.causality if context.caller_run is not None else None
    async with services.budgets.admit(chain.trace_id if chain else None) as exceeded:
        if exceeded is None:
            return await _save(context, yielded, yield_id)
    assert chain is not None
    await context.refuse_over_budget(exceeded, chain, tool=TOOL, reference=context.requester.raw)
    return YieldResult(status="forbidden", tool=TOOL, error=exceeded.message)


async def _save(context: ToolContext, yielded: RunYield, yield_id: UUID) -> YieldResult:
    services = context.services
    assert services is not None
    try:
        await context.store.save(yielded)
    except StoreConflict:
        # The same turn's other call recorded it first: answer with that one.
        found = await services.yields.load(yield_id)
        if found is None:
            raise
        return _answer(found.state)
    services.yields.start(yielded.id)
    return _answer(yielded.state)
