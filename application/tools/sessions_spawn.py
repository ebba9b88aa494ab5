"""``sessions_spawn``: a sub-agent in a new child session that reports back when done."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.forks import fork_point
from sessionwire.application.orchestration.spawn_depth import spawn_depth
from sessionwire.application.tools.run_params import SessionsSpawnParams
from sessionwire.application.tools.run_results import (
    HopLimitRefused,
    SpawnResult,
    TraceBudgetRefused,
)
from sessionwire.domain.agent_to_agent import report_route
from sessionwire.domain.causality import Causality
from sessionwire.domain.keys import normalize_agent_id
from sessionwire.domain.policy import subagent_tool_refusal
from sessionwire.domain.run import Run
from sessionwire.domain.session import ForkPoint, Session, SessionState
from sessionwire.domain.spawn import Spawn, SpawnState
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
    """In named steps: the caller's limits (depth, hop), a retried call answered as it
    was, the active-children cap, then the spawn inside the trace's budget."""
    services = context.services
    assert services is not None, "sessions_spawn needs the gateway's spawn driver"
    limits = context.config.agents.defaults.subagents
    depth = await spawn_depth(context.store, context.requester.key)
    if depth >= limits.maxSpawnDepth:
        return _too_deep(depth, limits.maxSpawnDepth)
    hop_refusal = context.hop_refusal()
    if hop_refusal is not None:
        await context.record_refusal(
            hop_refusal, tool="sessions_spawn", reference=params.task[:80], target_key=None
        )
        return HopLimitRefused(error=hop_refusal.message)
    run_id = context.new_run_id("sessions_spawn", params)
    # Its run saved by another attempt meanwhile (a taker's): answered for, as below.
    return await context.once_more_on_conflict(lambda: _spawn_once(context, params, run_id, depth))


async def _spawn_once(
    context: ToolContext, params: SessionsSpawnParams, run_id: UUID, depth: int
) -> SpawnResult | TraceBudgetRefused:
    """The spawn with id ``run_id``: answered for an earlier attempt's, or made."""
    services = context.services
    assert services is not None
    limits = context.config.agents.defaults.subagents
    earlier = await services.runs.load(run_id) if context.caller_turn is not None else None
    if earlier is not None:
        # The calling run's earlier attempt (before a crash) spawned this very child: it
        # goes on as it was (a reopen resumes it); answer for it, never spawn it twice.
        return SpawnResult(
            status="accepted", runId=str(run_id), childSessionKey=earlier.state.session_key
        )
    active = await _active_children(context, limits.maxChildrenPerAgent)
    if active >= limits.maxChildrenPerAgent:
        return _too_many_children(active, limits.maxChildrenPerAgent)
    return await _spawn_within_budget(context, params, run_id, depth)


def _too_deep(depth: int, max_depth: int) -> SpawnResult:
    # A leaf: with the default (no nesting) a sub-agent's session tools are refused
    # before this; here for a caller past the configured depth (decision 30).
    error = (
        NOT_FROM_SUBAGENTS
        if max_depth == 1
        else f"sessions_spawn is not allowed at this depth (depth {depth}: "
        f"agents.defaults.subagents.maxSpawnDepth is {max_depth})"
    )
    return SpawnResult(status="forbidden", tool="sessions_spawn", error=error)


def _too_many_children(active: int, max_children: int) -> SpawnResult:
    return SpawnResult(
        status="forbidden",
        tool="sessions_spawn",
        error=(
            f"sessions_spawn has reached max active children for this session "
            f"({active}/{max_children}: agents.defaults.subagents.maxChildrenPerAgent)"
        ),
    )


async def _spawn_within_budget(
    context: ToolContext, params: SessionsSpawnParams, run_id: UUID, depth: int
) -> SpawnResult | TraceBudgetRefused:
    """The spawn, admitted by the trace's budget (decision 31): its runs, its spawns, its
    tokens and cost."""
    services = context.services
    assert services is not None
    chain = context.next_hop(str(run_id))
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
    """Check what the call asks for, open the child session, let policy decide the send
    into it, then save the child, its run and the spawn together."""
    services = context.services
    assert services is not None
    target_agent = _target_agent(context, params)
    refused = _agent_refusal(context, target_agent) or _model_refusal(context, params)
    if refused is not None:
        return refused
    model = params.model or context.config.subagent_model(target_agent)
    if params.label is not None and await _label_taken(context, params.label):
        return SpawnResult(
            status="error", tool="sessions_spawn", error=f"label already in use: {params.label}"
        )
    child_key = f"agent:{target_agent}:subagent:{services.ids.new_id()}"
    now = context.clock.now()
    requester_session = await context.store.session(context.requester.key)
    requester_row = requester_session.state if requester_session else None
    point = None
    if params.context == "fork":
        if requester_session is None:
            return SpawnResult(
                status="error",
                tool="sessions_spawn",
                error='context "fork": the requester has no recorded session to fork',
            )
        # The requester's transcript as it stands now, by reference (decision 34).
        point = await context.store.read(fork_point, requester_session, None)
    child = _open_child(context, params, child_key, target_agent, model, requester_row, now, point)
    # The child run is a send into the child session: a rule may deny it (by key prefix).
    refusal = context.access.send_refusal(child.state.policy_target(context.rules))
    if refusal:
        await context.record_refusal(
            refusal, tool="sessions_spawn", reference=child_key, target_key=child_key
        )
        return SpawnResult(status=refusal.status, tool="sessions_spawn", error=refusal.message)
    at = _SpawnAt(run_id=run_id, chain=chain, now=now, requester_row=requester_row)
    run = _child_run(context, params, at, child_key, target_agent)
    spawn = _spawn_record(context, params, at, child_key, target_agent, model, depth)
    await services.runs.save_and_enqueue(
        run, child, spawn, then=lambda: services.spawns.start(spawn.id)
    )
    return SpawnResult(
        status="accepted",
        runId=str(run_id),
        childSessionKey=child_key,
        modelApplied=True if model is not None else None,
    )


