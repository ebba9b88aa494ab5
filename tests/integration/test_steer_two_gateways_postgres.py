"""Two PostgreSQL gateways steering into one session at once (issue 36 item 9, issue
43: it held; kept held here): every message joins the busy run exactly once, each with
its one RunSteered and its one transcript line, whichever gateway took it."""

from __future__ import annotations

import asyncio
from typing import Any

from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import VirtualClock

BUSY = "agent:main:work:busy"
PER_GATEWAY = 25
# Only a bound on a broken test: steers that never settle fail instead of hanging.
HANG_SECONDS = 60


class Busy(AgentRuntime):
    """The busy session's run works 600 s on the clock; every other turn answers."""

    async def run(self, request: RunRequest) -> RunReply:
        if request.session_key == BUSY and request.step == "primary":
            await request.clock.sleep(600)
            return RunReply(text="done")
        return RunReply(text="ANNOUNCE_SKIP")


def sender(gateway: int, n: int) -> str:
    return f"agent:main:work:g{gateway}-s{n}"


async def test_two_gateways_steering_into_one_session_join_each_message_once(
    postgres_url: str, clock: VirtualClock
) -> None:
    settings = GatewayConfig.load(
        before_scopes({"session": {"agentToAgent": {"busy": "steer", "maxPingPongTurns": 0}}})
    )
    first = await Gateway.open(config=settings, store=postgres_url, clock=clock, runtime=Busy())
    second = await Gateway.open(config=settings, store=postgres_url, clock=clock, runtime=Busy())
    try:
        await first.record_message(BUSY, role="user", content="hi")
        for g in (1, 2):
            for n in range(PER_GATEWAY):
                await first.record_message(sender(g, n), role="user", content="hi")
        started = await first.call_tool(
            sender(1, 0),
            "sessions_send",
            {"sessionKey": BUSY, "message": "work", "timeoutSeconds": 0},
        )
        assert started["status"] == "accepted"
        await asyncio.wait_for(first.wait_idle(), HANG_SECONDS)  # dispatched: running now

        async def steer(gateway: Gateway, g: int, n: int) -> dict[str, Any]:
            return await gateway.call_tool(
                sender(g, n),
                "sessions_send",
                {"sessionKey": BUSY, "message": f"steer {g}-{n}", "timeoutSeconds": 0},
            )

        answers = await asyncio.wait_for(
            asyncio.gather(
                *(steer(first, 1, n) for n in range(PER_GATEWAY)),
                *(steer(second, 2, n) for n in range(PER_GATEWAY)),
            ),
            HANG_SECONDS,
        )
        run = await first.run(started["runId"])
        events = list(store_of(first).events())
        await clock.advance(600)
        await asyncio.wait_for(first.wait_idle(), HANG_SECONDS)
        history = await first.call_tool(BUSY, "sessions_history", {"sessionKey": BUSY})
    finally:
        await second.close()
        await first.close()
    assert [answer["delivery"]["status"] for answer in answers] == ["steered"] * 2 * PER_GATEWAY
    assert {answer["runId"] for answer in answers} == {started["runId"]}
    assert run is not None
    assert run["status"] == "running"
    steered = [event for _, event in events if type(event).__name__ == "RunSteered"]
    expected = sorted(f"steer {g}-{n}" for g in (1, 2) for n in range(PER_GATEWAY))
    assert sorted(event.message for event in steered) == expected
    lines = [
        part["text"]
        for message in history["messages"]
        if message["role"] == "user"
        for part in message["content"]
        if part["text"].startswith("steer ")
    ]
    assert sorted(lines) == expected
