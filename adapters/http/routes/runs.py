"""Runs (ADR 0017): ``GET /v1/runs/{id}``, ``GET /v1/runs``, ``POST /v1/runs/{id}/cancel``."""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query
from sessionwire.adapters.access.auth import SESSION_HEADER, authenticated, requester_for
from sessionwire.adapters.access.errors import ApiError, error_responses
from sessionwire.adapters.access.request_rules import AUTH, POSTED, only_query
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.application.run_queries import RUNS_DEFAULT_LIMIT, RUNS_MAX_LIMIT
from sessionwire.application.run_views import (
    RunCancelParams,
    RunCancelResult,
    RunInputAnswer,
    RunInputBody,
    RunList,
    RunStatus,
    RunView,
)
from sessionwire.application.tools.run_input import not_found
from sessionwire.domain.keys import InvalidSessionKey

RUNS_PATH = "/v1/runs"
NO_REASON = RunCancelParams()
SESSION_HEADER_DOC = (
    "with an operator token: see runs as this session would (leave it out to see "
    "every run); with a session-bound token: its own session (naming another is 403)"
)
RUN_NOT_FOUND = "no run with this id that this caller may see"


def run_requester(gateway: Gateway, grant: Grant, named: str | None) -> str | None:
    """Whose view of the runs: a session-bound token's own session always; an
    operator's, the session the header names, or none (every run)."""
    if named is None:
        return grant.session
    requester = requester_for(grant, named, gateway.served.config.key_rules)
    try:
        gateway.served.config.key_rules.canonical(requester)
    except InvalidSessionKey as error:
        raise ApiError(400, "bad_request", f"{SESSION_HEADER}: {error}") from None
    return requester


def runs_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()
    run_errors = error_responses(400, 401, 403, 404)

    @router.get(
        "/v1/runs/{run_id}",
        response_model=RunView,
        response_model_exclude_unset=True,
        dependencies=[*AUTH, Depends(only_query())],
        responses=run_errors,
        tags=["runs"],
        name="run",
    )
    async def get_run(
        run_id: str,
        grant: Annotated[Grant, Depends(authenticated)],
        session: Annotated[
            str | None, Header(alias=SESSION_HEADER, description=SESSION_HEADER_DOC)
        ] = None,
    ) -> dict[str, Any]:
        """One run: its status (queued, running, ok, error, timeout, cancelled), session,
        step, trace, times, usage. 404 for an unknown or malformed id, or a run of a
        session the caller may not see (never told apart)."""
        found = await gateway.run(run_id, requester=run_requester(gateway, grant, session))
        if found is None:
            raise ApiError(404, "not_found", RUN_NOT_FOUND)
        return found

    @router.get(
        RUNS_PATH,
        response_model=RunList,
        response_model_exclude_unset=True,
        dependencies=[*AUTH, Depends(only_query("session", "status", "trace", "limit"))],
        responses=run_errors,
        tags=["runs"],
        name="runs",
    )
    async def list_runs(
        grant: Annotated[Grant, Depends(authenticated)],
        session_key: Annotated[
            str | None,
            Query(
                alias="session",
                min_length=1,
                max_length=512,
                description="only this session's runs",
            ),
        ] = None,
        status: Annotated[RunStatus | None, Query(description="only runs in this status")] = None,
        trace: Annotated[
            str | None, Query(min_length=1, max_length=200, description="only runs of this trace")
        ] = None,
        limit: Annotated[
            int, Query(ge=1, le=RUNS_MAX_LIMIT, description="at most this many runs")
        ] = RUNS_DEFAULT_LIMIT,
        session: Annotated[
            str | None, Header(alias=SESSION_HEADER, description=SESSION_HEADER_DOC)
        ] = None,
    ) -> dict[str, Any]:
        """Runs newest first, filtered; a caller's listing holds only the runs it may see."""
        requester = run_requester(gateway, grant, session)
        try:
            return await gateway.runs(
                session_key=session_key,
                status=status,
                trace_id=trace,
                limit=limit,
                requester=requester,
            )
        except (ValueError, InvalidSessionKey) as error:
            raise ApiError(400, "bad_request", str(error)) from None

    @router.post(
        "/v1/runs/{run_id}/cancel",
        response_model=RunCancelResult,
        response_model_exclude_unset=True,
        dependencies=[*POSTED, Depends(only_query())],
        responses=error_responses(400, 401, 403, 404, 413, 415, 422),
        tags=["runs"],
        name="runs.cancel",
    )
    async def cancel_run(
        run_id: str,
        grant: Annotated[Grant, Depends(authenticated)],
        params: Annotated[RunCancelParams, Body()] = NO_REASON,
        session: Annotated[
            str | None, Header(alias=SESSION_HEADER, description=SESSION_HEADER_DOC)
        ] = None,
    ) -> dict[str, Any]:
        """Cancel a queued or running run (and the runs it caused): the run after the
        change, ``cancelled: true``. A run that had ended: 200, ``cancelled: false``,
        unchanged. 404 as for GET. The body may be left out."""
        requester = run_requester(gateway, grant, session)
        try:
            found = await gateway.cancel_run(run_id, params.reason, requester=requester)
        except ValueError as error:
            raise ApiError(400, "bad_request", str(error)) from None
        if found is None:
            raise ApiError(404, "not_found", RUN_NOT_FOUND)
        return found

    @router.post(
        "/v1/runs/{run_id}/input",
        response_model=RunInputAnswer,
        response_model_exclude_none=True,
        dependencies=[*POSTED, Depends(only_query())],
        responses=error_responses(400, 401, 403, 404, 413, 415, 422),
        tags=["runs"],
        name="runs.input",
    )
    async def provide_input(
        run_id: str,
        grant: Annotated[Grant, Depends(authenticated)],
        params: Annotated[RunInputBody, Body()],
        session: Annotated[
            str | None, Header(alias=SESSION_HEADER, description=SESSION_HEADER_DOC)
        ] = None,
    ) -> dict[str, Any]:
        """Answer a run waiting for input (decision 33): ``accepted``, its next turn
        queued with the answer as its message. A run that does not wait, or an answer
        that is not one of its options: 200, ``status: "error"`` with the reason, nothing
        written. Who may answer is who may send into the run's session; 404 as for GET."""
        by = run_requester(gateway, grant, session)
        answer = await gateway.provide_input(run_id, params.text, by=by)
        if answer.get("error") == not_found(run_id):
            raise ApiError(404, "not_found", RUN_NOT_FOUND)
        return answer

    return router
