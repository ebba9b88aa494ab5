"""Slots belong to runs (issue 12, situation 1).

A run holds at most one of the ``maxConcurrent`` lane slots; a slot it lends while it
waits for a nested run comes back to that run; the exchange and spawn drivers started
from inside a turn never hold one. After any workload, at idle, every slot is free, and a
plain ``sessions_send`` into an unrelated session still runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import VirtualClock

CYCLE = ("agent:main:a", "agent:main:b", "agent:main:c")
BYSTANDER = "agent:main:bystander"
ROUNDS = 12


class Forwarder(AgentRuntime):
    """Each primary turn ``fwd N`` sends ``fwd N-1`` on round the cycle (or spawns), from
    inside its own turn, as a model calling ``sessions_send`` would."""

    def __init__(self, *, spawn: bool = False, wait_seconds: float = 30) -> None:
        self.gateway: Gateway | None = None
        self.spawn = spawn
        self.wait_seconds = wait_seconds
        self.answers: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "reply_back":
            return RunReply(text="REPLY_SKIP")
        if request.step in {"announce", "subagent_announce"}:
            return RunReply(text="ANNOUNCE_SKIP")
        assert self.gateway is not None
        words = request.message.split()
        if words[:1] == ["fwd"] and int(words[1]) > 0:
            onward = f"fwd {int(words[1]) - 1}"
            if self.spawn and request.step == "primary":
                answer = await self.gateway.call_tool(
                    request.session_key, "sessions_spawn", {"task": onward}
                )
            else:
                index = CYCLE.index(request.session_key) if request.session_key in CYCLE else 0
                answer = await self.gateway.call_tool(
                    request.session_key,
                    "sessions_send",
                    {
                        "sessionKey": CYCLE[(index + 1) % len(CYCLE)],
                        "message": onward,
                        "timeoutSeconds": self.wait_seconds,
                    },
                )
            self.answers.append(answer)
        return RunReply(text=f"did {request.message}")


async def _open(store_url: str, clock: VirtualClock, agent: Forwarder, slots: int) -> Gateway:
    config = {
        "agents": {"defaults": {"maxConcurrent": slots}},
        "session": {"agentToAgent": {"maxPingPongTurns": 0}},
    }
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)),
        store=store_url,
        clock=clock,
        runtime=agent,
    )
    agent.gateway = gateway
    for key in (*CYCLE, BYSTANDER, "agent:main:main"):
        await gateway.record_message(key, role="user", content="(opened)")
    return gateway


async def _plain_send_still_runs(gateway: Gateway, clock: VirtualClock) -> None:
    sending = asyncio.create_task(
        gateway.call_tool(
            "agent:main:main",
            "sessions_send",
            {"sessionKey": BYSTANDER, "message": "are you there", "timeoutSeconds": 30},
        )
    )
    await clock.advance(31)  # a stalled lane answers "timeout" here instead of hanging
    answer = await sending
    assert answer["status"] == "ok", answer
    assert answer["reply"] == "did are you there"


@pytest.mark.parametrize("slots", [1, 2, 4])
async def test_nested_forwarding_rounds_leave_every_slot_free(
    store_url: str, clock: VirtualClock, slots: int
) -> None:
    agent = Forwarder()
    gateway = await _open(store_url, clock, agent, slots)
    try:
        for round_ in range(ROUNDS):
            # Two nested hops (a waits on b, b on c), starting one further round the
            # cycle each round: no run ever waits on its own session.
            await gateway.call_tool(
                "agent:main:main",
                "sessions_send",
                {"sessionKey": CYCLE[round_ % 3], "message": "fwd 2", "timeoutSeconds": 0},
            )
            await clock.advance(0)
            await gateway.wait_idle()
        assert [a["status"] for a in agent.answers] == ["ok"] * (2 * ROUNDS)
        assert internals(gateway).run_engine.free_slots() == slots
        await _plain_send_still_runs(gateway, clock)
        assert internals(gateway).run_engine.free_slots() == slots
    finally:
        await gateway.close()


@pytest.mark.parametrize("slots", [1, 2, 4])
async def test_spawns_from_inside_turns_leave_every_slot_free(
    store_url: str, clock: VirtualClock, slots: int
) -> None:
    agent = Forwarder(spawn=True)
    gateway = await _open(store_url, clock, agent, slots)
    try:
        for _ in range(ROUNDS):
            await gateway.call_tool(
                "agent:main:main",
                "sessions_send",
                {"sessionKey": CYCLE[0], "message": "fwd 1", "timeoutSeconds": 0},
            )
            await clock.advance(0)
            await gateway.wait_idle()
        assert [a["status"] for a in agent.answers] == ["accepted"] * ROUNDS
        assert internals(gateway).run_engine.free_slots() == slots
        await _plain_send_still_runs(gateway, clock)
        assert internals(gateway).run_engine.free_slots() == slots
    finally:
        await gateway.close()
