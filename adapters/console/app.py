"""The read-only web console: server-rendered pages over a store (docs/console.md).

``create_console(store, config, tokens)`` builds the ASGI app that ``serve`` mounts at
``/console`` and ``sessionwire console`` serves alone. It never writes to the store:
every route is a GET but the login and logout forms. Only operator tokens open it (ADR
0014): from an ``Authorization: Bearer`` header, or through a login (``/console/login``:
its form posts the token; a token is never taken from an address, which browsers and
access logs keep; the link ``sessionwire console`` prints carries a one-time ``?code=``
instead). A login's HttpOnly, SameSite=Strict
cookie holds a random login id, never the token (logins.py); it is ``Secure`` unless the
console was reached on a loopback address, and ``/console/logout`` ends it. Failed
attempts count against the same per-client limit as the API's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from importlib.resources import files
from typing import Annotated, Any
from urllib.parse import parse_qs, quote
from uuid import UUID

import jinja2
from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sessionwire.adapters.access.auth import (
    CONSOLE_BODY_BYTES,
    FailedAttempts,
    attempt_keys,
    bearer_token,
)
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.console import page_data
from sessionwire.adapters.console.logins import LOGIN_SECONDS, ConsoleLogins
from sessionwire.adapters.console.sequence_diagram import exchange_sequence, sequence_svg
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.application.audit.verify import verify
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.store import Store
from sessionwire.domain.keys import InvalidSessionKey

COOKIE = "sessionwire_console"
LOGIN_BODY_BYTES = CONSOLE_BODY_BYTES
STATUSES = ("active", "archived", "deleted")
# Log positions and times are 64-bit integers in the stores.
MAX_POSITION = 2**63 - 1
RUN_STATUSES = ("queued", "running", "input_required", "ok", "error", "timeout", "cancelled")
# The console's pages hold no script; styles and images come from the console itself.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class FailedLogins:
    """What the console needs of the API's failed-attempt counter."""

    def retry_after(self, *keys: str) -> int | None:
        return None

    def failed(self, *keys: str) -> None:
        return None


def client_of(request: Request) -> str:
    """The client's address as the Gatekeeper read it (forwarding headers only behind a
    trusted proxy); the peer's when the console is served alone."""
    client = request.scope.get("state", {}).get("client")
    if isinstance(client, str):
        return client
    return request.client.host if request.client else "unknown"


def _when(millis: int | None) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    pieces = []
    for block in content or []:
        if block.get("type") == "text":
            pieces.append(str(block.get("text", "")))
        elif block.get("type") in {"toolCall", "tool_use"}:
            pieces.append(f"[tool call {block.get('name', '')}]")
    return "\n".join(pieces)


def _environment() -> jinja2.Environment:
    templates = files("sessionwire.adapters.console") / "templates"
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,  # every recorded text is escaped
    )
    environment.filters["when"] = _when
    environment.filters["text"] = _text
    environment.filters["q"] = lambda value: quote(str(value), safe="")
    return environment


MAX_CODE_LENGTH = 64
"""A one-time login code is 43 characters; longer input is cut before the lookup."""


