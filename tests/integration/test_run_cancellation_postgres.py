"""A cancel recorded by one gateway stops the runtime call another gateway runs, on one
PostgreSQL database (ADR 0017): the owner polls for cancellations of its in-flight runs
on its real clock. Real time here, bounded by deadlines, never by a sleep."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.runtime import AgentRuntime

MAIN = "agent:main:main"
A = "agent:main:work:a"
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
# The owner notices within a second (it polls every 0.25 s).
STOPPED_WITHIN_SECONDS = 1.0
# Far longer than anything here takes: reaching it means something hangs.
HANG_SECONDS = 60


class WaitsLong(AgentRuntime):
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.run_ids: list[str] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP")
        self.run_ids.append(request.run_id)
        self.started.set()
        try:
            await request.clock.sleep(HANG_SECONDS * 2)
        except asyncio.CancelledError:
            self.stopped.set()
            raise
        return RunReply(text="finished after all")


async def test_a_cancel_recorded_by_another_gateway_stops_the_owners_runtime_call(
    postgres_url: str,
) -> None:
    agents = WaitsLong()
    config = GatewayConfig.load({**QUIET, "agents": {"defaults": {"timeoutSeconds": 600}}})
    owner = await Gateway.open(config=config, store=postgres_url, runtime=agents)
    # The other process: opens the same database, carries on none of the owner's work.
    other = await Gateway.open(config=config, store=postgres_url, resume=False)
    try:
        await owner.record_message(A, role="user", content="(opened)")
        send = asyncio.create_task(
            owner.call_tool(
                MAIN, "sessions_send", {"sessionKey": A, "message": "long", "timeoutSeconds": 300}
            )
        )
        await asyncio.wait_for(agents.started.wait(), HANG_SECONDS)
        (run_id,) = agents.run_ids

        answer = await other.cancel_run(run_id, "stopped from elsewhere")
        assert answer is not None
        assert (answer["cancelled"], answer["status"]) == (True, "cancelled")
        recorded = time.monotonic()
        await asyncio.wait_for(agents.stopped.wait(), STOPPED_WITHIN_SECONDS)
        assert time.monotonic() - recorded <= STOPPED_WITHIN_SECONDS

        result = await asyncio.wait_for(send, HANG_SECONDS)
        assert result["status"] == "cancelled"
        assert result["error"] == "run cancelled: stopped from elsewhere"
        events = [type(e).__name__ for e in store_of(owner).stream(UUID(run_id))]
        assert events.count("RunCancelled") == 1
        assert "RunCompleted" not in events
        assert await owner.run(run_id) == await other.run(run_id)
    finally:
        await other.close()
        await owner.close()


async def test_a_gateway_on_a_virtual_clock_starts_no_cancel_watch(postgres_url: str) -> None:
    # One process on a VirtualClock: its cancels stop its calls directly; no polling task.
    from sessionwire.testing import VirtualClock

    agents = WaitsLong()
    gw = await Gateway.open(
        config=GatewayConfig.load(QUIET), store=postgres_url, runtime=agents, clock=VirtualClock()
    )
    try:
        await gw.record_message(A, role="user", content="(opened)")
        await gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": A, "message": "x", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        assert agents.run_ids
        assert not any(
            line.startswith("cancel-watch") for line in internals(gw).in_flight.snapshot()
        )
    finally:
        await gw.close()
