"""``subagents``: the caller's own spawn tree — list its runs, cancel one (with what it
caused, as ``gw.cancel_run``), or steer one (a message its agent reads at its next step).

Scoped to the caller's tree (application/tools/spawn_tree.py): another session's
children are never found, so naming one gets the same answer as naming nothing.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.library_logging import library_logger
from sessionwire.application.tools.results import ToolError
from sessionwire.application.tools.run_params import SubagentsParams
from sessionwire.application.tools.run_results import SubagentsResult
from sessionwire.application.tools.spawn_tree import SpawnTree, read_tree
from sessionwire.application.tools.steering import steer_run

log = library_logger("sessionwire.tools")

TOOL = "subagents"
MINUTE_MS = 60_000


def not_in_tree(target: str) -> str:
    """What a target outside the caller's tree gets, whether or not it exists."""
    return f"no sub-agent run or session {target!r} in this session's spawn tree"


async def subagents(context: ToolContext, params: SubagentsParams) -> SubagentsResult | ToolError:
    requester = context.requester
    tree = await context.store.read(read_tree, requester.key)
    if params.action == "list":
        return _list(context, tree, params.recentMinutes)
    assert params.target is not None
    if params.action == "cancel":
        return await _cancel(context, tree, params.target, params.reason)
    assert params.message is not None
    return await _steer(context, tree, params.target, params.message)


def _list(context: ToolContext, tree: SpawnTree, recent_minutes: int) -> SubagentsResult:
    now = int(context.clock.now().timestamp() * 1000)
    since = now - recent_minutes * MINUTE_MS
    spawned = tree.spawn_runs()
    active = [entry.row() for entry in spawned if not entry.run.ended]
    recent = [
        entry.row()
        for entry in spawned
        if entry.run.ended and (entry.run.ended_at or entry.run.created_at) >= since
    ]
    return SubagentsResult(
        action="list",
        requesterSessionKey=context.display_key(context.requester.key),
        total=len(spawned),
        active=active,
        recent=recent,
    )


async def _cancel(
    context: ToolContext, tree: SpawnTree, target: str, reason: str | None
) -> SubagentsResult | ToolError:
    services = context.services
    assert services is not None, "subagents cancels through the gateway's cancellation"
    if target.lower() == "all":
        chosen = [entry for entry in tree.spawn_runs() if not entry.run.ended]
    else:
        chosen = tree.find(target)
        if not chosen:
            return ToolError(tool=TOOL, error=not_in_tree(target))
    why = reason or f"cancelled by {context.requester.key} (subagents)"
    answers: list[dict[str, Any]] = []
    for entry in chosen:
        outcome = await services.cancellation.cancel(UUID(entry.run.run_id), why)
        answer: dict[str, Any] = {
            "runId": entry.run.run_id,
            "sessionKey": entry.session.state.key,
            "cancelled": bool(outcome and outcome.cancelled),
        }
        if outcome is not None and outcome.cancelled:
            answer["cascaded"] = outcome.cascaded
        else:
            status = outcome.state.status if outcome is not None else entry.run.status
            answer["reason"] = f"the run had already ended ({status})"
        answers.append(answer)
    log.info("subagents cancel", target=target[:80], runs=len(answers))
    return SubagentsResult(action="cancel", target=target, runs=answers)


async def _steer(
    context: ToolContext, tree: SpawnTree, target: str, message: str
) -> SubagentsResult | ToolError:
    if target.lower() == "all":
        return ToolError(tool=TOOL, error="steer takes one target, not all")
    chosen = tree.find(target)
    if not chosen:
        return ToolError(tool=TOOL, error=not_in_tree(target))
    entry = chosen[0]
    reference = target[:200]
    # A steer is a hop on the sender's chain, and the sender's trace admits it (ADR 0034).
    hop_refusal = context.hop_refusal()
    if hop_refusal is not None:
        await context.record_refusal(
            hop_refusal, tool=TOOL, reference=reference, target_key=entry.run.session_key
        )
        return ToolError(status="forbidden", tool=TOOL, error=hop_refusal.message)
    services = context.services
    assert services is not None, "a steer is admitted by the gateway's budgets"
    chain = context.next_hop(entry.run.run_id)
    # From outside any run the steer starts no trace of its own: nothing to count it in.
    sender_trace = chain.trace_id if context.caller_run is not None else None
    async with services.budgets.admit(sender_trace, steering=True) as exceeded:
        if exceeded is None:
            state = await steer_run(context, UUID(entry.run.run_id), message, chain=chain)
    if exceeded is not None:
        await context.refuse_over_budget(exceeded, chain, tool=TOOL, reference=reference)
        return ToolError(status="forbidden", tool=TOOL, error=exceeded.message)
    if state is None:
        found = await context.store.run(entry.run.run_id)
        status = found.status if found is not None else entry.run.status
        return ToolError(
            tool=TOOL,
            error=(
                f"run {entry.run.run_id} has already ended ({status}): a steer reaches "
                "only a queued or running run"
            ),
        )
    log.info("subagents steer", run_id=state.run_id, session_key=state.session_key)
    return SubagentsResult(
        action="steer",
        target=target,
        runId=state.run_id,
        sessionKey=state.session_key,
        steers=state.steers,
    )
