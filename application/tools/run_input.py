"""``run_input``: the answer to a run waiting for input (decision 33, ADR 0045).

A run whose turn asked a person (``RunReply(input_request=...)``) waits, holding nothing
but its deadline. The answer, from any transport (``gw.provide_input``, HTTP, the CLI,
MCP, A2A), comes here: checked as a send into the run's session would be (visibility,
the agent-to-agent policy, the send policy: who may answer is who may send), then
against the run (waiting, and the answer one of its options), and recorded with the run's
next turn queued, exactly once: a second answer meets the first's record and is refused.
"""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from sessionwire.application.context import ToolContext, ToolServices
from sessionwire.application.run_queries import run_uuid
from sessionwire.application.tools.params import ToolInputError
from sessionwire.application.tools.results import ToolError, ToolResult
from sessionwire.application.tools.run_params import RunInputParams
from sessionwire.application.tools.session_refs import (
    SessionNotResolved,
    SessionRefused,
    resolve_session,
)
from sessionwire.domain.run import AnswerNotAnOption, RunNotWaiting

TOOL = "run_input"


class RunInputResult(ToolResult):
    """The answer was taken: the run is queued for its next turn."""

    status: Literal["accepted"] = "accepted"
    runId: str
    sessionKey: str


def not_found(run_id: str) -> str:
    # One text for a run that does not exist and one the caller may not see (decision 41).
    return f"run {run_id} not found, or not visible to this session"


async def provide_input(
    services: ToolServices,
    run_id: str,
    text: str,
    *,
    by: str | None,
    reach: ToolContext | None = None,
) -> RunInputResult | ToolError:
    """Record ``text`` as the answer to run ``run_id``, given by session ``by`` (None: an
    operator); ``reach``, the answering session's context, checks it may send there
    (without it the caller's transport has checked that: A2A's task visibility). The
    answer is bounded as a sent message is: it becomes the run's next message."""
    try:
        checked = RunInputParams.parse({"runId": run_id, "text": text})
    except ToolInputError as error:
        return ToolError(tool=TOOL, error=str(error))
    run_id, text = checked.runId, checked.text
    key = run_uuid(run_id)
    found = None if key is None else await services.runs.load(UUID(key))
    if found is None:
        return ToolError(tool=TOOL, error=not_found(run_id))
    session_key = found.state.session_key
    if reach is not None:
        try:
            target = await resolve_session(reach, session_key, access="messaging")
        except (SessionNotResolved, SessionRefused):
            return ToolError(tool=TOOL, error=not_found(run_id))
        refusal = reach.access.send_refusal(target.state.policy_target(reach.rules))
        if refusal is not None:
            return ToolError(status=refusal.status, tool=TOOL, error=refusal.message)
    try:
        state = await services.runs.provide_input(found.id, text, by=by)
    except (RunNotWaiting, AnswerNotAnOption) as refused:
        return ToolError(tool=TOOL, error=str(refused))
    return RunInputResult(runId=state.run_id, sessionKey=state.session_key)


async def run_input(context: ToolContext, params: RunInputParams) -> RunInputResult | ToolError:
    services = context.services
    assert services is not None, "run_input needs the gateway's run engine"
    return await provide_input(
        services, params.runId, params.text, by=context.requester.key, reach=context
    )
