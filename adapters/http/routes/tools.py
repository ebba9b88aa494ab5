"""The session tools: ``GET /v1/tools`` (their JSON Schemas) and ``POST /v1/tools/<tool>``."""

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sessionwire.adapters.access.auth import (
    SESSION_HEADER,
    authenticated,
    header_text,
    requester_for,
)
from sessionwire.adapters.access.errors import ApiError, error_responses
from sessionwire.adapters.access.request_rules import AUTH, POSTED
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.http.json_body import OrjsonResponse
from sessionwire.application.tools.registry import REGISTRY
from sessionwire.application.tools.schemas import tool_parameters
from sessionwire.domain.keys import InvalidSessionKey

# A call an agent makes during its turn names its run by the token the runtime was given.
RUN_HEADER = "X-Sessionwire-Run"


class ToolList(BaseModel):
    tools: list[dict[str, Any]]


def tool_route(gateway: Gateway, name: str) -> Callable[..., Awaitable[JSONResponse]]:
    """The handler of ``POST /v1/tools/<name>``."""
    served = gateway.served

    async def call_tool(
        request: Request,
        grant: Annotated[Grant, Depends(authenticated)],
        session: Annotated[
            str,
            Header(
                alias=SESSION_HEADER,
                description=(
                    "the calling session's key (decides visibility and policy); a "
                    "session-bound token must name its own session"
                ),
            ),
        ],
        run: Annotated[
            str | None,
            Header(
                alias=RUN_HEADER,
                description=(
                    "the run token (RunRequest.run_token) of the calling session's run "
                    "in flight, for a call an agent makes during its turn: the call "
                    "joins that run's chain and hop limit; an unknown or ended run, or "
                    "another session's, is 403"
                ),
            ),
        ] = None,
    ) -> JSONResponse:
        requester = requester_for(grant, session, served.config.key_rules)
        token = header_text(run) if run is not None else None
        if token is not None:
            try:
                refusal = served.run_token_refusal(
                    served.config.key_rules.canonical(requester), token
                )
            except InvalidSessionKey as refused:
                refusal = str(refused)
            if refusal is not None:
                raise ApiError(403, "run_not_in_flight", refusal)
        raw = await request.body()
        try:
            params = json.loads(raw) if raw.strip() else None
        except (ValueError, RecursionError):
            raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
        result = await served.call_tool(requester, name, params, run_token=token)
        return OrjsonResponse(result)

    return call_tool


def tools_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()
    # The registry's HTTP tools (tools/registry.py): each its route and its listing.
    served = REGISTRY.on("http")
    names = {spec.name for spec in served}

    @router.get(
        "/v1/tools", response_model=ToolList, dependencies=AUTH, responses=error_responses(401)
    )
    async def list_tools() -> ToolList:
        """The tools' JSON Schemas, ready for LLM function calling."""
        return ToolList(tools=[s for s in gateway.tool_schemas() if s["name"] in names])

    for spec in served:
        name = spec.name
        router.add_api_route(
            f"/v1/tools/{name}",
            tool_route(gateway, name),
            methods=["POST"],
            name=name,
            summary=name,
            description=(
                f"{spec.description}\n\nThe body is the tool's parameters; the answer "
                "is its JSON result, 200 also when the tool refuses (status error/forbidden)."
            ),
            tags=["tools"],
            dependencies=POSTED,
            response_model=spec.result_model(),
            responses=error_responses(400, 401, 403, 413, 415, 422),
            openapi_extra={
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": tool_parameters(name)}},
                }
            },
        )

    # After the tools' own routes: the path parameter would match them too.
    @router.post("/v1/tools/{name}", include_in_schema=False, dependencies=AUTH)
    async def unknown_tool(name: str) -> JSONResponse:
        known = ", ".join(spec.name for spec in served)
        raise ApiError(404, "unknown_tool", f"unknown tool {name!r} (tools: {known})")

    return router
