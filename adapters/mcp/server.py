"""The session tools over the Model Context Protocol (the official ``mcp`` SDK, 2.x),
and the runs they start (adapters/mcp/runs.py, ADR 0026).

The SDK's low-level server, its handlers given to its constructor, serves both protocol
eras on one connection: a client that opens with ``initialize`` gets a handshake
revision (``2025-11-25`` and older), one that probes ``server/discover`` the stateless
revision (``2026-07-28``); ``--http`` is its stateless streamable HTTP transport.

One server speaks for one session: the requester is fixed when the server is built, and
no tool parameter names it, so an agent connected to the server cannot act as another
session. Tools are listed with the gateway's own JSON Schemas (``tool_schemas()``), and
arguments go to ``call_tool`` unvalidated by the SDK so that a bad argument gets the
gateway's own error text, exactly as through the Python API or the CLI.

An agent calling back during its own turn puts its ``RunRequest.run_token`` in the
call's ``_meta`` under ``sessionwire/run``: the call joins its run's chain and hop limit;
a token of no run in flight for the server's session is refused (``forbidden``).

Runs are resources: ``sessionwire://runs`` and ``sessionwire://runs/{runId}`` (JSON),
a run followed by ``notifications/resources/updated`` on each change of its status:
``subscriptions/listen`` at the stateless revision, over stdio and HTTP alike (the SDK's
HTTP transport answers a listen, and only a listen, with an event stream of its own
while it answers everything else as JSON); ``resources/subscribe`` at a handshake
revision over stdio only (stateless HTTP keeps no connection open to notify on); the
``runs_cancel`` tool cancels one. Not MCP tasks: the SDK implements no
``io.modelcontextprotocol/tasks`` extension (ADR 0026).

A waited ``sessions_send`` whose run asks for input asks the client by elicitation when
it declared the capability (adapters/mcp/elicitation.py): the call answers an
``InputRequiredResult`` at the stateless revision, and sends ``elicitation/create`` at a
handshake revision over stdio; the accepted answer is ``run_input``'s.

A result travels as JSON text content and as structured content; a refusal (status
``error`` or ``forbidden``) is flagged ``isError`` and still carries the JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from types import FrameType
from typing import Any

import uvicorn
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from sessionwire.adapters.access.auth import (
    MAX_BODY_BYTES,
    FailedAttempts,
    Gatekeeper,
    GrantSlots,
)
from sessionwire.adapters.access.header_deadline import header_deadline
from sessionwire.adapters.access.tokens import Grant, TokenSet
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.mcp.elicitation import RunElicitation
from sessionwire.adapters.mcp.runs import CANCEL_TOOL, RunResources, cancel_tool
from sessionwire.application.config.gateway_config import HttpConfig
from sessionwire.application.library_logging import library_logger
from sessionwire.application.tools.registry import REGISTRY
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

log = library_logger("sessionwire.mcp")

REFUSED = frozenset({"error", "forbidden"})
HTTP_PATH = "/mcp"
RUN_META = "sessionwire/run"

Context = ServerRequestContext[Any, Any]

__all__ = ["HTTP_PATH", "build_server", "serve_http", "serve_stdio", "tool_definitions"]


def _version() -> str:
    try:
        return version("sessionwire")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def tool_definitions(gateway: Gateway) -> list[types.Tool]:
    """The registry's MCP tools, their input schemas exactly ``tool_schemas()``'s and their
    hints the registry's (for hosts deciding what to confirm with a user)."""
    schemas = {schema["name"]: schema for schema in gateway.tool_schemas()}
    return [
        types.Tool(
            name=spec.name,
            description=schemas[spec.name]["description"],
            input_schema=schemas[spec.name]["parameters"],
            annotations=types.ToolAnnotations(
                read_only_hint=spec.hints.read_only,
                destructive_hint=spec.hints.destructive,
                idempotent_hint=spec.hints.idempotent,
                open_world_hint=spec.hints.open_world,
            ),
        )
        for spec in REGISTRY.on("mcp")
    ]


def tool_result(result: dict[str, Any]) -> types.CallToolResult:
    """A gateway tool result as an MCP result: JSON text plus structured content."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error=result.get("status") in REFUSED,
    )


def _run_token(meta: Mapping[str, Any] | None) -> str | None:
    """The run token the call's ``_meta`` carries under ``sessionwire/run``: an agent
    calling back during its turn names its run in flight (RunRequest.run_token), so the
    call joins that run's chain and hop limit (decision 17)."""
    token = (meta or {}).get(RUN_META)
    if token is None or isinstance(token, str):
        return token
    return ""  # not a token at all: refused as naming no run, never silently unlinked


