"""``sessions_spawn``: a sub-agent in a new child session that reports back when done."""

from __future__ import annotations

from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.orchestration.spawns import spawn_depth
from sessionwire.application.orchestration.yields import MAX_CHILDREN_READ, spawns_of
from sessionwire.application.ports.session_read_model import SessionQuery
from sessionwire.application.tools.params import SessionsSpawnParams
from sessionwire.application.tools.results import (
    HopLimitRefused,
    SpawnResult,
    TraceBudgetRefused,
)
from sessionwire.domain.agent_to_agent import report_route
from sessionwire.domain.causality import Causality
from sessionwire.domain.keys import normalize_agent_id
from sessionwire.domain.policy import subagent_tool_refusal
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session
from sessionwire.domain.spawn import Spawn
from sessionwire.domain.subagents import subagent_system_prompt

NOT_FROM_SUBAGENTS = subagent_tool_refusal("sessions_spawn").message


def allowed_targets(context: ToolContext) -> tuple[bool, set[str]]:
    """(any agent allowed, the allowed agent ids) for the requester's agent."""
    entry = context.config.agent(context.requester.agent_id)
    allow = entry.subagents.allowAgents if entry else []
    allow_any = any(item.strip() == "*" for item in allow)
    return allow_any, {normalize_agent_id(item) for item in allow if item.strip() not in {"", "*"}}


async def sessions_spawn(
    context: ToolContext, params: SessionsSpawnParams
) -> SpawnResult | HopLimitRefused | TraceBudgetRefused:
    services = context.services
    assert services is not None, "sessions_spawn needs the gateway's spawn driver"
    requester = context.requester
    limits = context.config.agents.defaults.subagents
    depth = await spawn_depth(context.store, requester.key)
    if depth >= limits.maxSpawnDepth:
        # A leaf: with the default (no nesting) a sub-agent's session tools are refused
        # before this; here for a caller past the configured depth (decision 30).
        error = (
            NOT_FROM_SUBAGENTS
            if limits.maxSpawnDepth == 1
            else f"sessions_spawn is not allowed at this depth (depth {depth}: "
            f"agents.defaults.subagents.maxSpawnDepth is {limits.maxSpawnDepth})"
        )
        return SpawnResult(status="forbidden", tool="sessions_spawn", error=error)
    hop_refusal = context.hop_refusal()
    if hop_refusal is not None:
        await context.record_refusal(
            hop_refusal, tool="sessions_spawn", reference=params.task[:80], target_key=None
        )
        return HopLimitRefused(error=hop_refusal.message)
    run_id = context.new_run_id("sessions_spawn", params)
    earlier = await services.runs.load(run_id) if context.caller_turn is not None else None
    if earlier is not None:
        # The calling run's earlier attempt (before a crash) spawned this very child: it
        # goes on as it was (a reopen resumes it); answer for it, never spawn it twice.
        return SpawnResult(
            status="accepted", runId=str(run_id), childSessionKey=earlier.state.session_key
        )
    active = await _active_children(context, limits.maxChildrenPerAgent)
    if active >= limits.maxChildrenPerAgent:
        return SpawnResult(
            status="forbidden",
            tool="sessions_spawn",
            error=(
                f"sessions_spawn has reached max active children for this session "
                f"({active}/{limits.maxChildrenPerAgent}: "
                "agents.defaults.subagents.maxChildrenPerAgent)"
            ),
        )
    chain = context.next_hop(str(run_id))
    # The trace's budget (decision 31): its runs, its spawns, its tokens and cost.
    async with services.budgets.admit(chain.trace_id, spawning=True) as exceeded:
        result = None if exceeded else await _spawn(context, params, run_id, chain, depth)
    if exceeded is not None:
        await context.refuse_over_budget(
            exceeded, chain, tool="sessions_spawn", reference=params.task[:80]
        )
        return TraceBudgetRefused(error=exceeded.message)
    assert result is not None
    return result


