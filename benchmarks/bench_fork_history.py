#!/usr/bin/env python
"""Wall time of ``sessions_history`` of a fork next to its source's (decision 34, ADR
0048), through ``gw.call_tool`` on one store:

    .venv/bin/python benchmarks/bench_fork_history.py sqlite:////tmp/fork.db
    .venv/bin/python benchmarks/bench_fork_history.py "postgresql://postgres@127.0.0.1:5432/test?schema=forkbench"

A source of N messages (``record_many``, default 1,000 and 10,000), forked at its latest
version; the fork then holds 10 lines of its own. Timed, interleaved call by call (source,
fork, source, …), 30 calls each, medians: the tail (limit 200) of the source and of the
fork (the fork's window reaches its inherited lines: one more page, of the source), and a
page at offset 0 of each. Also the time of the ``fork_session`` call itself, once at the
latest version (counted by the read model) and once half-way back (the source's stream
replayed up to there). Use an empty store.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from sessionwire import Gateway

CALLS = 30


async def timed(gw: Gateway, requester: str, params: dict[str, Any]) -> float:
    start = time.perf_counter()
    answer = await gw.call_tool(requester, "sessions_history", params)
    elapsed = (time.perf_counter() - start) * 1000
    assert "messages" in answer, answer
    return elapsed


async def main(url: str, sizes: list[int]) -> None:
    gw = await Gateway.open(store=url)
    try:
        for size in sizes:
            source = f"bench-{size}"
            for start in range(0, size, 1000):
                batch = [
                    {"role": "user", "content": f"m{n}"}
                    for n in range(start, min(size, start + 1000))
                ]
                await gw.record_many(source, batch)
            start = time.perf_counter()
            fork = (await gw.fork_session(source, new_key=f"{source}-fork"))["sessionKey"]
            latest = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            await gw.fork_session(source, new_key=f"{source}-rewind", at_version=size // 2)
            rewind = (time.perf_counter() - start) * 1000
            print(
                f"{size:>6} messages, fork_session at the latest {latest:7.2f} ms, "
                f"at version {size // 2} {rewind:7.2f} ms (one call each)"
            )
            for n in range(10):
                await gw.record_message(fork, role="user", content=f"own {n}")
            for label, extra in (("tail (limit 200)", {}), ("offset 0", {"offset": 0})):
                times: dict[str, list[float]] = {"source": [], "fork": []}
                for _ in range(CALLS):
                    for name, key in (("source", source), ("fork", fork)):
                        times[name].append(await timed(gw, "main", {"sessionKey": key, **extra}))
                medians = {name: statistics.median(values) for name, values in times.items()}
                print(
                    f"{size:>6} messages, {label:16} source {medians['source']:7.2f} ms"
                    f"   fork {medians['fork']:7.2f} ms"
                )
    finally:
        await gw.close()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if not arguments:
        sys.exit(__doc__)
    given = [int(size) for size in arguments[1:]] or [1_000, 10_000]
    asyncio.run(main(arguments[0], given))
