"""The HTTP gateway: the session tools and the gateway methods over JSON, for scoped tokens.

``create_app(gateway, tokens)`` builds a FastAPI app over an open gateway (it neither opens
nor closes it); ``tokens`` is a ``TokenSet`` (a lone string is one operator token). Routes
(docs/http.md has examples):

- ``POST /v1/tools/<tool>``: body = the tool's parameters, header ``X-Sessionwire-Session``
  names the calling session (with a session-bound token, naming another is 403); the
  response is the tool's JSON result, 200 even for a refusal (``status``
  ``error``/``forbidden``). An agent calling back during its turn adds
  ``X-Sessionwire-Run: <RunRequest.run_token>`` so the call joins its run's chain and hop
  limit (decision 17); a token of no run in flight for that session is 403.
- ``POST /v1/methods/<method>``: ``sessions.list``, ``sessions.resolve``, ``sessions.patch``,
  ``chat.history``, ``agent.wait``; with a session-bound token they apply the tools'
  policy (``GatewayMethods(requester=…)``); refusals are 400, 403 or 404.
- ``GET /v1/runs/{id}``, ``GET /v1/runs?session=&status=&trace=&limit=``, ``POST
  /v1/runs/{id}/cancel``: runs (ADR 0017) as ``gw.run`` / ``gw.runs`` / ``gw.cancel_run``
  answer them; a session-bound token sees and cancels only runs its session may see (a
  hidden run is 404 like a missing one), an operator token any, or those a session named
  by ``X-Sessionwire-Session`` may see. A bad query parameter is 400.
- ``GET /v1/events``: the live event stream as Server-Sent Events (``?after=&session=
  &trace=``, ``Last-Event-ID`` resumes; ADR 0023); a session-bound token gets only the
  events of sessions its session may read.
- ``GET /v1/tools``: the tools' JSON Schemas. ``GET /healthz``, ``GET /readyz``: unauthenticated.
- ``GET /metrics`` (when given ``metrics``, as ``serve`` does): Prometheus text, operator
  tokens only (ADR 0019).

The token is checked from the headers alone, before a byte of the body is read; failed
attempts are rate-limited per client; bodies are bounded in size, JSON depth and read
time. Nothing a client sends (token, body) is ever logged. Every error is
``{"error": {"code", "message"}}``; see docs/adr/0007-http-gateway.md and 0014.
"""

import asyncio
import functools
import json
import re
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import Body, Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sessionwire.adapters.bootstrap import Gateway, service_of
from sessionwire.adapters.http.event_cursors import EventCursors
from sessionwire.adapters.http.event_source import EVENT_STREAM, LAST_EVENT_ID, event_source
from sessionwire.adapters.http.json_body import OrjsonResponse
from sessionwire.adapters.http.reference_page import reference_page
from sessionwire.adapters.http.tokens import Grant, TokenSet
from sessionwire.adapters.http.wire_document import WireDocumentedApp
from sessionwire.adapters.telemetry.prometheus import CONTENT_TYPE as METRICS_CONTENT_TYPE
from sessionwire.adapters.telemetry.prometheus import PrometheusTelemetry
from sessionwire.application.event_stream.subscription import parse_cursor
from sessionwire.application.gateway import GatewayService, RunNotInFlight
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
from sessionwire.application.library_logging import library_logger
from sessionwire.application.run_queries import RUNS_DEFAULT_LIMIT, RUNS_MAX_LIMIT
from sessionwire.application.run_views import (
    RunCancelParams,
    RunCancelResult,
    RunList,
    RunStatus,
    RunView,
)
from sessionwire.application.tools.results import (
    AgentsListResult,
    SendResult,
    SessionsHistoryResult,
    SessionsListResult,
    SessionStatusResult,
    SpawnResult,
    SubagentsResult,
    ToolError,
    TraceBudgetRefused,
    YieldResult,
)
from sessionwire.application.tools.schemas import TOOL_DESCRIPTIONS, TOOL_PARAMETERS
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import InvalidSessionKey
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024
# Tool parameters nest a few levels; a deeper body is refused before it is parsed (a
# 100,000-deep one was a 500 that held the server ~0.9 s).
MAX_JSON_DEPTH = 32
# A client has this long to send its whole body once the headers are in.
BODY_READ_SECONDS = 30.0
# Failed token attempts per client address before it must wait (429).
MAX_FAILED_ATTEMPTS = 10
FAILED_ATTEMPTS_WINDOW_SECONDS = 60.0
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs"})
LIST_EVERYTHING = SessionsListMethodParams()
NO_REASON = RunCancelParams()
SESSION_HEADER = "X-Sessionwire-Session"
CONSOLE_PREFIX = "/console"
# A call an agent makes during its turn names its run by the token the runtime was given.
RUN_HEADER = "X-Sessionwire-Run"
RUNS_PATH = "/v1/runs"
# Log positions are 64-bit integers in the stores.
MAX_POSITION = 2**63 - 1

