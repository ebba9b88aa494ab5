#!/usr/bin/env python
"""Store reads and CPU of one ``sessions_send`` (issue 37 item 7). Not a test: figures for
ADR 0037's amendment and docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_send.py [--store memory|sqlite|postgres] [--sends N]

Each send goes from a channel session into one of 20 target sessions, round-robin, and
waits for the reply (``timeoutSeconds`` 30); an instant scripted agent answers, with no
ping-pong turn (``maxPingPongTurns`` 0) and the announce skipped, so a send is its
primary run and its exchange's announce run. With ``--in-turn`` each send is made from
inside a requester run's turn (the path an agent's send takes), under a trace budget
(``maxRuns`` 1000, which the sends never reach), and the figures are of that inner send.

Printed, as JSON: the reads the send call makes itself (trips to a store thread from the
call's own task, saves not counted), the reads the gateway makes from the call until it
is idle again (the runs, the exchange, the waits), and the process CPU per send (the loop
and the store's threads), the median of ``--blocks`` blocks of ``--sends`` sends each
after ``--warm`` warm-up sends. CPU time, not wall time: on a shared machine wall time
moves with the load. For an A/B, run it with each checkout's code, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from bench_stores import drop_schema, store_url
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals
from sessionwire.testing import ScriptedRuntime, VirtualClock

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

REQUESTER = "discord:group:req"
TARGETS = [f"agent:main:bench:group:t{n}" for n in range(20)]


def _script(in_turn: bool) -> dict[str, Any]:
    inner = [
        {
            "session": f"agent:main:{REQUESTER}",
            "step": "primary",
            "match": f"^{target}$",
            "tools": [
                {
                    "tool": "sessions_send",
                    "params": {"sessionKey": target, "message": "ping", "timeoutSeconds": 30},
                }
            ],
            "reply": "sent",
        }
        for target in TARGETS
    ]
    return {
        "rules": [
            *(inner if in_turn else []),
            {"step": "primary", "reply": "done"},
            {"step": "announce", "reply": "ANNOUNCE_SKIP"},
            {"reply": "REPLY_SKIP"},
        ]
    }


class ReadCounter:
    """Trips off the loop the gateway's store makes, all of them and the send call's."""

    def __init__(self, gateway: Gateway) -> None:
        self.all = 0
        self.of_call = 0
        self.call_task: asyncio.Task[Any] | None = None
        store = internals(gateway).store
        off_loop = type(store)._off_loop
        counter = self

        async def counted(self: Any, call: Any, **options: Any) -> Any:
            if options.get("a_read", True):
                counter.all += 1
                if asyncio.current_task() is counter.call_task:
                    counter.of_call += 1
            return await off_loop(self, call, **options)

        type(store)._off_loop = counted  # type: ignore[method-assign]


def _watch_send_calls(counter: ReadCounter, in_turn: bool) -> None:
    """Mark the task of each sessions_send call, so its own reads are told apart."""
    from sessionwire.application.gateway import TOOLS

    parameters, handler = TOOLS["sessions_send"]

    async def marked(context: Any, params: Any) -> Any:
        if context.caller_turn is not None or not in_turn:
            counter.call_task = asyncio.current_task()
        return await handler(context, params)

    TOOLS["sessions_send"] = (parameters, marked)


async def _send(gateway: Gateway, target: str, in_turn: bool) -> None:
    if in_turn:
        # The outer send starts the requester's turn; its own reads are not counted.
        await gateway.call_tool(
            "main",
            "sessions_send",
            {"sessionKey": REQUESTER, "message": target, "timeoutSeconds": 0},
        )
    else:
        answer = await gateway.call_tool(
            REQUESTER,
            "sessions_send",
            {"sessionKey": target, "message": "ping", "timeoutSeconds": 30},
        )
        assert answer["status"] == "ok", answer
    await gateway.wait_idle()


async def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    budget = {"budget": {"maxRuns": 1000}} if args.in_turn else {}
    settings = {
        "session": {"agentToAgent": {"maxPingPongTurns": 0, **budget}},
        "tools": {"sessions": {"visibility": "all"}},
    }
    gateway = await Gateway.open(
        config=GatewayConfig.load(settings),
        store=url,
        clock=VirtualClock(start=datetime(2026, 5, 1, 12, 0, tzinfo=UTC)),
        runtime=ScriptedRuntime.from_dict(_script(args.in_turn)),
    )
    try:
        await gateway.record_message(REQUESTER, role="user", content="hi", channel="discord")
        for target in TARGETS:
            await gateway.record_message(target, role="user", content="hi")
        counter = ReadCounter(gateway)
        _watch_send_calls(counter, args.in_turn)
        for n in range(args.warm):
            await _send(gateway, TARGETS[n % len(TARGETS)], args.in_turn)
        counter.all = counter.of_call = 0
        await _send(gateway, TARGETS[0], args.in_turn)
        reads = {"send_call": counter.of_call, "until_idle": counter.all}
        blocks: list[float] = []
        for _ in range(args.blocks):
            started = time.process_time()
            for n in range(args.sends):
                await _send(gateway, TARGETS[n % len(TARGETS)], args.in_turn)
            blocks.append((time.process_time() - started) / args.sends * 1000)
    finally:
        await gateway.close()
    return {
        "store": args.store,
        "in_turn": args.in_turn,
        "reads_per_send": reads,
        "cpu_ms_per_send_median": round(statistics.median(blocks), 3),
        "cpu_ms_per_send_blocks": [round(block, 3) for block in blocks],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["memory", "sqlite", "postgres"], default="sqlite")
    parser.add_argument("--in-turn", action="store_true")
    parser.add_argument("--sends", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--warm", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        url, schema = (
            ("memory", None) if args.store == "memory" else store_url(args.store, Path(workdir))
        )
        try:
            figures = asyncio.run(run(url, args))
        finally:
            drop_schema(schema)
    json.dump(figures, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