async def _spawn(
    context: ToolContext,
    params: SessionsSpawnParams,
    run_id: UUID,
    chain: Causality,
    depth: int,
) -> SpawnResult:
    services = context.services
    assert services is not None
    requester = context.requester
    ids = services.ids
    target_agent = normalize_agent_id(params.agentId) if params.agentId else requester.agent_id
    if target_agent != requester.agent_id:
        allow_any, allowed = allowed_targets(context)
        if not allow_any and target_agent not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            return SpawnResult(
                status="forbidden",
                tool="sessions_spawn",
                error=f"agentId is not allowed for sessions_spawn (allowed: {listed})",
            )
    config = context.config
    if params.model is not None and params.model not in config.known_models():
        known = ", ".join(sorted(config.known_models())) or "none configured"
        return SpawnResult(
            status="error",
            tool="sessions_spawn",
            error=f"invalid model: {params.model} (configured models: {known})",
        )
    model = params.model or config.subagent_model(target_agent)
    if params.label is not None and await _label_taken(context, params.label):
        return SpawnResult(
            status="error", tool="sessions_spawn", error=f"label already in use: {params.label}"
        )

    child_key = f"agent:{target_agent}:subagent:{ids.new_id()}"
    now = context.clock.now()
    requester_session = await context.store.session(requester.key)
    requester_row = requester_session.state if requester_session else None
    requester_channel = requester_row.last_channel if requester_row else None
    child = Session.open(
        key=child_key,
        session_id=ids.new_id(),
        agent_id=target_agent,
        at=now,
        spawned_by=requester.key,
        # Who spawned the spawner, and so on up: the child is in each one's tree.
        lineage=requester_row.spawn_ancestors() if requester_row else (),
    )
    patch = {
        name: value
        for name, value in (
            ("label", params.label),
            ("model", model),
            ("thinkingLevel", params.thinking),
        )
        if value is not None
    }
    if patch:
        child.patch(patch, at=now)
    # The child run is a send into the child session: a rule may deny it (by key prefix).
    refusal = context.access.send_refusal(child.state.policy_target(context.rules))
    if refusal:
        await context.record_refusal(
            refusal, tool="sessions_spawn", reference=child_key, target_key=child_key
        )
        return SpawnResult(status=refusal.status, tool="sessions_spawn", error=refusal.message)
    run_timeout = params.run_timeout
    run = Run.start(
        run_id=run_id,
        session_key=child_key,
        agent_id=target_agent,
        step="subagent_task",
        message=params.task,
        context=subagent_system_prompt(
            task=params.task,
            label=params.label,
            requester_key=requester.key,
            requester_channel=requester_channel,
            child_key=child_key,
        ),
        timeout_seconds=run_timeout or services.run_timeout_seconds,
        requester_key=requester.key,
        at=now,
        causality=chain,
        sender_key=requester.key,
    )
    spawn = Spawn.spawn(
        run_id=run_id,
        child_key=child_key,
        agent_id=target_agent,
        requester_key=requester.key,
        requester_display=requester.raw,
        task=params.task,
        label=params.label,
        model=model,
        run_timeout_seconds=run_timeout,
        cleanup="delete" if params.cleanup == "delete" else "keep",
        archive_after_minutes=config.archive_after_minutes,
        at=now,
        causality=chain,
        depth=depth + 1,
        # Where the report goes is decided now, from where the requester asked (decision 14).
        report_route=report_route(
            requester.key,
            channel=requester_row.last_channel if requester_row else None,
            to=requester_row.last_to if requester_row else None,
            account_id=requester_row.last_account_id if requester_row else None,
        ),
    )
    await services.runs.save_and_enqueue(
        run, child, spawn, then=lambda: services.spawns.start(spawn.id)
    )
    return SpawnResult(
        status="accepted",
        runId=str(run_id),
        childSessionKey=child_key,
        modelApplied=True if model is not None else None,
    )


async def _label_taken(context: ToolContext, label: str) -> bool:
    """Is ``label`` held by a session the requester may see? A label held by a hidden
    session (another agent's, with agent-to-agent off) does not count: refusing would
    tell the requester that the hidden session exists (issue 16, finding 4)."""
    policy = context.access
    return any(
        policy.sees(stored.state.policy_target(context.rules))
        for stored in await context.store.sessions_by_label(label)
    )


async def _active_children(context: ToolContext, limit: int) -> int:
    """How many of the requester's children are still running their task (at least
    ``limit`` means the cap is reached). Only when it has that many child sessions at
    all are their spawns read: the common case is one query."""
    store = context.store
    children = await store.list_sessions(
        SessionQuery(limit=MAX_CHILDREN_READ, spawned_by=context.requester.key)
    )
    if len(children) < limit:
        return len(children)
    return sum(
        1 for state in await spawns_of(store, context.requester.key) if state.status == "running"
    )
