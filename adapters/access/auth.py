"""Who is calling, checked below every transport: the bearer token from the headers, the
failed-attempt limit, bounded bodies (the Gatekeeper), the grant a route receives, and
the session a bound token may act as.

The HTTP routers, MCP (adapters/mcp/) and the console import it from here; it imports
none of them (ADR 0037).
"""

import asyncio
import hashlib
import ipaddress
import time
from collections.abc import Callable, Iterable
from itertools import accumulate, count
from operator import sub
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sessionwire.adapters.access.errors import ApiError, error_response
from sessionwire.adapters.access.tokens import Grant, TokenSet
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
# The console's forms carry a token at most (its login form); nothing bigger is read there.
CONSOLE_BODY_BYTES = 8192
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs"})
SESSION_HEADER = "X-Sessionwire-Session"
CONSOLE_PREFIX = "/console"

log = library_logger("sessionwire.http")


def json_depth_exceeds(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Does ``raw`` nest arrays and objects deeper than ``limit``? Before parsing, in a
    fixed number of passes over the bytes, each linear (no regex: a string pattern that
    restarts at every quote was quadratic on ``"\\"\\"\\"…``, issue 36).

    Escapes first: pairs of backslashes, then an escaped quote, are dropped (left to
    right, as a parser pairs them; a backslash outside a string is not JSON, so a parser
    stops there and what this says of the rest does not matter). What is left between
    quotes is a string's content and is dropped too; the brackets that remain are
    counted."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(unescaped.translate(None, _NOT_SYNTAX).split(b'"')[::2])
    # Depth after each bracket: the running sum of its steps less the brackets so far.
    depths = map(sub, accumulate(outside_strings.translate(_STEP)), count(1))
    return max(depths, default=0) > limit


# Every byte but the quote and the brackets, dropped before counting.
_NOT_SYNTAX = bytes(b for b in range(256) if b not in b'"[]{}')
# An opening bracket steps 2, a closing one 0 (bytes.translate's table holds no
# negative step): the running sum less the brackets counted so far is the depth.
_STEP = bytes(2 if b in b"[{" else 0 for b in range(256))


class FailedAttempts:
    """Failed token attempts in a sliding window, counted under several keys at once (a
    client's address, the presented token's prefix), with bounded memory. It is asked
    only about a token that failed: a valid one is never refused (decision 41)."""

    def __init__(
        self,
        limit: int = MAX_FAILED_ATTEMPTS,
        window: float = FAILED_ATTEMPTS_WINDOW_SECONDS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.now = now
        self.by_key: dict[str, list[float]] = {}

    def _recent(self, key: str) -> list[float]:
        cutoff = self.now() - self.window
        recent = [t for t in self.by_key.get(key, ()) if t > cutoff]
        if recent:
            self.by_key[key] = recent[-self.limit :]
        else:
            self.by_key.pop(key, None)
        return recent[-self.limit :]

    def retry_after(self, *keys: str) -> int | None:
        """Seconds to wait before trying again under any of ``keys``, or None."""
        waits = []
        for key in keys:
            recent = self._recent(key)
            if len(recent) >= self.limit:
                waits.append(max(1, int(recent[0] + self.window - self.now()) + 1))
        return max(waits, default=None)

    def failed(self, *keys: str) -> None:
        if len(self.by_key) > 10_000:  # many keys: forget the quiet ones
            for quiet in [k for k in self.by_key if not self._recent(k)]:
                self.by_key.pop(quiet, None)
        for key in keys:
            self.by_key.setdefault(key, []).append(self.now())


# Failures are also counted per token prefix: guesses at one token from many addresses
# share it. Only a digest of the prefix is kept (a near miss of a real token must not sit
# in memory in clear).
TOKEN_PREFIX_CHARACTERS = 8


def attempt_keys(client: str, presented: str | None) -> tuple[str, str]:
    """The keys a failed attempt counts under: the client, and the token's prefix."""
    prefix = (presented or "")[:TOKEN_PREFIX_CHARACTERS]
    digest = hashlib.sha256(prefix.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"client:{client}", f"prefix:{digest}"


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip().strip('"')
    if text.startswith("["):  # Forwarded: for="[2001:db8::1]:4711"
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # 192.0.2.1:4711
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _forwarded_chain(headers: dict[bytes, bytes]) -> list[str]:
    """The addresses the forwarding headers list, nearest last (``Forwarded`` wins)."""
    forwarded = headers.get(b"forwarded")
    if forwarded is not None:
        chain = []
        for element in forwarded.decode("latin-1").split(","):
            for pair in element.split(";"):
                name, _, value = pair.partition("=")
                if name.strip().lower() == "for":
                    chain.append(value)
        return chain
    listed = headers.get(b"x-forwarded-for")
    return listed.decode("latin-1").split(",") if listed is not None else []


def client_address(scope: Scope, trusted: Iterable[Network] = ()) -> str:
    """Who is calling: the peer's address; when the peer is a proxy the config trusts
    (``http.trustedProxies``), the nearest address its forwarding headers name that is
    not itself a trusted proxy. Anyone else's forwarding headers are not read."""
    peer = scope["client"][0] if scope.get("client") else "unknown"
    networks = tuple(trusted)
    if not networks:
        return peer

    def is_trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return address is not None and any(address in network for network in networks)

    if not is_trusted(_address(peer)):
        return peer
    headers = dict(scope.get("headers") or [])
    for hop in reversed(_forwarded_chain(headers)):
        address = _address(hop)
        if address is None:
            return peer  # a hop we cannot read: believe no further
        if not is_trusted(address):
            return str(address)
    return peer


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


# What one grant may hold at once (``http.limits``); beyond it, 503 with Retry-After.
CONNECTIONS_PER_GRANT = 64
STREAMS_PER_GRANT = 8
EVENTS_PATH = "/v1/events"
# Routes that read no body: a declared one is refused before a byte of it is read.
NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
PUBLIC_METHODS = ("GET", "HEAD")


def is_event_stream(scope: Scope) -> bool:
    return bool(scope["path"] == EVENTS_PATH and scope["method"] == "GET")


class GrantSlots:
    """Requests in flight (each holds a connection) and live streams, per grant."""

    def __init__(
        self,
        connections: int = CONNECTIONS_PER_GRANT,
        streams: int = STREAMS_PER_GRANT,
        is_stream: Callable[[Scope], bool] = is_event_stream,
    ) -> None:
        self.connections = connections
        self.streams = streams
        self.is_stream = is_stream
        self.held: dict[str, int] = {}
        self.streaming: dict[str, int] = {}

    def take(self, grant: Grant, stream: bool) -> str | None:
        """Hold a slot for ``grant``; None, or what is full."""
        if self.held.get(grant.label, 0) >= self.connections:
            return f"this token already holds {self.connections} requests open"
        if stream and self.streaming.get(grant.label, 0) >= self.streams:
            return f"this token already holds {self.streams} event streams open"
        self.held[grant.label] = self.held.get(grant.label, 0) + 1
        if stream:
            self.streaming[grant.label] = self.streaming.get(grant.label, 0) + 1
        return None

    def give_back(self, grant: Grant, stream: bool) -> None:
        for counts, taken in ((self.held, True), (self.streaming, stream)):
            if taken:
                left = counts.get(grant.label, 0) - 1
                if left > 0:
                    counts[grant.label] = left
                else:
                    counts.pop(grant.label, None)


def declares_body(headers: dict[bytes, bytes]) -> bool:
    length = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (length is not None and length.strip() != b"0")


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


class Gatekeeper:
    """Everything before the app, in this order, each decided before any of the body is
    read: a public route (health, readiness, the API reference, Agent Cards) takes GET or
    HEAD and no body; the token, from the headers only (a valid one is never refused;
    failures are limited per client and per token prefix, the client read from
    forwarding headers only behind a trusted proxy); the grant's share of connections
    and streams; a body on a route that takes none. Then the body: at most ``limit``
    bytes, read within ``read_seconds``, nested at most ``MAX_JSON_DEPTH`` deep, replayed
    to the app."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenSet,
        limit: int,
        attempts: FailedAttempts,
        read_seconds: float = BODY_READ_SECONDS,
        refuse: Callable[[Grant], str | None] | None = None,
        trusted_proxies: Iterable[Network] = (),
        slots: GrantSlots | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.limit = limit
        self.attempts = attempts
        self.read_seconds = read_seconds
        self.refuse = refuse
        self.trusted_proxies = tuple(trusted_proxies)
        self.slots = slots if slots is not None else GrantSlots()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        path = scope["path"]
        client = client_address(scope, self.trusted_proxies)
        scope.setdefault("state", {})["client"] = client
        if path in PUBLIC_PATHS or is_agent_card_path(path):
            await self._public(scope, receive, send, headers)
            return
        if is_console_path(path):  # it checks its own tokens (a cookie or a header)
            await self._with_body(scope, receive, send, headers)
            return
        presented = bearer_token(headers)
        grant = self.tokens.grant_for(presented)
        if grant is None:
            await self._refused(scope, receive, send, attempt_keys(client, presented))
            return
        refusal = self.refuse(grant) if self.refuse is not None else None
        if refusal is not None:
            await error_response(403, "forbidden", refusal)(scope, receive, send)
            return
        scope["state"]["grant"] = grant
        stream = self.slots.is_stream(scope)
        full = self.slots.take(grant, stream)
        if full is not None:
            log.info("request refused: the grant's share is in use", grant=grant.label)
            await error_response(503, "unavailable", f"{full}; retry later", {"Retry-After": "1"})(
                scope, receive, send
            )
            return
        try:
            await self._with_body(scope, receive, send, headers)
        finally:
            self.slots.give_back(grant, stream)

    async def _public(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        if scope["method"] not in PUBLIC_METHODS:
            await error_response(
                405,
                "method_not_allowed",
                f"{scope['path']} answers GET and HEAD only",
                {"Allow": ", ".join(PUBLIC_METHODS)},
            )(scope, receive, send)
            return
        if declares_body(headers):
            await self._no_body_taken(scope, receive, send)
            return
        await self.app(scope, _no_body, send)

    async def _refused(
        self, scope: Scope, receive: Receive, send: Send, keys: tuple[str, ...]
    ) -> None:
        wait = self.attempts.retry_after(*keys)
        if wait is not None:
            await error_response(
                429,
                "too_many_requests",
                f"too many failed token attempts; retry in {wait} s",
                {"Retry-After": str(wait)},
            )(scope, receive, send)
            return
        self.attempts.failed(*keys)
        log.info("request refused: bad or missing token", path=scope["path"])
        await error_response(
            401,
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer <token>)",
            {"WWW-Authenticate": "Bearer"},
        )(scope, receive, send)

    async def _no_body_taken(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(
            413, "too_large", f"{scope['method']} {scope['path']} takes no request body"
        )(scope, receive, send)

    async def _with_body(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        if scope["method"] in NO_BODY_METHODS:
            if declares_body(headers):
                await self._no_body_taken(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        limit = (
            min(self.limit, CONSOLE_BODY_BYTES) if is_console_path(scope["path"]) else self.limit
        )
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._too_large(scope, receive, send, limit)
            return
        try:
            async with asyncio.timeout(self.read_seconds):
                body = await self._read(receive, limit)
        except TimeoutError:
            await error_response(
                408, "request_timeout", f"the body was not sent within {self.read_seconds:g} s"
            )(scope, receive, send)
            return
        if body is None:  # the client went away
            return
        if len(body) > limit:
            await self._too_large(scope, receive, send, limit)
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

    async def _read(self, receive: Receive, limit: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > limit:  # stop reading: the answer is 413 whatever follows
                break
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = error_response(413, "too_large", f"request body larger than {limit} bytes")
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
