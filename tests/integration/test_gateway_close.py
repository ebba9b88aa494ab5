"""``gateway.close()`` stops everything it started, and never hangs (issue 12: the
simulator saw a close wait forever on a task whose cleanup itself waited)."""

from __future__ import annotations

import asyncio

from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery, RunReply, RunRequest
from sessionwire.testing import ScriptedRuntime, VirtualClock

SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "done"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "posted to the group"},
    ]
}
# Far longer than a bounded close takes (its store closes on the store's thread, so it
# is not counted in loop turns); an unbounded one never finishes.
CLOSE_SECONDS = 30


class StubbornChannel(ChannelDelivery):
    """A channel whose post never returns and swallows every cancellation."""

    def __init__(self) -> None:
        self.posting = 0
        self.posted = asyncio.Event()
        self.released = asyncio.Event()

    async def deliver(self, delivery: Delivery) -> None:
        self.posting += 1
        self.posted.set()
        while not self.released.is_set():
            try:
                await self.released.wait()
            except asyncio.CancelledError:
                continue

    def release(self) -> None:
        """Let the stuck post end (the test's own cleanup: the event loop that closes after
        the test would otherwise wait for it forever)."""
        self.released.set()


async def test_close_returns_even_when_a_task_will_not_stop(clock: VirtualClock) -> None:
    channel = StubbornChannel()
    gateway = await Gateway.open(
        config=GatewayConfig(),
        store="memory",
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        delivery=channel,
    )
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message(
        "agent:main:discord:group:ops", role="user", content="hi", channel="discord"
    )
    params = {"sessionKey": "agent:main:discord:group:ops", "message": "go", "timeoutSeconds": 0}
    assert (await gateway.call_tool("main", "sessions_send", params))["status"] == "accepted"
    # The exchange's runs and its announce reach the channel through the store's thread:
    # waited for by the post itself, not by counting loop turns.
    await asyncio.wait_for(channel.posted.wait(), timeout=CLOSE_SECONDS)
    assert channel.posting == 1  # the exchange's announce is stuck in the channel

    try:
        await asyncio.wait_for(gateway.close(), timeout=CLOSE_SECONDS)
    finally:
        channel.release()


class DeafAgent:
    """A runtime that ignores cancellation: asked to stop at its run's timeout, it keeps
    waiting until the test lets it go."""

    def __init__(self) -> None:
        self.cancelled = 0
        self.released = asyncio.Event()

    async def run(self, request: RunRequest) -> RunReply:
        try:
            await request.clock.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled += 1
        while not self.released.is_set():
            try:
                await self.released.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
        return RunReply(text="too late")


async def test_a_gateway_sees_and_stops_only_its_own_abandoned_calls(
    clock: VirtualClock,
) -> None:
    # Issue 12 leftover: abandoned runtime calls were one set for the whole process, so a
    # second gateway listed the first's and its close cancelled them for 50 rounds.
    agent = DeafAgent()
    config = GatewayConfig.load({"agents": {"defaults": {"timeoutSeconds": 30}}})
    first = await Gateway.open(config=config, store="memory", clock=clock, runtime=agent)
    second = await Gateway.open(config=config, store="memory", clock=clock)
    try:
        await first.record_message("main", role="user", content="hi")
        await first.record_message("agent:main:work", role="user", content="hi")
        params = {"sessionKey": "agent:main:work", "message": "go", "timeoutSeconds": 0}
        assert (await first.call_tool("main", "sessions_send", params))["status"] == "accepted"
        await clock.advance(31)
        assert agent.cancelled == 1  # timed out, and still running
        assert len(internals(first).services.runs.abandoned_calls()) == 1

        assert internals(second).services.runs.abandoned_calls() == []
        await second.close()
        assert agent.cancelled == 1  # the other gateway's close left it alone
    finally:
        await first.close()
        agent.released.set()
