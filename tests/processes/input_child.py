"""A gateway process for the input crash tests: a run that asks, an answer, a kill.

    python -m tests.processes.input_child STORE ask [waiting]
    python -m tests.processes.input_child STORE answer RUN_ID [accepted|turn]
    python -m tests.processes.input_child STORE resume

``ask`` records two sessions and sends ``deploy`` (the target's turn asks) and prints the
run id; with ``waiting`` it is killed (SIGKILL) once the run waits. ``answer`` answers
``yes``; killed right after the answer is accepted (``accepted``: the next turn is queued,
not run) or while that turn runs (``turn``: dispatched, not answered). ``resume`` opens
the store and lets the gateway finish what was left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from sessionwire import Gateway, GatewayConfig
from sessionwire.application.ports.runtime import RunReply, RunRequest
from sessionwire.testing import ScriptedRuntime

TARGET = "agent:main:ops"
SCRIPT = {
    "rules": [
        {"match": "^deploy", "ask": {"prompt": "Deploy?", "options": ["yes", "no"]}},
        {"match": "^yes$", "reply": "deployed"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class KilledInTheTurn(ScriptedRuntime):
    """Dies as the answer's turn runs (dispatched, not answered)."""

    async def run(self, request: RunRequest) -> RunReply:
        if request.message == "yes":
            _die()
        return await super().run(request)


async def main(store: str, phase: str, *rest: str) -> None:
    kill = rest[-1] if rest else None
    runtime = ScriptedRuntime.from_dict(SCRIPT)
    if kill == "turn":
        runtime = KilledInTheTurn(runtime.rules)
    gateway = await Gateway.open(config=GatewayConfig(), store=store, runtime=runtime)
    if phase == "ask":
        await gateway.record_message("main", role="user", content="hi")
        await gateway.record_message(TARGET, role="user", content="hi")
        sent = await gateway.call_tool(
            "main", "sessions_send", {"sessionKey": TARGET, "message": "deploy"}
        )
        print(sent["runId"], sent["status"], flush=True)
        await gateway.wait_idle()
        if kill == "waiting":
            _die()
    elif phase == "answer":
        answer = await gateway.provide_input(rest[0], "yes", by="main")
        print(answer["status"], flush=True)
        if kill == "accepted":
            _die()
        await gateway.wait_idle()
    else:
        await gateway.wait_idle()
    await gateway.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
