#!/usr/bin/env python
"""Wall time of a ``sessions_history`` page and of a filtered ``sessions_list`` (issue 25,
ADR 0032), through ``gw.call_tool`` on one store:

    .venv/bin/python benchmarks/bench_history_paging.py sqlite:////tmp/paging.db
    .venv/bin/python benchmarks/bench_history_paging.py "postgresql://postgres@127.0.0.1:5432/test?schema=paging"

A 10,000-message session (``record_many``): the tail (no offset), then pages at offsets 0,
5,000, 9,800 and past the end, each the median of 30 calls. Then 2,000 more one-message
sessions: ``sessions_list`` unfiltered, with a search that matches the newest sessions,
one that matches nothing (the walk reads every session) and a label that matches nothing
(the label index), each the median of 10 calls. Use an empty store.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from sessionwire import Gateway

MESSAGES = 10_000
SESSIONS = 2_000


async def median_ms(
    gw: Gateway, tool: str, params: dict[str, Any], calls: int
) -> tuple[float, Any]:
    times = []
    answer: Any = None
    for _ in range(calls):
        start = time.perf_counter()
        answer = await gw.call_tool("main", tool, params)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), answer


async def main(url: str) -> None:
    gw = await Gateway.open(store=url)
    try:
        for chunk in range(MESSAGES // 1000):
            batch = [{"role": "user", "content": f"m{chunk * 1000 + n}"} for n in range(1000)]
            await gw.record_many("main", batch)
        pages: list[tuple[str, dict[str, Any]]] = [
            ("tail (limit 200)", {}),
            ("offset 0", {"offset": 0}),
            ("offset 5000", {"offset": 5000}),
            ("offset 9800", {"offset": 9800}),
            ("offset 10**30", {"offset": 10**30}),
        ]
        for label, extra in pages:
            ms, answer = await median_ms(
                gw, "sessions_history", {"sessionKey": "main", **extra}, 30
            )
            print(f"history {label:17} {ms:7.2f} ms  {len(answer['messages'])} messages")
        for n in range(SESSIONS):
            await gw.record_message(f"cron:job-{n:04d}", role="user", content="x")
        lists: list[tuple[str, dict[str, Any]]] = [
            ("no filter", {}),
            ("search, newest hit", {"search": "job-19"}),
            ("search, no match", {"search": "zzz"}),
            ("label, no match", {"label": "zzz"}),
        ]
        for label, params in lists:
            ms, answer = await median_ms(gw, "sessions_list", params, 10)
            print(f"list    {label:17} {ms:7.2f} ms  {answer['count']} rows")
    finally:
        await gw.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