def build_server(
    gateway: Gateway,
    requester: str,
    *,
    subscriptions: bool = True,
    runs: RunResources | None = None,
) -> Server[Any]:
    """An MCP server whose every tool call runs as the session ``requester``. A run's
    resource can be followed by ``subscriptions/listen`` at the stateless revision
    (2026-07-28) on every transport (the listen's own response is its stream); with
    ``subscriptions`` (a connection that stays open to notify on: stdio, not stateless
    HTTP) by ``resources/subscribe`` at a handshake revision too. ``runs``: the run
    resources to serve (the caller keeps them to ``close()`` when it stops serving);
    new ones for ``requester`` by default."""
    tools = [*tool_definitions(gateway), cancel_tool()]
    runs = runs if runs is not None else RunResources(gateway, requester)
    elicitation = RunElicitation(gateway, requester)
    bound = log.bind(requester=requester)

    async def list_tools(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        # The SDK's low-level server validates no arguments: a bad one gets the gateway's
        # own message, as through the CLI or Python.
        arguments = params.arguments if params.arguments is not None else {}
        if RunElicitation.is_answer(params):
            # A call retried with the client's answer to a waiting run (elicitation.py);
            # a declined one is not asked again.
            asked: dict[str, Any] | types.InputRequiredResult = await elicitation.answer(params)
        elif params.name == CANCEL_TOOL:
            asked = await runs.cancel(arguments)
        else:
            token = _run_token(params.meta)
            result = await gateway.served.call_tool(
                requester, params.name, arguments, run_token=token
            )
            asked = await elicitation.ask(ctx, result)
        if isinstance(asked, types.InputRequiredResult):
            bound.debug("mcp tool call asks by elicitation", tool=params.name)
            return asked
        bound.debug("mcp tool call", tool=params.name, status=asked.get("status"))
        return tool_result(asked)

    async def list_resources(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=runs.list_resources())

    async def list_templates(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=runs.list_templates())

    async def read_resource(
        ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=await runs.read(params.uri))

    async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await runs.subscribe(params.uri, ctx.session)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: Context, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await runs.unsubscribe(params.uri)
        return types.EmptyResult()

    following: dict[str, Any] = {"on_subscriptions_listen": runs.listen}
    if subscriptions:
        following |= {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe}
    return Server(
        "sessionwire",
        version=_version(),
        instructions=(
            f"Session tools of a sessionwire gateway. You act as the session {requester!r}: "
            "list sessions, read their history, send into them, spawn sub-agents. The "
            "runs they start are resources (sessionwire://runs/{runId}); runs_cancel "
            "stops one."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        **following,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve on this process's stdin and stdout until the client closes them."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def http_app(
    server: Server[Any],
    host: str,
    port: int,
    tokens: TokenSet,
    requester: str,
    same_session: Callable[[str], bool],
    http: HttpConfig | None = None,
) -> ASGIApp:
    """The MCP streamable HTTP transport at ``/mcp``, behind the HTTP gateway's
    Gatekeeper: a bearer token from ``tokens`` (an operator's, or one bound to the
    server's session ``requester``), checked before the body is read."""
    # Host and Origin headers are checked: a web page cannot reach a loopback server
    # through DNS rebinding.
    names = {host, "127.0.0.1", "localhost"} if host in {"127.0.0.1", "localhost"} else {host}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{port}" for name in sorted(names)],
        allowed_origins=[f"http://{name}:{port}" for name in sorted(names)],
    )
    manager = StreamableHTTPSessionManager(
        app=server, json_response=True, stateless=True, security_settings=security
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route(HTTP_PATH, _Endpoint(manager))], lifespan=lifespan)

    def refuse(grant: Grant) -> str | None:
        if grant.session is None or same_session(grant.session):
            return None
        return f"this token acts only as the session {grant.session!r}, not {requester!r}"

    http = http if http is not None else HttpConfig()
    return Gatekeeper(
        app,
        tokens=tokens,
        limit=MAX_BODY_BYTES,
        attempts=FailedAttempts(),
        refuse=refuse,
        trusted_proxies=http.trusted_networks(),
        slots=GrantSlots(http.limits.connectionsPerGrant, http.limits.streamsPerGrant),
    )


class _Endpoint:
    """The transport as a plain ASGI app (Starlette routes an object, not a function, so)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


async def serve_http(
    server: Server[Any],
    host: str,
    port: int,
    tokens: TokenSet,
    requester: str,
    same_session: Callable[[str], bool],
    http: HttpConfig | None = None,
    stopping: Callable[[], None] = lambda: None,
) -> None:
    """Serve streamable HTTP on ``http://host:port/mcp`` until SIGINT or SIGTERM;
    ``stopping`` is called first thing then (it ends the open listens: uvicorn waits
    for every response to end before it stops)."""
    config = uvicorn.Config(
        http_app(server, host, port, tokens, requester, same_session, http),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        log_config=None,
        timeout_keep_alive=5,
        http=header_deadline(),
        # Client addresses come from forwarding headers only behind http.trustedProxies
        # (the Gatekeeper reads them); uvicorn's own reading trusts loopback.
        proxy_headers=False,
    )
    await _StoppableServer(
        config, url=f"http://{host}:{port}{HTTP_PATH}", stopping=stopping
    ).serve()


# The line on stderr that says the HTTP transport accepts connections.
LISTENING = "sessionwire mcp: listening on"


class _StoppableServer(uvicorn.Server):
    """uvicorn, except that SIGINT and SIGTERM end ``serve()`` without re-raising the
    signal afterwards: the gateway still closes its store, and exits 0. Once its port
    is open it says so on stderr (what a supervisor or a test waits for)."""

    def __init__(self, config: uvicorn.Config, *, url: str, stopping: Callable[[], None]) -> None:
        super().__init__(config)
        self.url = url
        self.stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn waits for every response to end; a listen's ends only when it does.
        self.stopping()
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            print(f"{LISTENING} {self.url}", file=sys.stderr, flush=True)
            log.info("mcp http listening", url=self.url)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, self.handle_exit, number, None)
        try:
            yield
        finally:
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(number)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.should_exit = True
