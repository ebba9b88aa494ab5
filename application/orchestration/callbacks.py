"""Which run a tool call belongs to when it names none (ADR 0034, issue 43).

An agent calling back over HTTP or MCP names its run by the run token
(``X-Sessionwire-Run``, ``_meta["sessionwire/run"]``); the call then joins that run's
chain, its hop and its trace's budget (decision 17). A call without it, made for a
session that has a run in progress, is that run's agent calling back all the same: it
is attributed to that run (``session.agentToAgent.callbacksWithoutRun: "attribute"``,
the default) or refused (``"refuse"``), never started as a fresh trace with a full hop
and budget allowance. The token stays the precise way: it names the very turn, where
the session's run in progress is only the likeliest caller.

A steer raises the hop of the run it joins (ADR 0034): the turn in flight reads its
run's recorded hop before a call that starts or feeds a run, so a steer recorded by
another gateway counts here too.
"""

from __future__ import annotations

from uuid import UUID

from sessionwire.application.orchestration.runs import RunEngine, RunTurn
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.domain.policy import Refusal
from sessionwire.domain.run import Run, RunState

CALLBACK_RULE = "session.agentToAgent.callbacksWithoutRun"
# Tools whose call starts or feeds a run: the ones a hop raised by a steer bears on.
RUN_TOOLS = frozenset({"sessions_send", "sessions_spawn", "sessions_yield", "subagents"})


async def run_in_progress(
    engine: RunEngine, store: AsyncStore, session_key: str
) -> tuple[RunState, RunTurn | None] | None:
    """The session's run in progress (running): its state and, when it executes here,
    its turn; None when the session runs nothing now."""
    turn = engine.running_turn(session_key)
    if turn is not None:
        return turn.state, turn
    running = await store.pending_work("run", ("running",), session_key=session_key)
    if not running:
        return None
    return running[0].to_aggregate(Run, RunState).state, None


def callback_refusal(session_key: str, run_id: str) -> Refusal:
    """A call without its run token, refused by ``callbacksWithoutRun: "refuse"``."""
    return Refusal(
        "forbidden",
        f"session {session_key} has a run in progress ({run_id}): a call it makes must "
        f"name that run (the X-Sessionwire-Run header over HTTP, _meta sessionwire/run "
        f"over MCP; {CALLBACK_RULE}: refuse)",
        "run_header",
        CALLBACK_RULE,
    )


async def with_recorded_hop(engine: RunEngine, state: RunState) -> RunState:
    """``state`` at the hop its run has recorded since (a steer into it raised it)."""
    recorded = await engine.load(UUID(state.run_id))
    if recorded is None or recorded.state.steer_hops <= state.steer_hops:
        return state
    return state.model_copy(update={"steer_hops": recorded.state.steer_hops})
