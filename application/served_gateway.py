"""What a transport reaches beyond the public ``Gateway`` (ADR 0043): a narrow port.

HTTP, MCP, A2A and the console take the public ``Gateway`` (``adapters/bootstrap.py``)
and call its coroutines (``call_tool``, ``run``, ``runs``, ``cancel_run``, ``subscribe``,
``tool_schemas``) as any embedding host does. What serving needs besides — the config
it was opened with, its clock, the gateway methods and remote tasks built on the
service, a callback's tool call, the in-flight registry a transport's own watchers join,
the store for reads — is named here, member by member, so a transport never holds the
whole ``GatewayService`` (its run engine, drivers, resume, close).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.gateway import GatewayService, RunNotInFlight
from sessionwire.application.gateway_methods import GatewayMethods
from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.remote_tasks import RemoteTasks
from sessionwire.application.tools.results import ToolError
from sessionwire.application.tools.run_input import RunInputResult

T = TypeVar("T")


class ServedGateway:
    """The serving side of one open gateway, for the transports that serve it."""

    def __init__(self, service: GatewayService) -> None:
        self._service = service

    @property
    def config(self) -> GatewayConfig:
        """The configuration the gateway was opened with (key rules, HTTP limits...)."""
        return self._service.config

    @property
    def clock(self) -> Clock:
        """The gateway's clock: a transport's own waits (an event stream's heartbeat)."""
        return self._service.clock

    @property
    def in_flight(self) -> InFlight:
        """The registry of the gateway's tasks: a transport's watcher (an MCP run
        subscription) runs as registered work, stopped when the gateway closes."""
        return self._service.in_flight

    @property
    def reads(self) -> AsyncStore:
        """The store, for reads only: the console's pages are read from it."""
        return self._service.store

    async def read(self, read: Callable[..., T], *args: Any) -> T:
        """``read(store, *args)`` on a store reader thread (metrics are collected there:
        the gauges read the store)."""
        return await self._service.store.read(read, *args)

    async def sealed_position(self) -> int:
        """The sealed log's last position: readiness, and a stream that starts now."""
        return await self._service.store.sealed_position()

    def run_token_refusal(self, requester: str, run_token: str) -> str | None:
        """Why ``run_token`` names no turn in flight of the session ``requester``
        (canonical key), or None when it does; an in-memory look, no store read."""
        try:
            self._service.turn_for(requester, run_token)
        except RunNotInFlight as refused:
            return str(refused)
        return None

    async def call_tool(
        self, requester: str, name: str, params: Any, *, run_token: str | None = None
    ) -> dict[str, Any]:
        """A tool call over a transport an agent calls back on (HTTP, MCP): without a
        token it is attributed to the requester's run in progress (ADR 0034)."""
        return await self._service.call_tool(
            requester, name, params, run_token=run_token, callback=True
        )

    async def answer_task(
        self, run_id: str, text: str, *, by: str | None
    ) -> RunInputResult | ToolError:
        """The answer to a waiting run over a transport that has checked the caller may
        see the run's task itself (A2A, decision 33): the answer's own checks apply."""
        return await self._service.answer_unchecked(run_id, text, by=by)

    def methods(self, requester: str | None = None) -> GatewayMethods:
        """The gateway methods, an operator's (``requester`` None) or a session's."""
        return GatewayMethods(self._service, requester=requester)

    def remote_tasks(self) -> RemoteTasks:
        """Runs as remote tasks (A2A, ADR 0035)."""
        return RemoteTasks(self._service)

    def end_subscriptions(self) -> None:
        """End every open event stream (a server stopping)."""
        self._service.end_subscriptions()
