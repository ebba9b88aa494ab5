"""The read tools (``sessions_list``, ``sessions_history``, ``agents_list``) over a store,
without a gateway around it.

What the CLI's ``sessions list``, ``sessions history`` and ``agents list`` answer with: a
gateway would build (and import) every orchestration driver and aggregate for a call
that only reads (ADR 0036). The call is answered as ``GatewayService.call_tool``
answers it (``tool_calls.answer``: the same requester check, sub-agent gate, policy
and refusal records); what the gateway adds around a call, a telemetry span and an
in-flight count for ``wait_idle``, has no use here (no telemetry, nothing to wait for),
and no call is made from inside a run's turn.
"""

from __future__ import annotations

from typing import Any

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import ToolContext
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock, IdSource
from sessionwire.application.tool_calls import (
    READ_TOOLS,
    ToolAccess,
    ToolCall,
    answer,
    shorten,
    tool_call,
)


class ReadTools:
    """Answers the read tools' calls on an open store; ``close`` closes the store."""

    def __init__(
        self, *, store: AsyncStore, config: GatewayConfig, clock: Clock, ids: IdSource
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        # A refused read is recorded as evidence, with an id of its own.
        self.ids = ids
        self.rules = config.key_rules
        # The gateway's logger: a refusal logs the same lines whichever path answered.
        self.log = library_logger("sessionwire.gateway").bind(store=store.location)
        self.access = ToolAccess(config, store)

    async def call_tool(self, requester: str, name: str, params: Any) -> dict[str, Any]:
        """Run one read tool for the session ``requester``; never raises."""
        log = self.log.bind(tool=shorten(str(name)), requester=shorten(str(requester)))
        call = tool_call(READ_TOOLS, self.rules, requester, name)
        if not isinstance(call, ToolCall):
            return call
        context = ToolContext(
            store=self.store,
            config=self.config,
            clock=self.clock,
            requester=call.caller,
            ids=self.ids,
        )
        return await answer(call, context, params, access=self.access, log=log)

    async def close(self) -> None:
        await self.store.close()