def _target_agent(context: ToolContext, params: SessionsSpawnParams) -> str:
    """The agent the child runs: the one asked for, or the requester's own."""
    if params.agentId:
        return normalize_agent_id(params.agentId)
    return context.requester.agent_id


def _agent_refusal(context: ToolContext, target_agent: str) -> SpawnResult | None:
    """Another agent than the requester's own only if its allowAgents names it (or ``*``)."""
    if target_agent == context.requester.agent_id:
        return None
    allow_any, allowed = allowed_targets(context)
    if allow_any or target_agent in allowed:
        return None
    listed = ", ".join(sorted(allowed)) or "none"
    return SpawnResult(
        status="forbidden",
        tool="sessions_spawn",
        error=f"agentId is not allowed for sessions_spawn (allowed: {listed})",
    )


def _model_refusal(context: ToolContext, params: SessionsSpawnParams) -> SpawnResult | None:
    """A model asked for must be one the configuration knows."""
    known_models = context.config.known_models()
    if params.model is None or params.model in known_models:
        return None
    known = ", ".join(sorted(known_models)) or "none configured"
    return SpawnResult(
        status="error",
        tool="sessions_spawn",
        error=f"invalid model: {params.model} (configured models: {known})",
    )


def _open_child(
    context: ToolContext,
    params: SessionsSpawnParams,
    child_key: str,
    target_agent: str,
    model: str | None,
    requester_row: SessionState | None,
    now: datetime,
    point: ForkPoint | None,
) -> Session:
    """The child session, opened under the requester (from ``point``, a fork of it, for
    ``context: "fork"``) with the label, model and thinking level the call set."""
    services = context.services
    assert services is not None
    child = Session.open(
        key=child_key,
        session_id=services.ids.new_id(),
        agent_id=target_agent,
        at=now,
        spawned_by=context.requester.key,
        # Who spawned the spawner, and so on up: the child is in each one's tree.
        lineage=requester_row.spawn_ancestors() if requester_row else (),
    )
    if point is not None:
        child.fork_from(point, at=now)  # first: its history starts with the requester's
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
    return child


@dataclass(frozen=True)
class _SpawnAt:
    """Where a spawn stands: its run's id, the chain it extends, when, and the requester's
    session as read (for its channel and route)."""

    run_id: UUID
    chain: Causality
    now: datetime
    requester_row: SessionState | None


def _child_run(
    context: ToolContext,
    params: SessionsSpawnParams,
    at: _SpawnAt,
    child_key: str,
    target_agent: str,
) -> Run:
    """The child's run: the task sent into the child session, with the sub-agent's
    system prompt."""
    services = context.services
    assert services is not None
    requester = context.requester
    return Run.start(
        run_id=at.run_id,
        session_key=child_key,
        agent_id=target_agent,
        step="subagent_task",
        message=params.task,
        context=subagent_system_prompt(
            task=params.task,
            label=params.label,
            requester_key=requester.key,
            requester_channel=at.requester_row.last_channel if at.requester_row else None,
            child_key=child_key,
        ),
        timeout_seconds=params.run_timeout or services.run_timeout_seconds,
        requester_key=requester.key,
        at=at.now,
        causality=at.chain,
        sender_key=requester.key,
    )


def _spawn_record(
    context: ToolContext,
    params: SessionsSpawnParams,
    at: _SpawnAt,
    child_key: str,
    target_agent: str,
    model: str | None,
    depth: int,
) -> Spawn:
    """The spawn aggregate: what was asked, and where its report goes."""
    requester = context.requester
    row = at.requester_row
    return Spawn.spawn(
        run_id=at.run_id,
        child_key=child_key,
        agent_id=target_agent,
        requester_key=requester.key,
        requester_display=requester.raw,
        task=params.task,
        label=params.label,
        model=model,
        run_timeout_seconds=params.run_timeout,
        cleanup="delete" if params.cleanup == "delete" else "keep",
        archive_after_minutes=context.config.archive_after_minutes,
        at=at.now,
        causality=at.chain,
        depth=depth + 1,
        # Where the report goes is decided now, from where the requester asked (decision 14).
        report_route=report_route(
            requester.key,
            channel=row.last_channel if row else None,
            to=row.last_to if row else None,
            account_id=row.last_account_id if row else None,
        ),
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
    ``limit`` means the cap is reached).

    Read from the pending spawns (the work index's running ones, one query), not from
    the requester's children: a requester keeps its finished children until they are
    archived (an hour by default), and reading each one's spawn made every spawn cost
    more than the one before. Only at the cap are the children's sessions read, so a
    child whose session was closed under it does not count (as before)."""
    store = context.store
    requester = context.requester.key
    running = [
        state
        for stored in await store.pending_work("spawn", ("running",))
        if (state := SpawnState.model_validate_json(stored.state_json)).requester_key == requester
    ]
    if len(running) < limit:
        return len(running)
    active = 0
    for state in running:
        child = await store.session(state.child_key)
        active += child is not None and child.state.status == "active"
    return active