log = library_logger("sessionwire.http")


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


class ApiError(SessionwireError):
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
    "sessions_send": SendResult | TraceBudgetRefused | ToolError,
    "sessions_spawn": SpawnResult | TraceBudgetRefused | ToolError,
    "sessions_yield": YieldResult | ToolError,
    "agents_list": AgentsListResult | ToolError,
    "subagents": SubagentsResult | ToolError,
    "session_status": SessionStatusResult | ToolError,
}
assert set(TOOL_RESULTS) == set(TOOL_PARAMETERS)

STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
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


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth_exceeds(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Does ``raw`` nest arrays and objects deeper than ``limit``? Linear, before parsing."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > limit:
            return True
    return False


class FailedAttempts:
    """Failed token attempts per client address in a sliding window (bounded memory)."""

    def __init__(
        self,
        limit: int = MAX_FAILED_ATTEMPTS,
        window: float = FAILED_ATTEMPTS_WINDOW_SECONDS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.now = now
        self.by_client: dict[str, list[float]] = {}

    def _recent(self, client: str) -> list[float]:
        cutoff = self.now() - self.window
        recent = [t for t in self.by_client.get(client, ()) if t > cutoff]
        if recent:
            self.by_client[client] = recent
        else:
            self.by_client.pop(client, None)
        return recent

    def retry_after(self, client: str) -> int | None:
        """Seconds the client must wait, or None when it may try."""
        recent = self._recent(client)
        if len(recent) < self.limit:
            return None
        return max(1, int(recent[0] + self.window - self.now()) + 1)

    def failed(self, client: str) -> None:
        if len(self.by_client) > 10_000:  # many addresses: forget the quiet ones
            for quiet in [c for c in self.by_client if not self._recent(c)]:
                self.by_client.pop(quiet, None)
        self.by_client.setdefault(client, []).append(self.now())


def is_agent_card_path(path: str) -> bool:
    """An A2A Agent Card (adapters/a2a): public, as the protocol's discovery expects."""
    return path.startswith("/a2a/") and path.endswith("/.well-known/agent-card.json")


def is_console_path(path: str) -> bool:
    """The console's pages: it checks tokens itself (a browser sends a cookie, not a
    bearer header), operators only; bodies are still bounded here."""
    return path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")


def bearer_token(headers: dict[bytes, bytes]) -> str | None:
    """The token of an ``Authorization: Bearer`` header, decoded as UTF-8."""
    value = headers.get(b"authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    try:
        return token.strip().decode("utf-8")
    except UnicodeDecodeError:
        return None


class Gatekeeper:
    """Everything before the app: the token (from headers only, so an unauthenticated
    client cannot make the server buffer a body), the failed-attempt limit, and the body:
    at most ``limit`` bytes, read within ``read_seconds``, nested at most
    ``MAX_JSON_DEPTH`` deep. The body is then replayed to the app."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenSet,
        limit: int,
        attempts: FailedAttempts,
        read_seconds: float = BODY_READ_SECONDS,
        refuse: Callable[[Grant], str | None] | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.limit = limit
        self.attempts = attempts
        self.read_seconds = read_seconds
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        path = scope["path"]
        if path not in PUBLIC_PATHS and not is_console_path(path) and not is_agent_card_path(path):
            client = scope["client"][0] if scope.get("client") else "unknown"
            wait = self.attempts.retry_after(client)
            if wait is not None:
                await error_response(
                    429,
                    "too_many_requests",
                    f"too many failed token attempts; retry in {wait} s",
                    {"Retry-After": str(wait)},
                )(scope, receive, send)
                return
            grant = self.tokens.grant_for(bearer_token(headers))
            if grant is None:
                self.attempts.failed(client)
                log.info("request refused: bad or missing token", path=scope["path"])
                await error_response(
                    401,
                    "unauthorized",
                    "a valid bearer token is required (Authorization: Bearer <token>)",
                    {"WWW-Authenticate": "Bearer"},
                )(scope, receive, send)
                return
            refusal = self.refuse(grant) if self.refuse is not None else None
            if refusal is not None:
                await error_response(403, "forbidden", refusal)(scope, receive, send)
                return
            scope.setdefault("state", {})["grant"] = grant
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._too_large(scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.read_seconds):
                body = await self._read(receive)
        except TimeoutError:
            await error_response(
                408, "request_timeout", f"the body was not sent within {self.read_seconds:g} s"
            )(scope, receive, send)
            return
        if body is None:  # the client went away
            return
        if len(body) > self.limit:
            await self._too_large(scope, receive, send)
            return
        if json_depth_exceeds(body):
            await error_response(
                400, "too_deep", f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels"
            )(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > self.limit:  # stop reading: the answer is 413 whatever follows
                break
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(413, "too_large", f"request body larger than {self.limit} bytes")
        await response(scope, receive, send)


def header_text(value: str) -> str:
    """A header value as UTF-8 (HTTP servers hand it over decoded as latin-1)."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise ApiError(400, "bad_request", f"{SESSION_HEADER} is not valid UTF-8") from None


def _stream_start(
    grant: Grant, after: int, last_event_id: str | None, cursors: EventCursors
) -> int | str:
    """Where a subscriber's stream starts: ``after``, or the id a reconnecting client
    sends. A session-bound subscriber's ids are sealed (``EventCursors``): it resumes
    from one of them, or starts at 0; a log position would let it count what it may not
    see, so none other is taken from it."""
    if grant.session is not None:
        if after != 0:
            raise ApiError(
                400,
                "bad_request",
                f"a session-bound token follows from 0 or resumes with {LAST_EVENT_ID}: "
                "its event ids are not log positions",
            )
        if last_event_id is None:
            return 0
        try:
            return cursors.open(grant.session, last_event_id.strip())
        except ValueError:
            raise ApiError(
                400, "bad_request", f"{LAST_EVENT_ID} must be an event's id from this stream"
            ) from None
    if last_event_id is None:
        return after
    resumed = last_event_id.strip()
    try:
        position, _ = parse_cursor(resumed)
    except ValueError:
        position = MAX_POSITION + 1
    if position > MAX_POSITION or len(resumed) > 40:
        raise ApiError(400, "bad_request", f"{LAST_EVENT_ID} must be an event's id (its cursor)")
    return resumed


def create_app(
    served: GatewayService | Gateway,
    tokens: TokenSet | str,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    attempts: FailedAttempts | None = None,
    body_read_seconds: float = BODY_READ_SECONDS,
    metrics: PrometheusTelemetry | None = None,
    console: bool = True,
    cursor_secret: bytes | None = None,
    a2a: bool = False,
    a2a_signing_key: Ed25519PrivateKey | None = None,
    public_url: str | None = None,
) -> FastAPI:
    """The HTTP gateway over ``gateway`` for callers presenting one of ``tokens`` (a lone
    string is one operator token) as a bearer token. With ``metrics`` (the gateway's
    Prometheus telemetry) it counts requests and serves ``GET /metrics`` to operator
    tokens. The read-only web console is under ``/console`` (docs/console.md) unless
    ``console`` is False. ``cursor_secret`` seals session-bound subscribers' event ids
    (``EventCursors``; without it they hold for this app's lifetime only). With ``a2a``
    each configured agent is served over the A2A protocol under ``/a2a/<agentId>``
    (docs/a2a.md), its Agent Card signed with ``a2a_signing_key`` when given;
    ``public_url`` is the base URL the cards name."""
    gateway = service_of(served)
    if isinstance(tokens, str):
        if not tokens.strip():
            raise ValueError("the HTTP gateway needs a non-empty token")
        tokens = TokenSet.operator(tokens)
    operator_methods = GatewayMethods(gateway)
    cursors = EventCursors(cursor_secret)
    app = WireDocumentedApp(
        title="sessionwire",
        version="0.1.0",
        summary="Session tools and gateway methods over HTTP",
        docs_url=None,
        redoc_url=None,
    )
    bearer = HTTPBearer(
        auto_error=False,
        description="a token given to `sessionwire serve` (operator or bound to one session)",
    )

    async def authenticated(
        request: Request,
        _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Grant:
        # The Gatekeeper checked the token before the body was read; this declares the
        # scheme in the OpenAPI document and hands the grant to the route.
        grant = request.scope.get("state", {}).get("grant")
        assert isinstance(grant, Grant), "the Gatekeeper runs before every private route"
        return grant

    def methods_for(grant: Grant) -> GatewayMethods:
        if grant.session is None:
            return operator_methods
        return GatewayMethods(gateway, requester=grant.session)

    def requester_for(grant: Grant, named: str) -> str:
        """The session a tool call acts as: any the header names for an operator token;
        for a session-bound token its own (naming another is 403)."""
        named = header_text(named)
        if grant.session is None:
            return named
        if not same_session(named, grant.session):
            raise ApiError(
                403, "forbidden", f"this token acts only as the session {grant.session!r}"
            )
        return grant.session

    def same_session(named: str, bound: str) -> bool:
        rules = gateway.config.key_rules
        try:
            return rules.canonical(named) == rules.canonical(bound)
        except InvalidSessionKey:
            return False

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
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = list(error.errors())
        if any(problem.get("type") == "json_invalid" for problem in problems):
            return error_response(400, "invalid_json", "the body is not valid JSON")
        first = problems[0] if problems else {}
        location = tuple(first.get("loc", ()))
        message = str(first.get("msg", "invalid request"))
        if location[:1] == ("query",) and request.url.path == RUNS_PATH:
            # A filter of the runs listing (GET /v1/runs?status=...): a bad request, as a
            # bad argument of gw.runs is a ValueError.
            name = ".".join(str(part) for part in location[1:])
            return error_response(400, "bad_request", f"{name}: {message}")
        where = ".".join(str(part) for part in location if part != "body")
        return error_response(422, "invalid_request", f"{where}: {message}" if where else message)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        # Where it failed, never with what: no locals, no exception text (either may hold
        # the body or a token), only the error's type and the stack's file:line list.
        frames = traceback.extract_tb(error.__traceback__)
        log.error(
            "request failed",
            path=request.url.path,
            error=type(error).__name__,
            stack=[f"{frame.filename}:{frame.lineno} {frame.name}" for frame in frames[-8:]],
        )
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
            await gateway.store.sealed_position()
        except Exception as error:
            log.warning("store not reachable", error=str(error))
            return error_response(503, "unavailable", f"store not reachable: {error}")
        return Health(status="ready")

    # The API reference --------------------------------------------------------------------

    @app.get("/docs", include_in_schema=False)
    async def api_reference() -> HTMLResponse:
        """The OpenAPI document as a page to read, with no script (reference_page.py)."""
        return reference_page(app.openapi())

    # Tools ------------------------------------------------------------------------------

    @app.get("/v1/tools", response_model=ToolList, dependencies=auth, responses=_errors(401))
    async def list_tools() -> ToolList:
        """The tools' JSON Schemas, ready for LLM function calling."""
        return ToolList(tools=gateway.tool_schemas())

    def tool_route(name: str) -> Callable[..., Awaitable[JSONResponse]]:
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
            requester = requester_for(grant, session)
            token = header_text(run) if run is not None else None
            if token is not None:
                try:
                    gateway.turn_for(gateway.config.key_rules.canonical(requester), token)
                except (RunNotInFlight, InvalidSessionKey) as refused:
                    raise ApiError(403, "run_not_in_flight", str(refused)) from None
            raw = await request.body()
            try:
                params = json.loads(raw) if raw.strip() else None
            except (ValueError, RecursionError):
                raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
            result = await gateway.call_tool(requester, name, params, run_token=token)
            return OrjsonResponse(result)

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
            responses=_errors(400, 401, 403, 413, 415, 422),
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

    method_errors = _errors(400, 401, 403, 404, 413, 415, 422)

    @contextmanager
    def refusals() -> Iterator[None]:
        try:
            yield
        except MethodFailed as failed:
            status = {"not_found": 404, "forbidden": 403}.get(failed.code, 400)
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

    # Runs (ADR 0017) ----------------------------------------------------------------

    run_errors = _errors(400, 401, 403, 404)
    session_header_doc = (
        "with an operator token: see runs as this session would (leave it out to see "
        "every run); with a session-bound token: its own session (naming another is 403)"
    )
    run_not_found = "no run with this id that this caller may see"

    def only_query(*names: str) -> Callable[[Request], None]:
        """Refuse a query parameter the route does not take: as the document says (a
        misspelt filter would otherwise widen a listing silently)."""

        def check(request: Request) -> None:
            unknown = sorted(set(request.query_params) - set(names))
            if unknown:
                known = ", ".join(names) or "none"
                raise ApiError(
                    400,
                    "bad_request",
                    f"unknown query parameter {unknown[0]!r} (parameters: {known})",
                )

        return check

    def run_requester(grant: Grant, named: str | None) -> str | None:
        """Whose view of the runs: a session-bound token's own session always; an
        operator's, the session the header names, or none (every run)."""
        if named is None:
            return grant.session
        requester = requester_for(grant, named)
        try:
            gateway.config.key_rules.canonical(requester)
        except InvalidSessionKey as error:
            raise ApiError(400, "bad_request", f"{SESSION_HEADER}: {error}") from None
        return requester

    @app.get(
        "/v1/runs/{run_id}",
        response_model=RunView,
        response_model_exclude_unset=True,
        dependencies=[*auth, Depends(only_query())],
        responses=run_errors,
        tags=["runs"],
        name="run",
    )
    async def get_run(
        run_id: str,
        grant: Annotated[Grant, Depends(authenticated)],
        session: Annotated[
            str | None, Header(alias=SESSION_HEADER, description=session_header_doc)
        ] = None,
    ) -> dict[str, Any]:
        """One run: its status (queued, running, ok, error, timeout, cancelled), session,
        step, trace, times, usage. 404 for an unknown or malformed id, or a run of a
        session the caller may not see (never told apart)."""
        found = await gateway.run(run_id, requester=run_requester(grant, session))
        if found is None:
            raise ApiError(404, "not_found", run_not_found)
        return found

    @app.get(
        RUNS_PATH,
        response_model=RunList,
        response_model_exclude_unset=True,
        dependencies=[*auth, Depends(only_query("session", "status", "trace", "limit"))],
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
            str | None, Header(alias=SESSION_HEADER, description=session_header_doc)
        ] = None,
    ) -> dict[str, Any]:
        """Runs newest first, filtered; a caller's listing holds only the runs it may see."""
        requester = run_requester(grant, session)
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

    @app.post(
        "/v1/runs/{run_id}/cancel",
        response_model=RunCancelResult,
        response_model_exclude_unset=True,
        dependencies=[*posted, Depends(only_query())],
        responses=_errors(400, 401, 403, 404, 413, 415, 422),
        tags=["runs"],
        name="runs.cancel",
    )
    async def cancel_run(
        run_id: str,
        grant: Annotated[Grant, Depends(authenticated)],
        params: Annotated[RunCancelParams, Body()] = NO_REASON,
        session: Annotated[
            str | None, Header(alias=SESSION_HEADER, description=session_header_doc)
        ] = None,
    ) -> dict[str, Any]:
        """Cancel a queued or running run (and the runs it caused): the run after the
        change, ``cancelled: true``. A run that had ended: 200, ``cancelled: false``,
        unchanged. 404 as for GET. The body may be left out."""
        requester = run_requester(grant, session)
        try:
            found = await gateway.cancel_run(run_id, params.reason, requester=requester)
        except ValueError as error:
            raise ApiError(400, "bad_request", str(error)) from None
        if found is None:
            raise ApiError(404, "not_found", run_not_found)
        return found

    # The live event stream ------------------------------------------------------------

    @app.get(
        "/v1/events",
        tags=["events"],
        response_class=StreamingResponse,
        responses={
            200: {
                "description": (
                    "Server-Sent Events: one `data:` line per recorded event (its JSON, "
                    "docs/events.md), `id:` its log position; `:` comment lines are "
                    "heartbeats. The stream stays open for new events."
                ),
                "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
            },
            **_errors(400, 401, 422),
        },
    )
    async def events(
        grant: Annotated[Grant, Depends(authenticated)],
        after: Annotated[
            int,
            Query(ge=0, le=MAX_POSITION, description="the log position to follow from"),
        ] = 0,
        session: Annotated[
            str | None,
            Query(
                min_length=1,
                max_length=512,
                description="only this session's events (and its runs', exchanges', spawns')",
            ),
        ] = None,
        trace: Annotated[
            str | None,
            Query(min_length=1, max_length=200, description="only this chain's events"),
        ] = None,
        follow: Annotated[
            bool,
            Query(
                description=(
                    "keep the stream open for new events (default); false: send what is "
                    "recorded now and end"
                )
            ),
        ] = True,
        last_event_id: Annotated[
            str | None,
            Header(
                alias=LAST_EVENT_ID,
                description=(
                    "resume after this event id: a position, or position.k inside a batch "
                    "(what a reconnecting client sends)"
                ),
            ),
        ] = None,
    ) -> StreamingResponse:
        """The recorded events after a position, then each new one as it is recorded.

        An operator token sees every event; a session-bound token only the events of
        sessions its session may read (as ``sessions_history``)."""
        start = _stream_start(grant, after, last_event_id, cursors)
        try:
            subscription = gateway.subscribe(
                start,
                session_key=session,
                trace_id=trace,
                requester=grant.session,
            )
        except ValueError as error:
            raise ApiError(400, "bad_request", str(error)) from None
        return StreamingResponse(
            event_source(
                subscription,
                gateway.clock,
                follow=follow,
                shown=None
                if grant.session is None
                else functools.partial(cursors.sealed_event, grant.session),
            ),
            media_type=EVENT_STREAM,
            # Proxies must neither cache nor buffer a stream.
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    if a2a:
        # Imported here: the A2A SDK loads only where A2A is served.
        from sessionwire.adapters.a2a.server import a2a_routes

        app.router.routes.extend(
            a2a_routes(gateway, signing_key=a2a_signing_key, public_url=public_url)
        )
    attempts = attempts or FailedAttempts()
    if console:
        # Imported here: the console's templates load only where it is served.
        from sessionwire.adapters.console.app import create_console

        # The console checks its own tokens (a header or its login cookie; operators only).
        app.mount("/console", create_console(gateway.store, gateway.config, tokens, attempts))
    if metrics is not None:
        exposition = metrics

        @app.get("/metrics", include_in_schema=False)
        async def prometheus_metrics(
            grant: Annotated[Grant, Depends(authenticated)],
        ) -> Response:
            """Prometheus metrics (docs/operations.md): an operator token only."""
            if not grant.is_operator:
                raise ApiError(403, "forbidden", "metrics need an operator token")
            # Collecting reads the store (pending runs, outbox depth): on a reader thread.
            text = await gateway.store.read(lambda _store: exposition.exposition())
            return Response(text, media_type=METRICS_CONTENT_TYPE)

    app.add_middleware(
        Gatekeeper,
        tokens=tokens,
        limit=max_body_bytes,
        attempts=attempts,
        read_seconds=body_read_seconds,
    )
    if metrics is not None:
        # Outermost: refusals by the Gatekeeper (401, 413, 429) are counted too.
        app.add_middleware(RequestCounter, metrics=metrics, routes=app.routes)
    return app


class RequestCounter:
    """Counts every HTTP answer by route and status; a path no route has counts as
    ``other`` (a client's made-up paths must not grow the series without bound)."""

    def __init__(self, app: ASGIApp, metrics: PrometheusTelemetry, routes: Any) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self._paths: frozenset[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # unless an answer starts

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            if self._paths is None:
                self._paths = frozenset(getattr(route, "path", "") for route in self.routes)
            path = scope["path"]
            self.metrics.http_request(path if path in self._paths else "other", status)
