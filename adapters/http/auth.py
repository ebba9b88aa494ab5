"""Who is calling, checked below every transport: the bearer token from the headers, the
failed-attempt limit, bounded bodies (the Gatekeeper), the grant a route receives, and
the session a bound token may act as.

The HTTP routers, MCP (adapters/mcp/) and the console import it from here; it imports
none of them (ADR 0037).
"""

import asyncio
import re
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sessionwire.adapters.http.errors import ApiError, error_response
from sessionwire.adapters.http.tokens import Grant, TokenSet
from sessionwire.application.library_logging import library_logger
from sessionwire.domain.keys import InvalidSessionKey, KeyRules
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
SESSION_HEADER = "X-Sessionwire-Session"
CONSOLE_PREFIX = "/console"

log = library_logger("sessionwire.http")


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


bearer = HTTPBearer(
    auto_error=False,
    description="a token given to `sessionwire serve` (operator or bound to one session)",
)


async def authenticated(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Grant:
    """The caller's grant, as a route's dependency."""
    # The Gatekeeper checked the token before the body was read; this declares the
    # scheme in the OpenAPI document and hands the grant to the route.
    grant = request.scope.get("state", {}).get("grant")
    assert isinstance(grant, Grant), "the Gatekeeper runs before every private route"
    return grant


def requester_for(grant: Grant, named: str, key_rules: KeyRules) -> str:
    """The session a tool call acts as: any the header names for an operator token;
    for a session-bound token its own (naming another is 403)."""
    named = header_text(named)
    if grant.session is None:
        return named
    if not same_session(named, grant.session, key_rules):
        raise ApiError(403, "forbidden", f"this token acts only as the session {grant.session!r}")
    return grant.session


def same_session(named: str, bound: str, key_rules: KeyRules) -> bool:
    try:
        return key_rules.canonical(named) == key_rules.canonical(bound)
    except InvalidSessionKey:
        return False
