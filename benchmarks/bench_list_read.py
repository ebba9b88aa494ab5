#!/usr/bin/env python
"""CPU per ``sessions_list`` (limit 50, and limit 1: the call's fixed part) and per
``sessions_history`` (200 messages) through the public API on an SQLite file: the peers'
W2/W3 reads (issue 23 items 3-4) in one process, more calls than the harness makes.
``--store postgresql://…`` measures the same on a fresh schema of that database instead
(``ANALYZE``d after loading, as autovacuum keeps a store in use, and dropped afterwards;
ADR 0054's read on PostgreSQL), with the server's CPU per call
beside this process's (``server``: its backends' CPU over every call, a mean; null when
the server's processes are not this machine's to read).

Each figure is process CPU (all threads) over chunks of 10 calls; the minimum chunk is
the steadier figure on a loaded machine, the median is printed beside it. Run it from
two checkouts one after the other, alternating, to compare them:

    .venv/bin/python benchmarks/bench_list_read.py [--store postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from typing import Any

REQUESTER = "agent:main:main"
PREFIX = "agent:main:bench:group:"
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "mu")


def message(i: int) -> dict[str, Any]:
    rnd = random.Random(i)
    text = " ".join(rnd.choice(WORDS) for _ in range(40))
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"[session#0] {text}"}


# PostgreSQL: every connection of this process carries this name, so the server's CPU
# for its calls is its backends' (from /proc: the server on this machine, read as root
# or its own user).
APP = f"bench-list-read-{uuid.uuid4().hex[:8]}"


def server_cpu(server: str | None) -> float | None:
    """Seconds of CPU this process's server backends have used (0 on SQLite; None when
    the server's processes are not this machine's to read)."""
    if server is None:
        return 0.0
    import psycopg

    with psycopg.connect(server, autocommit=True, application_name="bench-observer") as c:
        pids = [
            row[0]
            for row in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,)
            )
        ]
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


async def per_call(call: Any, chunks: int, server: str | None = None) -> dict[str, int | None]:
    found = []
    began_server = server_cpu(server)
    for _ in range(chunks):
        began = time.process_time()
        for _ in range(10):
            await call()
        found.append((time.process_time() - began) / 10 * 1e6)
    result: dict[str, int | None] = {
        "min": round(min(found)),
        "median": round(statistics.median(found)),
    }
    if server is not None:
        # Over every call (the ticks are 10 ms): the server's mean per call.
        ended_server = server_cpu(server)
        result["server"] = (
            None
            if began_server is None or ended_server is None
            else round((ended_server - began_server) / (10 * chunks) * 1e6)
        )
    return result


async def main(messages: int, sessions: int, chunks: int, server: str | None) -> None:
    from sessionwire import Gateway, GatewayConfig

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    if server is None:
        store = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    else:
        store = f"{server}?schema={schema}"
        os.environ["PGAPPNAME"] = APP  # libpq: every connection this process opens
    gw = await Gateway.open(config=GatewayConfig(), store=store)
    batch = [message(i) for i in range(messages)]
    for start in range(0, len(batch), 1_000):
        await gw.record_many(
            PREFIX + "big", batch[start : start + 1_000], channel="bench", chat_type="group"
        )
    for n in range(sessions):
        await gw.record_message(
            f"{PREFIX}s{n}", role="user", content=f"hello {n}", channel="bench", chat_type="group"
        )
    if server is not None:
        # The statistics autovacuum keeps on a store in use (a schema this new has
        # none, and its plans would be a table's with no rows).
        import psycopg

        with psycopg.connect(server, autocommit=True) as connection:
            connection.execute(f'ANALYZE "{schema}".sessionwire_events')
            connection.execute(f'ANALYZE "{schema}".sw_sessions')
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
        "read-200 µs": await per_call(read, 2 * chunks, server),
        "list-50 µs": await per_call(list_50, 3 * chunks, server),
        "list-1 µs": await per_call(list_1, 3 * chunks, server),
    }
    await gw.close()
    if server is not None:
        import psycopg

        with psycopg.connect(server, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    print(json.dumps({**result, "load_average": os.getloadavg()}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="in the read session")
    parser.add_argument("--sessions", type=int, default=2_000, help="listed (one message each)")
    parser.add_argument("--chunks", type=int, default=10, help="x2 read, x3 list chunks of 10")
    parser.add_argument("--store", help="a PostgreSQL server URL (default: an SQLite file)")
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.sessions, args.chunks, args.store))