def create_console(
    store: AsyncStore,
    config: GatewayConfig,
    tokens: TokenSet,
    attempts: FailedAttempts | FailedLogins | None = None,
    logins: ConsoleLogins | None = None,
) -> FastAPI:
    """The console over ``store``; mount it at ``/console`` (its links assume so)."""
    templates = _environment()
    logins = logins if logins is not None else ConsoleLogins()
    limiter = attempts if attempts is not None else FailedLogins()
    rules = config.key_rules
    # Recorded texts are shown as another session's history is read: masked (ADR 0018).
    redactor = config.redaction.redactor()
    templates.filters["masked"] = redactor.mask_text if redactor is not None else str
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    stylesheet = (files("sessionwire.adapters.console") / "static" / "console.css").read_bytes()

    def render(name: str, code: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(name).render(
            base="/console", rules=rules, hide_logout=name == "login.html", **context
        )
        return HTMLResponse(html, status_code=code, headers=SECURITY_HEADERS)

    def granted(request: Request) -> bool:
        # Read as every transport reads it (adapters/access/auth.py): a token is UTF-8,
        # whatever the server decoded.
        presented = bearer_token(dict(request.scope["headers"]))
        # A login's token is checked again on every page: one that is no longer an
        # operator's closes the console to its logins too.
        presented = presented or logins.token_of(request.cookies.get(COOKIE))
        grant = tokens.grant_for(presented)
        return grant is not None and grant.is_operator

    @app.middleware("http")
    async def gate(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path.removeprefix(request.scope.get("root_path", ""))
        if path in {"/login", "/static/console.css"} or granted(request):
            return await call_next(request)
        if request.headers.get("authorization") or request.cookies.get(COOKIE):
            presented = bearer_token(dict(request.scope["headers"]))
            limiter.failed(*attempt_keys(client_of(request), presented))
        return RedirectResponse("/console/login", status_code=303, headers=SECURITY_HEADERS)

    def log_in(request: Request, token: str, client: str) -> Response:
        grant = tokens.grant_for(token)
        if grant is None or not grant.is_operator:
            # Only a token that failed meets the limit: a valid one is never refused.
            keys = attempt_keys(client, token)
            wait = limiter.retry_after(*keys)
            if wait is not None:
                return render(
                    "login.html", code=429, message=f"Too many attempts; retry in {wait} s."
                )
            limiter.failed(*keys)
            message = "That token does not open the console (an operator token is needed)."
            return render("login.html", code=401, message=message)
        response = RedirectResponse("/console/", status_code=303, headers=SECURITY_HEADERS)
        # A replaced login (a second login in the same browser) ends the first.
        logins.close(request.cookies.get(COOKIE))
        response.set_cookie(
            COOKIE,
            logins.open(token),
            httponly=True,
            samesite="strict",
            path="/console",
            max_age=LOGIN_SECONDS,
            secure=not reached_on_loopback(request),
        )
        return response

    @app.post("/logout")
    async def log_out(request: Request) -> Response:
        logins.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/console/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(
            COOKIE,
            path="/console",
            httponly=True,
            samesite="strict",
            secure=not reached_on_loopback(request),
        )
        return response

    @app.get("/static/console.css", include_in_schema=False)
    async def console_css() -> Response:
        # Served from the package itself (read once): the one file the pages link to.
        headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=3600"}
        return Response(stylesheet, media_type="text/css", headers=headers)

    @app.get("/login", response_class=HTMLResponse)
    async def login_page(
        request: Request, code: str | None = None, token: str | None = None
    ) -> Response:
        client = client_of(request)
        if token:
            # Never taken from an address (browser history, access logs): the form posts it.
            message = "A token in a link is not taken: paste it in the form below."
            return render("login.html", code=400, message=message)
        if code:
            redeemed = logins.redeem(code[:MAX_CODE_LENGTH])
            if redeemed is None:
                keys = attempt_keys(client, None)[:1]
                wait = limiter.retry_after(*keys)
                if wait is not None:
                    return render(
                        "login.html", code=429, message=f"Too many attempts; retry in {wait} s."
                    )
                limiter.failed(*keys)
                message = "That login link was used already or has expired."
                return render("login.html", code=401, message=message)
            return log_in(request, redeemed, client)
        return render("login.html", message=None)

    @app.post("/login")
    async def login_form(request: Request) -> Response:
        client = client_of(request)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > LOGIN_BODY_BYTES:
                return render("login.html", code=413, message="The form was too large.")
        token = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0].strip()
        return log_in(request, token, client)

    @app.get("/", response_class=HTMLResponse)
    async def sessions(
        q: str | None = None,
        status: str = "active",
        kind: str | None = None,
        agent: str | None = None,
        after: str | None = None,
    ) -> Response:
        chosen = status if status in STATUSES else None
        found = await store.read(
            partial(
                page_data.sessions_page,
                search=q,
                status=chosen,
                kind=kind or None,
                agent_id=agent or None,
                after=after,
            )
        )
        # The agent is typed, not picked: listing every agent id is a scan of the rows.
        filters = {"q": q or "", "status": status, "kind": kind or "", "agent": agent or ""}
        return render(
            "sessions.html",
            page=found,
            filters=filters,
            statuses=STATUSES,
            kinds=("main", "group", "cron", "hook", "node", "other"),
            more_query="&".join(f"{k}={quote(v, safe='')}" for k, v in filters.items() if v),
        )

    @app.get("/sessions/{key:path}", response_class=HTMLResponse)
    async def session(key: str) -> Response:
        try:
            canonical = rules.canonical(key)
        except InvalidSessionKey as error:
            return render("missing.html", code=404, what=str(error))
        detail = await store.read(page_data.session_detail, config, canonical)
        if detail is None:
            return render("missing.html", code=404, what=f"Session not found: {canonical}")
        return render("session.html", detail=detail)

    @app.get("/exchanges/{exchange_id}", response_class=HTMLResponse)
    async def exchange(exchange_id: str) -> Response:
        try:
            first, entries = await store.read(
                page_data.exchange_entries, UUID(exchange_id), redactor
            )
        except (ValueError, LookupError):
            return render("missing.html", code=404, what=f"Exchange not found: {exchange_id}")
        data = first.data
        title = f"Exchange {data['requester_key']} → {data['target_key']}"
        svg = sequence_svg(exchange_sequence(entries), title)
        return render("exchange.html", first=first, entries=entries, svg=svg, title=title)

    @app.get("/traces/{trace_id}", response_class=HTMLResponse)
    async def trace(trace_id: str) -> Response:
        found = await store.read(page_data.trace_of, trace_id, redactor)
        if found is None:
            return render("missing.html", code=404, what=f"Trace not found: {trace_id}")
        return render("trace.html", trace=found, children=page_data.tree_children(found))

    @app.get("/runs", response_class=HTMLResponse)
    async def runs(
        status: str | None = None,
        # A log position: a 64-bit integer in the stores (a larger one was a 500).
        before: Annotated[int | None, Query(ge=0, le=MAX_POSITION)] = None,
    ) -> Response:
        chosen = status if status in RUN_STATUSES else None
        rows, next_before = await store.read(
            partial(page_data.runs_page, status=chosen, before=before)
        )
        return render(
            "runs.html",
            rows=rows,
            next_before=next_before,
            status=chosen or "",
            statuses=RUN_STATUSES,
        )

    @app.get("/refusals", response_class=HTMLResponse)
    async def refusals() -> Response:
        return render("refusals.html", entries=await store.read(page_data.refusals, redactor))

    @app.get("/schedules", response_class=HTMLResponse)
    async def schedules() -> Response:
        found = await store.read(page_data.schedules, redactor)
        return render("schedules.html", schedules=found)

    @app.get("/store", response_class=HTMLResponse)
    async def integrity(check: bool = False) -> Response:
        # Verifying reads the whole log: only when asked, never on a page load; on a
        # reader thread, as every page's reads.
        report, latest = await store.read(_integrity, check)
        return render(
            "store.html",
            report=report,
            checkpoint=latest[0].statement if latest else None,
            location=store.location,
        )

    return app


def reached_on_loopback(request: Request) -> bool:
    """Was the console asked for at a loopback address (``http://127.0.0.1:…``,
    ``localhost``)? Only there may its cookie go without ``Secure``: anywhere else the
    way in should be TLS (a proxy in front), and the cookie must never travel in clear."""
    host = request.url.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _integrity(store: Store, check: bool) -> tuple[Any, list[Any]]:
    """The verification report (when asked) and the latest signed checkpoint (ADR 0016)."""
    log = StoreAuditLog(store)  # type: ignore[arg-type]
    return (verify(log) if check else None), log.checkpoints(limit=1)
