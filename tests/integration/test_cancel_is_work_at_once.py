"""A cancel under way is the gateway's work from its first step: a settle of the clock (or
a wait_idle) started meanwhile waits for it. Its lookup of the run is an awaited read
(decision 23): before, the cancel counted as work only after it, and the simulator's
settle took the gateway for idle with the cancel still to come (CI seeds 4 and 12)."""

from __future__ import annotations

import asyncio

from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"
WORKER = "agent:main:work:a"


class Slow(AgentRuntime):
    """Works an hour of the gateway clock before answering."""

    async def run(self, request: RunRequest) -> RunReply:
        await request.clock.sleep(3600)
        return RunReply(text="done")


async def test_a_settle_started_with_a_cancel_under_way_waits_for_the_cancel(
    clock: VirtualClock,
) -> None:
    config = GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 0}}})
    gateway = await Gateway.open(config=config, store="memory", clock=clock, runtime=Slow())
    try:
        await gateway.record_message(WORKER, role="user", content="(opened)")
        params = {"sessionKey": WORKER, "message": "work", "timeoutSeconds": 0}
        sent = await gateway.call_tool(MAIN, "sessions_send", params)
        await clock.settle()
        assert (await gateway.run(sent["runId"]) or {}).get("status") == "running"

        cancelling = asyncio.ensure_future(gateway.cancel_run(sent["runId"], "stop"))
        await clock.settle()
        assert cancelling.done(), "the settle returned with the cancel still under way"
        assert (await cancelling or {}).get("cancelled") is True
    finally:
        await gateway.close()
