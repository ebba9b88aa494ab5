"""``session_status``: the calling session's own card — its run in flight, its spawn
tree's runs, what its runs spent, and (when a budget is set) its trace's budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import ToolContext
from sessionwire.application.orchestration.trace_budgets import run_spending
from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.session_read_model import StoredSession
from sessionwire.application.ports.store import Store
from sessionwire.application.tools.params import ToolInputError
from sessionwire.application.tools.results import ToolError
from sessionwire.application.tools.run_params import SessionStatusParams
from sessionwire.application.tools.run_results import SessionStatusResult
from sessionwire.application.tools.spawn_tree import SpawnTree, read_tree
from sessionwire.domain.keys import InvalidSessionKey

TOOL = "session_status"
# Runs read per query while the session's spending is summed.
USAGE_PAGE = 1000
CURRENT = "current"


@dataclass(frozen=True)
class _Read:
    session: StoredSession | None
    runs: list[StoredRun]
    tree: SpawnTree
    usage: dict[str, Any]


async def session_status(
    context: ToolContext, params: SessionStatusParams
) -> SessionStatusResult | ToolError:
    """The card's steps: the session asked is the caller's own, one read of what the card
    shows, the run in flight, the trace's budget (when one is set)."""
    requester = context.requester
    _refuse_another_session(context, params.sessionKey)
    read = await context.store.read(_read, requester.key, context.config)
    display = context.display_key(requester.key)
    if read.session is None:
        return ToolError(tool=TOOL, error=f"Session not found: {display}")
    state = read.session.state
    in_flight = [run for run in read.runs if not run.ended]
    current = _current_run(in_flight)
    budget = await _budget(context, _trace_of(context, current))
    return SessionStatusResult(
        sessionKey=display,
        key=state.key,
        sessionId=state.session_id,
        agentId=state.agent_id,
        label=state.label,
        model=state.model,
        updatedAt=state.updated_at,
        currentRun=_current(current) if current is not None else None,
        queuedRuns=sum(1 for run in in_flight if run.status == "queued"),
        children=[entry.row() for entry in read.tree.spawn_runs()],
        usage=read.usage,
        budget=budget,
    )


def _refuse_another_session(context: ToolContext, session_key: str | None) -> None:
    """``sessionKey`` may only name the calling session (or be ``current``)."""
    if session_key is None or session_key.lower() == CURRENT:
        return
    try:
        named = context.rules.canonical(session_key)
    except InvalidSessionKey as error:
        raise ToolInputError(f"invalid sessionKey: {error}") from None
    if named != context.requester.key:
        raise ToolInputError(
            'session_status reports the calling session only (omit sessionKey, or pass "current")'
        )


def _current_run(in_flight: list[StoredRun]) -> StoredRun | None:
    """The run in flight: the one running, else the next queued (None: idle)."""
    running = [run for run in in_flight if run.status == "running"]
    if running:
        return running[0]
    return in_flight[0] if in_flight else None


def _trace_of(context: ToolContext, current: StoredRun | None) -> str | None:
    """The trace the card's budget is of: the calling run's, else the run in flight's."""
    if context.caller_run is not None:
        return context.caller_run.trace_id
    return current.trace_id if current is not None else None


async def _budget(context: ToolContext, trace_id: str | None) -> dict[str, Any] | None:
    """The trace's budget and what it spent; None without a budget or a trace."""
    budgets = context.services.budgets if context.services is not None else None
    if budgets is None or not budgets.configured or trace_id is None:
        return None
    # Steers are counted (one read per run) only when a limit bounds them.
    usage = await budgets.usage(trace_id, steers=budgets.budget.max_steers is not None)
    return {"traceId": trace_id, **budgets.budget.describe(usage)}


def _current(run: StoredRun) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "status": run.status,
        "step": run.step,
        "startedAt": run.started_at,
        "traceId": run.trace_id,
    }


def _read(store: Store, key: str, config: GatewayConfig) -> _Read:
    """On a reader thread: the session, its runs (oldest first), its tree, its spending."""
    runs: list[StoredRun] = []
    before: tuple[int, str] | None = None
    while True:
        page = store.list_runs(RunQuery(limit=USAGE_PAGE, session_key=key, before=before))
        runs.extend(page)
        if len(page) < USAGE_PAGE:
            break
        before = (page[-1].created_at, page[-1].run_id)
    runs.reverse()
    totals = {"runs": len(runs), "input": 0, "output": 0, "totalTokens": 0, "cost": 0.0}
    for run in runs:
        tokens, cost = run_spending(run.usage, run.model, config)
        usage = run.usage or {}
        totals["input"] += _count(usage.get("input"))
        totals["output"] += _count(usage.get("output"))
        totals["totalTokens"] += tokens
        totals["cost"] += cost
    totals["cost"] = round(totals["cost"], 6)
    return _Read(session=store.session(key), runs=runs, tree=read_tree(store, key), usage=totals)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
