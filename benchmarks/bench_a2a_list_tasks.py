"""Benchmark of A2A ``ListTasks`` (ADR 0035 amendment): the first page of 50 against the
number of the agent's remote tasks, on SQLite with a real clock. Not a test: figures for
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_a2a_list_tasks.py [--tasks 400 1600]

Half the tasks are the listing caller's, half another bound caller's (hidden from it, and
not counted). A listing reads the agent's runs whole (``totalSize`` counts only what the
caller may see); the first one loads each remote task's run once to learn its caller
(cold), later ones remember it (warm) and load only the page's runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
import uuid

from a2a.server.context import ServerCallContext
from a2a.types import (
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
)
from sessionwire import Gateway
from sessionwire.adapters.a2a.agent_cards import agent_card, served_agents
from sessionwire.adapters.a2a.server import GRANT, GatewayRequestHandler
from sessionwire.adapters.access.tokens import Grant
from sessionwire.testing import ScriptedRuntime

MAIN = Grant("main", "main#1")
OTHER = Grant("agent:main:other", "other#2")
PAGE = 50
WARM_ROUNDS = 4


async def measure(tasks: int) -> str:
    store = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    gateway = await Gateway.open(
        store=store,
        config={"agents": {"list": [{"id": "main", "default": True}]}},
        runtime=ScriptedRuntime.from_dict({"rules": [{"reply": "ok"}]}),
    )
    try:
        entry = served_agents(gateway.served.config)["main"]
        card = agent_card("main", entry, base_url="http://bench", push_notifications=False)
        handler = GatewayRequestHandler(gateway, "main", card)
        for number in range(tasks):
            grant = MAIN if number % 2 == 0 else OTHER
            message = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                context_id=f"c{number % 10}",
                parts=[Part(text=f"t{number}")],
            )
            request = SendMessageRequest(
                message=message,
                configuration=SendMessageConfiguration(return_immediately=False),
            )
            await handler.on_message_send(request, ServerCallContext(state={GRANT: grant}))
        await gateway.wait_idle()
        times = []
        for _ in range(1 + WARM_ROUNDS):
            start = time.perf_counter()
            page = await handler.on_list_tasks(
                ListTasksRequest(page_size=PAGE), ServerCallContext(state={GRANT: MAIN})
            )
            times.append(time.perf_counter() - start)
    finally:
        await gateway.close()
    return (
        f"{tasks} remote tasks ({tasks // 2} the caller's): first page of {PAGE}: "
        f"cold {times[0] * 1000:.0f} ms, warm {min(times[1:]) * 1000:.0f} ms "
        f"(best of {WARM_ROUNDS}), totalSize {page.total_size}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, nargs="+", default=[400, 1600])
    args = parser.parse_args()
    logging.disable(logging.INFO)
    for tasks in args.tasks:
        print(asyncio.run(measure(tasks)), flush=True)


if __name__ == "__main__":
    main()
