#!/usr/bin/env python
"""``sessions_search`` over 100,000 messages, and what its index costs an append
(issue 40; ADR 0050), on SQLite:

    .venv/bin/python benchmarks/bench_search.py [--messages 100000] [--rounds 5] [--out F]

Search: a file store of ``--messages`` messages (1,000 sessions, ``record_many``), words
drawn from a 5,000-word vocabulary by a Zipf-like law, one rare word in 20 sessions'
messages; every session visible (``visibility: all``). Each query is called 30 times
through ``gw.call_tool``; the figure is the median CPU (``time.process_time``: the loop's
thread and the reader thread) per call. Targets: ≤ 20 ms CPU.

Append: two file stores, one with the index and one whose trigger was dropped (the
same code otherwise), each given ``--appends`` single ``record_message`` calls per round,
the stores taking turns (interleaved rounds); the figure is the median over rounds of
the CPU per append, and their ratio. Target: with ≤ 1.15× without.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sessionwire import Gateway, GatewayConfig

SESSIONS = 1_000
VOCABULARY = [f"w{n}" for n in range(5_000)]
CONFIG = {"tools": {"sessions": {"visibility": "all"}}}
QUERIES = {
    "rare word (20 matches)": {"query": "zanzibar"},
    "common word": {"query": "w1"},
    "two words": {"query": "w3 w7"},
    "no match": {"query": "nothingmatches"},
}


def sentence(rng: random.Random) -> str:
    words = [VOCABULARY[min(int(rng.paretovariate(1.1)), len(VOCABULARY)) - 1] for _ in range(12)]
    return " ".join(words)


async def filled(url: str, messages: int, rng: random.Random) -> Gateway:
    gw = await Gateway.open(config=GatewayConfig.load(CONFIG), store=url)
    per_session = max(1, messages // SESSIONS)
    for n in range(SESSIONS):
        batch = [
            {"role": "user" if i % 2 else "assistant", "content": sentence(rng)}
            for i in range(per_session)
        ]
        if n % (SESSIONS // 20) == 0:
            batch[-1] = {"role": "user", "content": "the zanzibar file " + sentence(rng)}
        await gw.record_many(f"webchat:dm:user{n:04d}", batch)
    return gw


async def search_cpu(gw: Gateway, params: dict[str, Any], calls: int) -> tuple[float, int]:
    times = []
    answer: dict[str, Any] = {}
    for _ in range(calls):
        start = time.process_time()
        answer = await gw.call_tool("main", "sessions_search", params)
        times.append((time.process_time() - start) * 1000)
    assert "results" in answer, answer
    return statistics.median(times), len(answer["results"])


async def append_cpu(url: str, appends: int, start: int) -> float:
    gw = await Gateway.open(config=GatewayConfig.load(CONFIG), store=url)
    try:
        began = time.process_time()
        for n in range(appends):
            await gw.record_message(
                f"webchat:dm:a{(start + n) % 50}", role="user", content=f"append {n} w1 w2 w3"
            )
        return (time.process_time() - began) * 1e6 / appends
    finally:
        await gw.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--appends", type=int, default=2_000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(40)
    report: dict[str, Any] = {"messages": args.messages, "search_ms_cpu": {}, "append": {}}
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/search.db"
        gw = await filled(url, args.messages, rng)
        try:
            for label, params in QUERIES.items():
                ms, count = await search_cpu(gw, {**params, "limit": 20}, args.calls)
                report["search_ms_cpu"][label] = ms
                print(f"search {label:24} {ms:7.2f} ms CPU  ({count} results; target ≤ 20)")
        finally:
            await gw.close()

        stores = {"with index": f"{directory}/with.db", "without": f"{directory}/without.db"}
        for path in stores.values():
            await (
                await Gateway.open(config=GatewayConfig.load(CONFIG), store=f"sqlite:///{path}")
            ).close()
        with sqlite3.connect(stores["without"]) as db:
            db.execute("DROP TRIGGER sw_search_index")
        rounds: dict[str, list[float]] = {name: [] for name in stores}
        for number in range(args.rounds):
            order = list(stores) if number % 2 == 0 else list(reversed(stores))
            for name in order:
                start = number * args.appends
                rounds[name].append(
                    await append_cpu(f"sqlite:///{stores[name]}", args.appends, start)
                )
        medians = {name: statistics.median(values) for name, values in rounds.items()}
        ratio = medians["with index"] / medians["without"]
        report["append"] = {"rounds_us": rounds, "median_us": medians, "ratio": ratio}
        print(
            f"append CPU: with index {medians['with index']:.1f} µs, without "
            f"{medians['without']:.1f} µs: {ratio:.3f}× (target ≤ 1.15×; "
            f"{args.rounds} interleaved rounds of {args.appends})"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
