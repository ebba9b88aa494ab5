#!/usr/bin/env python
"""RSS while a gateway serves ever more sessions, each touched once (issue 14, target 6).

One gateway on a fresh SQLite file; 50 asyncio writers record one message into each of
``--sessions`` distinct sessions. The current RSS (``/proc/self/statm``, not the peak) is
sampled every ``--every`` sessions. Nothing the gateway keeps per session may grow without
bound: the store's session cache and the writer's chain heads hold at most 10,000 each,
so RSS should stop growing after the first 10k sessions.

    .venv/bin/python benchmarks/bench_rss_sessions.py [--sessions 1000000] [--every 10000]

Prints RSS at 10k sessions, at the end, the growth per 100k sessions after 10k, and the
peak (``ru_maxrss``). Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

WRITERS = 50
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 2**20


async def run(sessions: int, every: int, folder: Path) -> list[tuple[int, float]]:
    from sessionwire import Gateway, GatewayConfig

    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{folder}/rss.db")
    samples: list[tuple[int, float]] = [(0, rss_mb())]
    done = 0
    content = "hello world " * 20

    async def writer(first: int) -> None:
        nonlocal done
        for n in range(first, sessions, WRITERS):
            await gateway.record_message(f"discord:group:s{n}", role="user", content=content)
            done += 1
            if done % every == 0:
                samples.append((done, rss_mb()))

    try:
        started = time.perf_counter()
        await asyncio.gather(*(writer(first) for first in range(WRITERS)))
        elapsed = time.perf_counter() - started
    finally:
        await gateway.close()
    print(f"{sessions:,} sessions in {elapsed:.0f} s ({sessions / elapsed:,.0f}/s)")
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        samples = asyncio.run(run(args.sessions, args.every, Path(folder)))
    for count, rss in samples:
        print(f"{count:>9,} sessions  RSS {rss:7.1f} MB")
    base = next(((c, r) for c, r in samples if c >= 10_000), samples[0])
    last = samples[-1]
    growth = (last[1] - base[1]) / max(1, last[0] - base[0]) * 100_000
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nRSS at {base[0]:,} sessions {base[1]:.1f} MB, at {last[0]:,} {last[1]:.1f} MB: "
        f"{growth:+.2f} MB per 100k sessions after the first 10k; peak {peak:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
