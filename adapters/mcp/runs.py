"""Runs over MCP (ADR 0026): resources to read and follow them, a tool to cancel one.

- ``sessionwire://runs``: the runs the server's session may see, newest first, as JSON
  (``{"runs": [...]}``, ``gw.runs``); a query narrows it the way ``GET /v1/runs`` does:
  ``sessionwire://runs?status=running&session=KEY&trace=ID&limit=N``.
- ``sessionwire://runs/{runId}`` (a resource template): one run as JSON (``gw.run``).
  A run the session may not see is "not found" (-32002), exactly like a missing one.
- ``resources/subscribe`` on a run's URI (a client of a handshake revision), or a
  ``subscriptions/listen`` naming it (the stateless revision, 2026-07-28):
  ``notifications/resources/updated`` for that URI each time its status changes, until
  it has ended. The run's row is read from the runs read model on the gateway clock, so
  a run another gateway process executes (on PostgreSQL) is followed as well.
- ``runs_cancel``: a tool (an agent's model can call it; a resource cannot change
  anything) answering ``{"status": "ok", "tool": "runs_cancel", "run": {...}}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.in_flight import Owner
from sessionwire.application.ports.run_read_model import NOT_ENDED
from sessionwire.application.run_views import MAX_CANCEL_REASON

log = library_logger("sessionwire.mcp")

RUNS_URI = "sessionwire://runs"
RUN_URI_TEMPLATE = "sessionwire://runs/{runId}"
JSON = "application/json"
# How often a subscribed run's row is read for a change of status (on the gateway clock).
WATCH_SECONDS = 0.25
# MCP's code for a resource that does not exist (the spec's "Resource not found").
RESOURCE_NOT_FOUND = -32002
CANCEL_TOOL = "runs_cancel"
LIST_FILTERS = {"session": "session_key", "status": "status", "trace": "trace_id"}

CANCEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "runId": {
            "type": "string",
            "description": "the run to cancel (a sessions_send/spawn runId)",
        },
        "reason": {
            "type": "string",
            "maxLength": MAX_CANCEL_REASON,
            "description": "why; recorded with the cancellation",
        },
    },
    "required": ["runId"],
    "additionalProperties": False,
}


def cancel_tool() -> types.Tool:
    return types.Tool(
        name=CANCEL_TOOL,
        description=(
            "Cancel a queued or running agent run you may see (the runId a sessions_send "
            "or sessions_spawn answered), and the runs it caused. The answer's run has "
            "cancelled true, or false with a reason when the run had already ended."
        ),
        input_schema=CANCEL_SCHEMA,
        annotations=types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )


def run_uri(run_id: str) -> str:
    return f"{RUNS_URI}/{run_id}"


def not_found(uri: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})


def invalid(message: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, message)


def run_id_of(uri: str) -> str | None:
    """The run id a run's URI names; None for any other URI."""
    prefix = RUNS_URI + "/"
    if not uri.startswith(prefix):
        return None
    run_id = uri[len(prefix) :]
    return run_id if run_id and "/" not in run_id and "?" not in run_id else None


# How a watch tells its follower that the run changed.
Notify = Callable[[], Awaitable[None]]


