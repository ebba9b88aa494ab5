"""``sessions_yield``: end the turn; the session is woken by a new turn when its
sub-agents have reported (all, or any), or at the deadline (decision 26, ADR 0031)."""

from __future__ import annotations

import math
from typing import Literal, cast
from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.orchestration.yields import last_wake, spawns_of
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.tools.params import SessionsYieldParams
from sessionwire.application.tools.run_results import YieldChildRow, YieldResult
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
    services = context.services
    assert services is not None, "sessions_yield needs the gateway's yield driver"
    store = context.store
    requester = context.requester
    caller = context.caller_run
    if caller is not None and caller.step not in YIELDING_STEPS:
        return _error(
            f"sessions_yield: a {caller.step} step cannot yield (only a session's own "
            "turn: primary, subagent_task, scheduled or a woken yield_wake turn)"
        )
    yield_id = yield_id_for(caller.run_id) if caller is not None else services.ids.new_id()
    if caller is not None:
        earlier = await services.yields.load(yield_id)
        if earlier is not None:
            # This turn yielded already (or its attempt before a crash did): one yield.
            return _answer(earlier.state)
    waiting = await store.pending_work("yield", ("waiting",), session_key=requester.key)
    if waiting:
        return _error(
            f"sessions_yield: this session already waits (yield {waiting[0].id}); "
            "it is woken by a new turn when that wait ends"
        )
    spawns = await spawns_of(store, requester.key)
    in_flight = [state for state in spawns if not state.reported]
    if not in_flight:
        return _error(NO_CHILDREN)
    # Children the session's last wake listed as still running that have reported
    # since: their reports go to this wake (each report reaches one wake, once).
    chosen = {state.spawn_id: state for state in in_flight}
    previous = await last_wake(store, requester.key)
    if previous is not None:
        carried = {pending.spawn_id for pending in previous.still_running}
        for state in spawns:
            if state.spawn_id in carried:
                chosen.setdefault(state.spawn_id, state)
    children = [
        YieldChild(
            spawn_id=state.spawn_id,
            child_key=state.child_key,
            run_id=state.run_id,
            label=state.label,
        )
        for state in sorted(chosen.values(), key=lambda s: (s.started_at or 0, s.child_key))
    ]
    now = context.clock.now()
    if params.timeoutSeconds is not None:
        due_at: int | None = to_millis(now) + params.timeoutSeconds * 1000
    elif caller is not None:
        due_at = caller.deadline_at  # the run's own deadline (None: it has none)
    else:
        seconds = services.run_timeout_seconds
        due_at = to_millis(now) + round(seconds * 1000) if math.isfinite(seconds) else None
    yielded = RunYield.record(
        yield_id=yield_id,
        session_key=requester.key,
        agent_id=requester.agent_id,
        run_id=caller.run_id if caller is not None else None,
        wait_for=cast(Literal["all", "any"], params.waitFor),
        due_at=due_at,
        message=params.message,
        children=children,
        causality=caller.causality if caller is not None else None,
        at=now,
    )
    chain = caller.causality if caller is not None else None
    # The trace's budget (decision 31): the woken turn is one more run of the trace.
    async with services.budgets.admit(chain.trace_id if chain else None) as exceeded:
        if exceeded is None:
            saved = await _save(context, yielded, yield_id)
    if exceeded is not None:
        assert chain is not None
        await context.refuse_over_budget(
            exceeded, chain, tool="sessions_yield", reference=requester.raw
        )
        return YieldResult(status="forbidden", tool="sessions_yield", error=exceeded.message)
    return saved


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
