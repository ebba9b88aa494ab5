"""A gateway process that sends messages into one shared session, for the PostgreSQL
two-process test:  python -m tests.processes.sender_child STORE NAME COUNT"""

from __future__ import annotations

import asyncio
import sys

from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "reply to {message}", "delaySeconds": 0.02},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
# Written before visibility scopes (decision 28): a group sends to a group, as then.
CONFIG = {
    "session": {"agentToAgent": {"maxPingPongTurns": 0}},
    "tools": {"sessions": {"visibility": "all"}},
}


async def main(store: str, name: str, count: int) -> None:
    gateway = await Gateway.open(
        config=GatewayConfig.load(CONFIG), store=store, runtime=ScriptedRuntime.from_dict(SCRIPT)
    )
    try:
        requester = f"cron:{name}"
        await gateway.record_message(requester, role="user", content="start")
        for index in range(count):
            result = await gateway.call_tool(
                requester,
                "sessions_send",
                {"sessionKey": "main", "message": f"{name}-{index}", "timeoutSeconds": 0},
            )
            assert result["status"] == "accepted", result
        await gateway.wait_idle()
    finally:
        await gateway.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