class RunResources:
    """The runs resources and the cancel tool of one MCP server (one session)."""

    def __init__(self, gateway: Gateway, requester: str) -> None:
        self.gateway = gateway
        self.requester = requester
        self._watches: dict[str, asyncio.Task[None]] = {}
        self._listens: set[asyncio.Task[None]] = set()
        self._listeners: set[ListenHandler] = set()

    # Listing and reading ----------------------------------------------------------------

    def list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                uri=RUNS_URI,
                name="runs",
                title="Runs",
                description=(
                    "The agent runs this session may see, newest first (JSON). Narrow it "
                    "with ?status=&session=&trace=&limit= as GET /v1/runs does."
                ),
                mime_type=JSON,
            )
        ]

    def list_templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uri_template=RUN_URI_TEMPLATE,
                name="run",
                title="Run",
                description=(
                    "One agent run (JSON): status queued, running, ok, error, timeout or "
                    "cancelled. Subscribe to hear of each change of its status."
                ),
                mime_type=JSON,
            )
        ]

    async def read(self, uri: str) -> list[types.TextResourceContents | types.BlobResourceContents]:
        run_id = run_id_of(uri)
        if run_id is not None:
            found = await self.gateway.run(run_id, requester=self.requester)
            if found is None:
                raise not_found(uri)
            return [_json_contents(uri, found)]
        parts = urlsplit(uri)
        if f"{parts.scheme}://{parts.netloc}{parts.path}" != RUNS_URI or parts.fragment:
            raise not_found(uri)
        return [_json_contents(uri, await self._list(parts.query))]

    async def _list(self, query: str) -> dict[str, Any]:
        filters: dict[str, Any] = {}
        for name, values in parse_qs(query, keep_blank_values=True).items():
            if len(values) != 1:
                raise invalid(f"give {name} once")
            if name == "limit":
                if not values[0].isdigit():
                    raise invalid(f"limit must be an integer, not {values[0]!r}")
                filters["limit"] = int(values[0])
            elif name in LIST_FILTERS:
                filters[LIST_FILTERS[name]] = values[0]
            else:
                raise invalid(f"unknown filter {name!r} (filters: status, session, trace, limit)")
        try:
            return await self.gateway.runs(**filters, requester=self.requester)
        except ValueError as error:
            raise invalid(str(error)) from None

    # Following ------------------------------------------------------------------------

    async def _visible_status(self, uri: str) -> tuple[str, str]:
        """The run id a followable URI names and its status now; refused as a read is."""
        run_id = run_id_of(uri)
        if run_id is None:
            raise invalid(f"only a run can be subscribed to ({RUN_URI_TEMPLATE}), not {uri!r}")
        found = await self.gateway.run(run_id, requester=self.requester)
        if found is None:
            raise not_found(uri)
        return str(found["runId"]), str(found["status"])

    def _follow(self, uri: str, run_id: str, status: str, tell: Notify) -> asyncio.Task[None]:
        return self.gateway.served.in_flight.start(
            self._watch(uri, run_id, status, tell), Owner("mcp-subscription", run_id)
        )

    async def subscribe(self, uri: str, session: ServerSession) -> None:
        """``resources/subscribe`` (handshake revisions): updates go out on the
        connection, as ``notifications/resources/updated``."""
        run_id, status = await self._visible_status(uri)
        if uri in self._watches:
            return

        async def tell() -> None:
            await session.send_resource_updated(uri)

        watch = self._follow(uri, run_id, status, tell)
        self._watches[uri] = watch
        watch.add_done_callback(lambda done: self._forget(uri, done))

    async def unsubscribe(self, uri: str) -> None:
        watch = self._watches.pop(uri, None)
        if watch is not None:
            watch.cancel()

    def _forget(self, uri: str, watch: asyncio.Task[None]) -> None:
        if self._watches.get(uri) is watch:
            del self._watches[uri]

    async def listen(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (the stateless revision, 2026-07-28): the request's
        own response stream carries the updates of the runs it names, until the client
        ends it. Every URI is checked first, so a hidden run refuses the whole listen
        exactly as a missing one does; the SDK's handler sends the acknowledgement and
        stamps each update with the subscription id."""
        uris = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        followed = [(uri, *await self._visible_status(uri)) for uri in uris]
        bus = InMemorySubscriptionBus()
        watches: list[asyncio.Task[None]] = []
        for uri, run_id, status in followed:

            async def tell(uri: str = uri) -> None:
                await bus.publish(ResourceUpdated(uri=uri))

            watches.append(self._follow(uri, run_id, status, tell))
        self._listens.update(watches)
        listener = ListenHandler(bus)
        self._listeners.add(listener)
        try:
            # The handler subscribes to the bus before its first await, and every watch
            # first waits a tick: no update is published before it can be delivered.
            return await listener(ctx, params)
        finally:
            self._listeners.discard(listener)
            for watch in watches:
                watch.cancel()
                self._listens.discard(watch)

    async def _watch(self, uri: str, run_id: str, status: str, tell: Notify) -> None:
        try:
            # A run waiting for input has not ended: its answer's turn is followed too.
            while status in NOT_ENDED:
                # Parked: a subscriber's look at the clock is no work of the gateway's own.
                await self.gateway.served.in_flight.sleep(WATCH_SECONDS, parked=True)
                found = await self.gateway.run(run_id, requester=self.requester)
                if found is None or found["status"] == status:
                    continue
                status = found["status"]
                await tell()
                log.debug("mcp run updated", uri=uri, status=status)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as error:
            # The client went away: nobody left to tell.
            log.debug("mcp run watch ended", uri=uri, error=type(error).__name__)

    def close(self) -> None:
        """Stop following: every watch ends, and every open listen ends gracefully
        (its result sent, its stream closed), so a server stopping need not wait for
        clients that would never end their listens."""
        for listener in self._listeners:
            listener.close()
        for watch in [*self._watches.values(), *self._listens]:
            watch.cancel()
        self._watches.clear()
        self._listens.clear()

    # Cancelling -----------------------------------------------------------------------

    async def cancel(self, arguments: Any) -> dict[str, Any]:
        refused = _cancel_refusal(arguments)
        if refused is not None:
            return {"status": "error", "tool": CANCEL_TOOL, "error": refused}
        run_id = arguments["runId"]
        found = await self.gateway.cancel_run(
            run_id, arguments.get("reason", ""), requester=self.requester
        )
        if found is None:
            return {"status": "error", "tool": CANCEL_TOOL, "error": f"Run not found: {run_id}"}
        return {"status": "ok", "tool": CANCEL_TOOL, "run": found}


def _cancel_refusal(arguments: Any) -> str | None:
    if not isinstance(arguments, dict):
        return "the arguments must be an object"
    unknown = sorted(set(arguments) - set(CANCEL_SCHEMA["properties"]))
    if unknown:
        return f"unknown parameter {unknown[0]!r}"
    if not isinstance(arguments.get("runId"), str):
        return "runId is required (a string)"
    reason = arguments.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_CANCEL_REASON:
        return f"reason must be a string of at most {MAX_CANCEL_REASON} characters"
    return None


def _json_contents(uri: str, value: dict[str, Any]) -> types.TextResourceContents:
    return types.TextResourceContents(
        uri=uri, text=json.dumps(value, ensure_ascii=False), mime_type=JSON
    )
