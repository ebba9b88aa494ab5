"""The HTTP gateway: the session tools and the gateway methods over JSON, for one bearer token.

``create_app(gateway, token)`` builds a FastAPI app over an open gateway (it neither opens
nor closes it). Routes (docs/http.md has examples):

- ``POST /v1/tools/<tool>``: body = the tool's parameters, header ``X-Sessionwire-Session``
  names the calling session; the response is the tool's JSON result, 200 even for a
  refusal (``status`` ``error``/``forbidden``), as OpenClaw hands refusals back as results.
- ``POST /v1/methods/<method>``: ``sessions.list``, ``sessions.resolve``, ``sessions.patch``,
  ``chat.history``, ``agent.wait``; refusals are 400 (bad request) or 404 (not found).
- ``GET /v1/tools``: the tools' JSON Schemas. ``GET /healthz``, ``GET /readyz``: unauthenticated.

Every error is ``{"error": {"code", "message"}}``; see docs/adr/0007-http-gateway.md.
"""

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import structlog
from fastapi import Body, Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sessionwire.application.gateway import GatewayService
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
from sessionwire.application.tools.results import (
    AgentsListResult,
    SendResult,
    SessionsHistoryResult,
    SessionsListResult,
    SpawnResult,
    ToolError,
)
from sessionwire.application.tools.schemas import TOOL_DESCRIPTIONS, TOOL_PARAMETERS
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024
LIST_EVERYTHING = SessionsListMethodParams()
SESSION_HEADER = "X-Sessionwire-Session"

