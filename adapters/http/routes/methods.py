"""The gateway methods: ``POST /v1/methods/<method>`` (``sessions.list``,
``sessions.resolve``, ``sessions.patch``, ``chat.history``, ``agent.wait``)."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel
from sessionwire.adapters.access.auth import authenticated
from sessionwire.adapters.access.errors import STATUS_CODES, ApiError, error_responses
from sessionwire.adapters.access.request_rules import POSTED
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.application.gateway_methods import (
    AgentWaitParams,
    AgentWaitResult,
    ChatHistoryParams,
    ChatHistoryResult,
    GatewayMethods,
    MethodFailed,
    SessionsListMethodParams,
    SessionsListMethodResult,
    SessionsPatchParams,
    SessionsPatchResult,
    SessionsResolveParams,
    SessionsResolveResult,
)

LIST_EVERYTHING = SessionsListMethodParams()


@contextmanager
def refusals() -> Iterator[None]:
    """A method's refusal as an HTTP error: 404, 403, or 400 for any other."""
    try:
        yield
    except MethodFailed as failed:
        status = {"not_found": 404, "forbidden": 403}.get(failed.code, 400)
        raise ApiError(status, STATUS_CODES[status], failed.message) from None


def methods_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()
    operator_methods = gateway.served.methods()
    method_errors = error_responses(400, 401, 403, 404, 413, 415, 422)

    def methods_for(grant: Grant) -> GatewayMethods:
        # A session-bound token: the tools' policy applies, as that session.
        if grant.session is None:
            return operator_methods
        return gateway.served.methods(grant.session)

    def method(path: str, model: type[BaseModel]) -> Callable[[Callable[..., Any]], Any]:
        return router.post(
            f"/v1/methods/{path}",
            response_model=model,
            response_model_exclude_none=model is AgentWaitResult,
            dependencies=POSTED,
            responses=method_errors,
            tags=["methods"],
            name=path,
        )

    @method("sessions.list", SessionsListMethodResult)
    async def sessions_list(
        grant: Annotated[Grant, Depends(authenticated)],
        params: Annotated[SessionsListMethodParams, Body()] = LIST_EVERYTHING,
    ) -> SessionsListMethodResult:
        """Every active session (a session-bound token: every one its session may see),
        newest first, keys canonical.

        The body may be left out: every parameter has a default."""
        with refusals():
            return await methods_for(grant).sessions_list(params)

    @method("sessions.resolve", SessionsResolveResult)
    async def sessions_resolve(
        grant: Annotated[Grant, Depends(authenticated)], params: SessionsResolveParams
    ) -> SessionsResolveResult:
        """The canonical key of the session a key, sessionId or label names."""
        with refusals():
            return await methods_for(grant).sessions_resolve(params)

    @method("sessions.patch", SessionsPatchResult)
    async def sessions_patch(
        grant: Annotated[Grant, Depends(authenticated)], params: SessionsPatchParams
    ) -> SessionsPatchResult:
        """Set or clear (null) label, model, thinkingLevel, verboseLevel, sendPolicy,
        busy (an operator token only)."""
        with refusals():
            return await methods_for(grant).sessions_patch(params)

    @method("chat.history", ChatHistoryResult)
    async def chat_history(
        grant: Annotated[Grant, Depends(authenticated)], params: ChatHistoryParams
    ) -> ChatHistoryResult:
        """A session's transcript, oldest first, toolResult messages included."""
        with refusals():
            return await methods_for(grant).chat_history(params)

    @method("agent.wait", AgentWaitResult)
    async def agent_wait(
        grant: Annotated[Grant, Depends(authenticated)], params: AgentWaitParams
    ) -> AgentWaitResult:
        """Wait until a run ends (ok/error) or timeoutMs passes (timeout)."""
        with refusals():
            return await methods_for(grant).agent_wait(params)

    return router
