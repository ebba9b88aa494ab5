#!/usr/bin/env python
"""CPU per ``sessions_list`` (limit 50, and limit 1: the call's fixed part) and per
``sessions_history`` (200 messages) through the public API on an SQLite file: the peers'
W2/W3 reads (issue 23 items 3-4) in one process, more calls than the harness makes.

Each figure is process CPU (all threads) over chunks of 10 calls; the minimum chunk is
the steadier figure on a loaded machine, the median is printed beside it. Run it from
two checkouts one after the other, alternating, to compare them:

    .venv/bin/python benchmarks/bench_list_read.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from typing import Any

REQUESTER = "agent:main:main"
PREFIX = "agent:main:bench:group:"
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "mu")


def message(i: int) -> dict[str, Any]:
    rnd = random.Random(i)
    text = " ".join(rnd.choice(WORDS) for _ in range(40))
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"[session#0] {text}"}


async def per_call(call: Any, chunks: int) -> dict[str, int]:
    found = []
    for _ in range(chunks):
        began = time.process_time()
        for _ in range(10):
            await call()
        found.append((time.process_time() - began) / 10 * 1e6)
    return {"min": round(min(found)), "median": round(statistics.median(found))}


async def main(messages: int, sessions: int, chunks: int) -> None:
    from sessionwire import Gateway, GatewayConfig

    folder = tempfile.mkdtemp()
    gw = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{folder}/bench.db")
    batch = [message(i) for i in range(messages)]
    for start in range(0, len(batch), 1_000):
        await gw.record_many(
            PREFIX + "big", batch[start : start + 1_000], channel="bench", chat_type="group"
        )
    for n in range(sessions):
        await gw.record_message(
            f"{PREFIX}s{n}", role="user", content=f"hello {n}", channel="bench", chat_type="group"
        )
    history = {"sessionKey": PREFIX + "big", "limit": 200, "includeTools": True}

    async def read() -> None:
        answer = await gw.call_tool(REQUESTER, "sessions_history", history)
        assert len(answer["messages"]) == min(200, messages)

    async def list_50() -> None:
        assert (
            len((await gw.call_tool(REQUESTER, "sessions_list", {"limit": 50}))["sessions"]) == 50
        )

    async def list_1() -> None:
        await gw.call_tool(REQUESTER, "sessions_list", {"limit": 1})

    for warm in (read, list_50, list_1):
        for _ in range(5):
            await warm()
    result = {
        "read-200 µs": await per_call(read, 2 * chunks),
        "list-50 µs": await per_call(list_50, 3 * chunks),
        "list-1 µs": await per_call(list_1, 3 * chunks),
    }
    await gw.close()
    print(json.dumps(result))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="in the read session")
    parser.add_argument("--sessions", type=int, default=2_000, help="listed (one message each)")
    parser.add_argument("--chunks", type=int, default=10, help="x2 read, x3 list chunks of 10")
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.sessions, args.chunks))