log = structlog.get_logger("sessionwire.http")


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every non-2xx answer: a stable ``code`` for programs, a ``message`` for people."""

    error: ErrorDetail


class Health(BaseModel):
    status: str


class ToolList(BaseModel):
    tools: list[dict[str, Any]]


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


TOOL_RESULTS: dict[str, Any] = {
    "sessions_list": SessionsListResult | ToolError,
    "sessions_history": SessionsHistoryResult | ToolError,
    "sessions_send": SendResult | ToolError,
    "sessions_spawn": SpawnResult | ToolError,
    "agents_list": AgentsListResult | ToolError,
}
assert set(TOOL_RESULTS) == set(TOOL_PARAMETERS)

STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    500: "internal",
    503: "unavailable",
}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"model": ErrorBody, "description": STATUS_CODES[status]} for status in statuses
    }


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, declared or streamed.

    The body is read here (at most ``limit`` bytes are kept) and replayed to the app, so a
    chunked upload without Content-Length is cut off as soon as it passes the limit.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(413, "too_large", f"request body larger than {self.limit} bytes")
        await response(scope, receive, send)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def create_app(
    gateway: GatewayService, token: str, *, max_body_bytes: int = MAX_BODY_BYTES
) -> FastAPI:
    """The HTTP gateway over ``gateway`` for callers presenting ``token`` as a bearer token."""
    if not token or not token.strip():
        raise ValueError("the HTTP gateway needs a non-empty token")
    expected = _digest(token.strip())
    methods = GatewayMethods(gateway)
    app = FastAPI(
        title="sessionwire",
        version="0.1.0",
        summary="Session tools and gateway methods over HTTP",
        docs_url=None,
        redoc_url=None,
    )
    bearer = HTTPBearer(auto_error=False, description="the token given to `sessionwire serve`")

    async def authenticated(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        given = _digest(credentials.credentials if credentials is not None else "")
        # Equal-length digests, compared in constant time: neither a near miss nor the
        # token's length shows in the response time.
        if not hmac.compare_digest(given, expected):
            client = request.client.host if request.client else None
            log.info("request refused: bad or missing token", path=request.url.path, client=client)
            raise ApiError(
                401,
                "unauthorized",
                "a valid bearer token is required (Authorization: Bearer <token>)",
                {"WWW-Authenticate": "Bearer"},
            )

    async def json_content(request: Request) -> None:
        # One rule for every POST: a body is JSON and says so. (FastAPI would otherwise
        # read an unlabelled body as "no body" and answer with a puzzling 422.)
        declared = request.headers.get("content-type", "")
        media = declared.split(";")[0].strip().lower()
        if media == "application/json" or media.endswith("+json"):
            return
        if not await request.body():
            return
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the body as JSON with Content-Type: application/json (got {declared!r})",
        )

    auth = [Depends(authenticated)]
    posted = [Depends(authenticated), Depends(json_content)]

    # Errors: one JSON shape everywhere ---------------------------------------------------

    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return error_response(error.status, error.code, error.message, error.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(error.status_code, "http_error")
        headers = dict(error.headers) if error.headers else None
        return error_response(error.status_code, code, str(error.detail), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = list(error.errors())
        if any(problem.get("type") == "json_invalid" for problem in problems):
            return error_response(400, "invalid_json", "the body is not valid JSON")
        first = problems[0] if problems else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        message = str(first.get("msg", "invalid request"))
        return error_response(422, "invalid_request", f"{where}: {message}" if where else message)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log.exception("request failed", path=request.url.path)
        return error_response(500, "internal", f"internal error: {type(error).__name__}")

    # Health -----------------------------------------------------------------------------

    @app.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> Health:
        """The process is up and answering."""
        return Health(status="ok")

    @app.get("/readyz", response_model=Health, responses=_errors(503), tags=["health"])
    async def readyz() -> Health | JSONResponse:
        """The store answers a query."""
        try:
            gateway.store.log_position()
        except Exception as error:
            log.warning("store not reachable", error=str(error))
            return error_response(503, "unavailable", f"store not reachable: {error}")
        return Health(status="ready")

    # Tools ------------------------------------------------------------------------------

    @app.get("/v1/tools", response_model=ToolList, dependencies=auth, responses=_errors(401))
    async def list_tools() -> ToolList:
        """The tools' JSON Schemas, ready for LLM function calling."""
        return ToolList(tools=gateway.tool_schemas())

    def tool_route(name: str) -> Callable[..., Awaitable[JSONResponse]]:
        async def call_tool(
            request: Request,
            session: Annotated[
                str,
                Header(
                    alias=SESSION_HEADER,
                    description="the calling session's key (decides visibility and policy)",
                ),
            ],
        ) -> JSONResponse:
            raw = await request.body()
            try:
                params = json.loads(raw) if raw.strip() else None
            except ValueError:
                raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
            result = await gateway.call_tool(session, name, params)
            return JSONResponse(result)

        return call_tool

    for name, parameters in TOOL_PARAMETERS.items():
        app.add_api_route(
            f"/v1/tools/{name}",
            tool_route(name),
            methods=["POST"],
            name=name,
            summary=name,
            description=(
                f"{TOOL_DESCRIPTIONS[name]}\n\nThe body is the tool's parameters; the answer "
                "is its JSON result, 200 also when the tool refuses (status error/forbidden)."
            ),
            tags=["tools"],
            dependencies=posted,
            response_model=TOOL_RESULTS[name],
            responses=_errors(400, 401, 413, 415, 422),
            openapi_extra={
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": parameters}},
                }
            },
        )

    @app.post(
        "/v1/tools/{name}",
        include_in_schema=False,
        dependencies=auth,
    )
    async def unknown_tool(name: str) -> JSONResponse:
        known = ", ".join(TOOL_PARAMETERS)
        raise ApiError(404, "unknown_tool", f"unknown tool {name!r} (tools: {known})")

    # Gateway methods --------------------------------------------------------------------

    method_errors = _errors(400, 401, 404, 413, 415, 422)

    @contextmanager
    def refusals() -> Iterator[None]:
        try:
            yield
        except MethodFailed as failed:
            status = 404 if failed.code == "not_found" else 400
            raise ApiError(status, STATUS_CODES[status], failed.message) from None

    def method(path: str, model: type[BaseModel]) -> Callable[[Callable[..., Any]], Any]:
        return app.post(
            f"/v1/methods/{path}",
            response_model=model,
            response_model_exclude_none=model is AgentWaitResult,
            dependencies=posted,
            responses=method_errors,
            tags=["methods"],
            name=path,
        )

    @method("sessions.list", SessionsListMethodResult)
    async def sessions_list(
        params: Annotated[SessionsListMethodParams, Body()] = LIST_EVERYTHING,
    ) -> SessionsListMethodResult:
        """Every active session, newest first, keys canonical (no requester filtering).

        The body may be left out: every parameter has a default."""
        with refusals():
            return methods.sessions_list(params)

    @method("sessions.resolve", SessionsResolveResult)
    async def sessions_resolve(params: SessionsResolveParams) -> SessionsResolveResult:
        """The canonical key of the session a key, sessionId or label names."""
        with refusals():
            return methods.sessions_resolve(params)

    @method("sessions.patch", SessionsPatchResult)
    async def sessions_patch(params: SessionsPatchParams) -> SessionsPatchResult:
        """Set or clear (null) label, model, thinkingLevel, verboseLevel, sendPolicy."""
        with refusals():
            return await methods.sessions_patch(params)

    @method("chat.history", ChatHistoryResult)
    async def chat_history(params: ChatHistoryParams) -> ChatHistoryResult:
        """A session's transcript, oldest first, toolResult messages included."""
        with refusals():
            return methods.chat_history(params)

    @method("agent.wait", AgentWaitResult)
    async def agent_wait(params: AgentWaitParams) -> AgentWaitResult:
        """Wait until a run ends (ok/error) or timeoutMs passes (timeout)."""
        with refusals():
            return await methods.agent_wait(params)

    app.add_middleware(BodyLimit, limit=max_body_bytes)
    return app
