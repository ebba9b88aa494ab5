"""Runs over MCP (ADR 0026): resources to read and follow them, a tool to cancel one.

- ``sessionwire://runs``: the runs the server's session may see, newest first, as JSON
  (``{"runs": [...]}``, ``gw.runs``); a query narrows it the way ``GET /v1/runs`` does:
  ``sessionwire://runs?status=running&session=KEY&trace=ID&limit=N``.
- ``sessionwire://runs/{runId}`` (a resource template): one run as JSON (``gw.run``).
  A run the session may not see is "not found" (-32002), exactly like a missing one.
- ``resources/subscribe`` on a run's URI: ``notifications/resources/updated`` for that
  URI each time its status changes, until it has ended. The run's row is read from the
  runs read model on the gateway clock, so a run another gateway process executes (on
  PostgreSQL) is followed as well.
- ``runs_cancel``: a tool (an agent's model can call it; a resource cannot change
  anything) answering ``{"status": "ok", "tool": "runs_cancel", "run": {...}}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
from mcp import types
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl
from sessionwire.application.gateway import GatewayService
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.in_flight import Owner
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
        inputSchema=CANCEL_SCHEMA,
        annotations=types.ToolAnnotations(
            readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
        ),
    )


def run_uri(run_id: str) -> str:
    return f"{RUNS_URI}/{run_id}"


def not_found(uri: str) -> McpError:
    return McpError(
        types.ErrorData(code=RESOURCE_NOT_FOUND, message="Resource not found", data={"uri": uri})
    )


def invalid(message: str) -> McpError:
    return McpError(types.ErrorData(code=types.INVALID_PARAMS, message=message))


def run_id_of(uri: str) -> str | None:
    """The run id a run's URI names; None for any other URI."""
    prefix = RUNS_URI + "/"
    if not uri.startswith(prefix):
        return None
    run_id = uri[len(prefix) :]
    return run_id if run_id and "/" not in run_id and "?" not in run_id else None


class RunResources:
    """The runs resources and the cancel tool of one MCP server (one session)."""

    def __init__(self, gateway: GatewayService, requester: str) -> None:
        self.gateway = gateway
        self.requester = requester
        self._watches: dict[str, asyncio.Task[None]] = {}

    # Listing and reading ----------------------------------------------------------------

    async def list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                uri=RUNS_URI,
                name="runs",
                title="Runs",
                description=(
                    "The agent runs this session may see, newest first (JSON). Narrow it "
                    "with ?status=&session=&trace=&limit= as GET /v1/runs does."
                ),
                mimeType=JSON,
            )
        ]

    async def list_templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uriTemplate=RUN_URI_TEMPLATE,
                name="run",
                title="Run",
                description=(
                    "One agent run (JSON): status queued, running, ok, error, timeout or "
                    "cancelled. Subscribe to hear of each change of its status."
                ),
                mimeType=JSON,
            )
        ]

    async def read(self, uri: Any) -> list[ReadResourceContents]:
        text = str(uri)
        run_id = run_id_of(text)
        if run_id is not None:
            found = await self.gateway.run(run_id, requester=self.requester)
            if found is None:
                raise not_found(text)
            return [_json_contents(found)]
        parts = urlsplit(text)
        if f"{parts.scheme}://{parts.netloc}{parts.path}" != RUNS_URI or parts.fragment:
            raise not_found(text)
        return [_json_contents(await self._list(parts.query))]

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

    async def subscribe(self, uri: Any, session: ServerSession) -> None:
        text = str(uri)
        run_id = run_id_of(text)
        if run_id is None:
            raise invalid(f"only a run can be subscribed to ({RUN_URI_TEMPLATE}), not {text!r}")
        found = await self.gateway.run(run_id, requester=self.requester)
        if found is None:
            raise not_found(text)
        if text in self._watches:
            return
        self._watches[text] = self.gateway.in_flight.start(
            self._watch(text, run_id, found["status"], session),
            Owner("mcp-subscription", found["runId"]),
        )

    async def unsubscribe(self, uri: Any) -> None:
        watch = self._watches.pop(str(uri), None)
        if watch is not None:
            watch.cancel()

    async def _watch(self, uri: str, run_id: str, status: str, session: ServerSession) -> None:
        try:
            while status in ("queued", "running"):
                # Parked: a subscriber's look at the clock is no work of the gateway's own.
                await self.gateway.in_flight.sleep(WATCH_SECONDS, parked=True)
                found = await self.gateway.run(run_id, requester=self.requester)
                if found is None or found["status"] == status:
                    continue
                status = found["status"]
                await session.send_resource_updated(AnyUrl(uri))
                log.debug("mcp run updated", uri=uri, status=status)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as error:
            # The client went away: nobody left to tell.
            log.debug("mcp run watch ended", uri=uri, error=type(error).__name__)
        finally:
            if self._watches.get(uri) is asyncio.current_task():
                del self._watches[uri]

    def close(self) -> None:
        for watch in self._watches.values():
            watch.cancel()
        self._watches.clear()

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


def _json_contents(value: dict[str, Any]) -> ReadResourceContents:
    return ReadResourceContents(content=json.dumps(value, ensure_ascii=False), mime_type=JSON)
