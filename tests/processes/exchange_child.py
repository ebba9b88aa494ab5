"""A gateway process for the crash tests: runs one agent-to-agent exchange on a store.

    python -m tests.processes.exchange_child STORE start KILL_AT
    python -m tests.processes.exchange_child STORE resume

``start`` records two sessions, sends ``ping`` from the requester to the target and
works until idle, killing itself with SIGKILL at KILL_AT (see ``KILL_POINTS``).
``resume`` opens the same store and lets the gateway finish what was left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.runtime import RunReply, RunRequest
from sessionwire.testing import ScriptedRuntime

REQUESTER = "discord:group:req"
TARGET = "discord:group:target"
# Written before visibility scopes (decision 28): a group sends to a group, as then.
CONFIG = {
    "session": {"agentToAgent": {"maxPingPongTurns": 4}},
    "tools": {"sessions": {"visibility": "all"}},
}
SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "initial"},
        {"step": "reply_back", "session": "agent:main:discord:group:req", "reply": "req-{turn}"},
        {"step": "reply_back", "session": "agent:main:discord:group:target", "reply": "tgt-{turn}"},
        {"step": "announce", "reply": "announce now"},
    ]
}


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _events_of(aggregates: tuple[Any, ...]) -> list[Any]:
    return [event for aggregate in aggregates for event in aggregate.pending_events]


# Each kill point: a test on the events a save just committed.
KILL_POINTS = {
    # After turn 1 is recorded, before turn 2's run is started.
    "before-turn-2-starts": lambda e: type(e).__name__ == "PingPongTurn" and e.turn == 1,
    # Turn 3's run is recorded (queued) but was never handed to the agent.
    "turn-3-queued": lambda e: type(e).__name__ == "RunStarted" and e.turn == 3,
    # After turn 2's run completed, before the exchange recorded turn 2.
    "after-turn-2-completed": lambda e: type(e).__name__ == "RunCompleted" and e.reply == "tgt-2",
    # After the announce reply is recorded, before it is delivered.
    "before-announce-delivery": lambda e: type(e).__name__ == "AnnounceReplied",
}


class KillingRuntime(ScriptedRuntime):
    """Dies in the middle of turn 2's run (it was dispatched, it has not answered)."""

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "reply_back" and request.turn == 2:
            _die()
        return await super().run(request)


async def main(store: str, phase: str, kill_at: str | None) -> None:
    while_running = kill_at == "while-turn-2-runs"
    runtime = (
        KillingRuntime(ScriptedRuntime.from_dict(SCRIPT).rules)
        if while_running
        else (ScriptedRuntime.from_dict(SCRIPT))
    )
    gateway = await Gateway.open(config=GatewayConfig.load(CONFIG), store=store, runtime=runtime)
    if kill_at in KILL_POINTS:
        condition = KILL_POINTS[kill_at]
        # Every save the gateway makes is awaited through its AsyncStore (decision 23).
        awaited = internals(gateway).store
        save = awaited.save

        async def save_then_maybe_die(*aggregates: Any) -> None:
            events = _events_of(aggregates)
            await save(*aggregates)
            if any(condition(event) for event in events):
                _die()

        awaited.save = save_then_maybe_die  # type: ignore[method-assign]
    try:
        if phase == "start":
            await gateway.record_message(REQUESTER, role="user", content="hi", channel="discord")
            await gateway.record_message(TARGET, role="user", content="hi", channel="discord")
            result = await gateway.call_tool(
                REQUESTER,
                "sessions_send",
                {"sessionKey": TARGET, "message": "ping", "timeoutSeconds": 0},
            )
            assert result["status"] == "accepted", result
        await gateway.wait_idle()
    finally:
        await gateway.close()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(main(arguments[0], arguments[1], arguments[2] if len(arguments) > 2 else None))
