"""A store with something of everything the console shows, for its tests.

An operator's send into a group with two ping-pong turns and an announce whose channel
is down at first (one failed attempt, then delivered from the outbox), a sub-agent
spawned and reporting back, a refused cross-agent history read, and a secret in a
transcript (masked in the console, kept in the log).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scopes import before_scopes
from sessionwire import ChannelDelivery, Delivery, Gateway, GatewayConfig
from sessionwire.testing import ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
OPS = "agent:main:discord:group:ops"
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
TOKEN = "console-test-operator-token-0123456789abcdef"
SESSION_TOKEN = "console-test-session-token-0123456789abcdef"
SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "deploying now"},
        {"step": "reply_back", "session": OPS, "reply": "done, anything else?"},
        {"step": "reply_back", "reply": "no, thanks"},
        {"step": "announce", "reply": "ops: deploy done"},
        {"step": "subagent_task", "reply": "found it"},
        {"step": "subagent_announce", "reply": "the report"},
    ]
}


class DownOnce(ChannelDelivery):
    """A chat connector whose first call fails."""

    def __init__(self) -> None:
        self.calls = 0

    async def deliver(self, delivery: Delivery) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("channel unreachable")


@dataclass(frozen=True)
class Recorded:
    trace_id: str
    spawn_trace_id: str


async def record_scenario(store_url: str) -> Recorded:
    clock = VirtualClock(start=datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    config: dict[str, Any] = {"session": {"agentToAgent": {"maxPingPongTurns": 2}}}
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        delivery=DownOnce(),
    )
    try:
        await gw.record_message(MAIN, role="user", content="hello", channel="whatsapp", to="+1555")
        await gw.record_message(
            OPS,
            role="user",
            content=f"deploy with api_key={SECRET} please",
            channel="discord",
            chat_type="group",
            to="channel:ops",
        )
        sent = await gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": OPS, "message": "deploy?", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        await clock.advance(60)  # the outbox retries the announce
        await gw.wait_idle()
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "research the outage"})
        await gw.wait_idle()
        # Another agent's session: refused and recorded.
        await gw.call_tool(OPS, "sessions_history", {"sessionKey": "agent:other:main"})
        for n in range(60):  # more than one page of sessions
            await gw.record_message(f"agent:main:cron:job-{n:02d}", role="user", content="tick")
            await clock.advance(1)
    finally:
        await gw.close()
    return Recorded(trace_id=str(sent["runId"]), spawn_trace_id=str(spawned["runId"]))
