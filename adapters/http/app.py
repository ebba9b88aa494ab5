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

Public routes answer GET and HEAD only and read no body. The token is checked from the
headers alone, before a byte of the body is read; failed attempts are rate-limited per
client and per token prefix (a valid token is never refused; forwarding headers count
only from ``http.trustedProxies``); each grant holds at most ``http.limits`` requests and
event streams at once (503 beyond); bodies are bounded in size, JSON depth and read
time. Nothing a client sends (token, body) is ever logged. Every error is
``{"error": {"code", "message"}}``; see docs/adr/0007-http-gateway.md and 0014.

This module composes the app; the routes live in ``routes/`` by concern; the token and
body checks, the error shape and the request rules every transport shares live in
``adapters/access/`` (ADR 0037, 0043).
"""

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import FastAPI
from sessionwire.adapters.access.auth import (
    BODY_READ_SECONDS,
    CONSOLE_PREFIX,
    MAX_BODY_BYTES,
    FailedAttempts,
    Gatekeeper,
    GrantSlots,
)
from sessionwire.adapters.access.errors import add_error_handlers
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.http.event_cursors import EventCursors
from sessionwire.adapters.http.routes.events import events_router
from sessionwire.adapters.http.routes.health import health_router
from sessionwire.adapters.http.routes.methods import methods_router
from sessionwire.adapters.http.routes.metrics import metrics_router
from sessionwire.adapters.http.routes.runs import RUNS_PATH, runs_router
from sessionwire.adapters.http.routes.tools import tools_router
from sessionwire.adapters.http.wire_document import WireDocumentedApp
from sessionwire.adapters.telemetry.prometheus import PrometheusTelemetry
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def create_app(
    gateway: Gateway,
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
    served = gateway.served
    if isinstance(tokens, str):
        if not tokens.strip():
            raise ValueError("the HTTP gateway needs a non-empty token")
        tokens = TokenSet.operator(tokens)
    app = WireDocumentedApp(
        title="sessionwire",
        version="0.1.0",
        summary="Session tools and gateway methods over HTTP",
        docs_url=None,
        redoc_url=None,
    )
    add_error_handlers(app, query_is_bad_request=frozenset({RUNS_PATH}))
    routers = [
        health_router(gateway),
        tools_router(gateway),
        methods_router(gateway),
        runs_router(gateway),
        events_router(gateway, EventCursors(cursor_secret)),
    ]
    for router in routers:
        app.include_router(router)
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
        app.mount(CONSOLE_PREFIX, create_console(served.reads, served.config, tokens, attempts))
    if metrics is not None:
        routers.append(metrics_router(gateway, metrics))
        app.include_router(routers[-1])
    limits = served.config.http.limits
    app.add_middleware(
        Gatekeeper,
        tokens=tokens,
        limit=max_body_bytes,
        attempts=attempts,
        read_seconds=body_read_seconds,
        trusted_proxies=served.config.http.trusted_networks(),
        slots=GrantSlots(limits.connectionsPerGrant, limits.streamsPerGrant),
    )
    if metrics is not None:
        # Outermost: refusals by the Gatekeeper (401, 413, 429) are counted too.
        # The routers' own routes: the app holds an included router as one entry, pathless.
        counted = [route for route in app.routes if hasattr(route, "path")]
        counted += [route for router in routers for route in router.routes]
        app.add_middleware(RequestCounter, metrics=metrics, routes=counted)
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
