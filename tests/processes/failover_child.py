"""A gateway process that dies in the middle of a run, for the failover test:

    python -m tests.processes.failover_child STORE

Opens the store, starts a run in ``agent:main:group:failover`` (``sessions_send``, fire
and forget) and, once its agent holds the run, prints ``dispatched RUN_ID``; the agent
never answers: the test kills this process with SIGKILL meanwhile.
"""

from __future__ import annotations

import asyncio
import sys

from sessionwire import AgentRuntime, Gateway, GatewayConfig, RunReply, RunRequest

MAIN = "agent:main:main"
TARGET = "agent:main:group:failover"
CONFIG = {
    "session": {"agentToAgent": {"maxPingPongTurns": 0}},
    "tools": {"sessions": {"visibility": "all"}},
}


class HoldsTheRun(AgentRuntime):
    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "primary":
            print("dispatched", request.run_id, flush=True)
            await asyncio.Event().wait()  # until the kill
        return RunReply(text="ANNOUNCE_SKIP")


async def main(store: str) -> None:
    gateway = await Gateway.open(
        config=GatewayConfig.load(CONFIG), store=store, runtime=HoldsTheRun()
    )
    for key in (MAIN, TARGET):
        await gateway.record_message(key, role="user", content="(opened)")
    sent = await gateway.call_tool(
        MAIN, "sessions_send", {"sessionKey": TARGET, "message": "go", "timeoutSeconds": 0}
    )
    assert sent["status"] == "accepted", sent
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
