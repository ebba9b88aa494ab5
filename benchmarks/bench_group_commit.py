#!/usr/bin/env python
"""Group commit and store I/O off the event loop, on an SQLite file (issue 14, ADR 0020).

Two measurements, each repetition in fresh files, repetitions interleaved:

1. **Durable appends/s with 50 concurrent writers** (asyncio tasks, one session each,
   ``record_message``), against raw ``sqlite3`` (WAL, ``synchronous=FULL``) committing
   one message per transaction (the peers' raw adapter: INSERT + UPSERT) on one thread.
   Target: ours ≥ 3× raw. Also the same 50 writers with the writer thread switched off
   (saves on the event loop, as before ADR 0020), for comparison.
2. **``sessions_list`` over HTTP while 50 writers append**: a gateway served by uvicorn
   in this process; a client in another process calls ``POST /v1/tools/sessions_list``
   back to back, first idle, then while the 50 writers run in the gateway's loop.
   Target: p99 under load ≤ 3× idle p99. Also with the writer thread off.

    .venv/bin/python benchmarks/bench_group_commit.py [--reps 3] [--appends 100]

Prints a table; exits 0 whatever the figures (targets are reported, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sessionwire.adapters.testkit.internals import store_of

WRITERS = 50
TOKEN = "bench-token-" + "x" * 32
CLIENT = r"""
import http.client, json, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"limit": 50})
headers = {"Authorization": "Bearer %s", "Content-Type": "application/json",
           "X-Sessionwire-Session": "agent:main:main"}
conn = http.client.HTTPConnection("127.0.0.1", port)
times = []
for _ in range(count):
    t = time.perf_counter()
    conn.request("POST", "/v1/tools/sessions_list", body, headers)
    response = conn.getresponse()
    data = response.read()
    times.append(time.perf_counter() - t)
    assert response.status == 200, data
print(json.dumps(times))
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raw_appends(path: Path, count: int) -> float:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.executescript(
        "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, created_at REAL, updated_at REAL);"
        "CREATE INDEX sessions_updated ON sessions (updated_at);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_key TEXT, data TEXT);"
        "CREATE INDEX messages_session ON messages (session_key, id);"
    )
    payload = json.dumps({"role": "user", "content": "hello world " * 20, "timestamp": 0})
    started = time.perf_counter()
    for n in range(count):
        key = f"s{n % WRITERS}"
        now = time.time()
        connection.execute("BEGIN")
        connection.execute("INSERT INTO messages (session_key, data) VALUES (?, ?)", (key, payload))
        connection.execute(
            "INSERT INTO sessions VALUES (?, ?, ?) "
            "ON CONFLICT(session_key) DO UPDATE SET updated_at = excluded.updated_at",
            (key, now, now),
        )
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - started
    connection.close()
    return count / elapsed


async def open_gateway(path: Path, *, thread: bool) -> Any:
    from sessionwire import Gateway, GatewayConfig

    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{path}")
    if not thread:
        store_of(gateway).writer.close()  # type: ignore[attr-defined]
        store_of(gateway).writer = None  # type: ignore[attr-defined]
    return gateway


async def writers(gateway: Any, appends: int) -> float:
    content = "hello world " * 20

    async def one(n: int) -> None:
        for _ in range(appends):
            await gateway.record_message(
                f"discord:group:w{n}", role="user", content=content, channel="discord"
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(WRITERS)))
    return WRITERS * appends / (time.perf_counter() - started)


async def ours_appends(path: Path, appends: int, *, thread: bool) -> dict[str, float]:
    gateway = await open_gateway(path, thread=thread)
    try:
        rate = await writers(gateway, appends)
        writer = store_of(gateway).writer
        per_commit = writer.saves / writer.commits if writer is not None else 1.0
    finally:
        await gateway.close()
    return {"rate": rate, "per_commit": per_commit}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def http_latency(path: Path, appends: int, calls: int, *, thread: bool) -> dict[str, float]:
    import uvicorn
    from sessionwire.adapters.http.app import create_app

    gateway = await open_gateway(path, thread=thread)
    for n in range(200):  # something to list
        await gateway.record_message(f"discord:group:seed{n}", role="user", content="seed")
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(gateway, TOKEN), host="127.0.0.1", port=port, log_level="error")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)

    async def client() -> list[float]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENT % TOKEN,
            str(port),
            str(calls),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        return list(json.loads(out))

    try:
        idle = await client()
        load = asyncio.create_task(writers(gateway, appends * 10))  # outlasts the client
        loaded_task = asyncio.create_task(client())
        loaded = await loaded_task
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    finally:
        server.should_exit = True
        await serving
        await gateway.close()
    return {
        "idle_p50": statistics.median(idle) * 1e3,
        "idle_p99": pct(idle, 0.99) * 1e3,
        "load_p50": statistics.median(loaded) * 1e3,
        "load_p99": pct(loaded, 0.99) * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--appends", type=int, default=100, help="per writer")
    parser.add_argument("--calls", type=int, default=400, help="HTTP calls per phase")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {}
    for rep in range(args.reps):
        for name in ("raw", "ours", "ours-on-loop", "http", "http-on-loop"):
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / "bench.db"
                if name == "raw":
                    result = {"rate": raw_appends(path, WRITERS * args.appends)}
                elif name.startswith("ours"):
                    result = asyncio.run(ours_appends(path, args.appends, thread=name == "ours"))
                else:
                    result = asyncio.run(
                        http_latency(path, args.appends, args.calls, thread=name == "http")
                    )
            rows.setdefault(name, []).append(result)
            print(f"rep {rep + 1} {name}: {result}", flush=True)

    def med(name: str, field: str) -> float:
        return statistics.median(r[field] for r in rows[name])

    raw = med("raw", "rate")
    print(f"\n{WRITERS} writers x {args.appends} appends, {args.reps} interleaved reps, medians\n")
    print("| figure | target | value |")
    print("|---|---|---|")
    print(f"| raw sqlite3 WAL+FULL, 1 commit/msg, appends/s | – | {raw:,.0f} |")
    for name in ("ours", "ours-on-loop"):
        rate, grouped = med(name, "rate"), med(name, "per_commit")
        print(
            f"| {name}: 50 writers, durable appends/s | ≥ 3× raw | {rate:,.0f} "
            f"= {rate / raw:.2f}× raw ({grouped:.1f} saves per commit) |"
        )
    for name in ("http", "http-on-loop"):
        idle, load = med(name, "idle_p99"), med(name, "load_p99")
        print(
            f"| {name}: sessions_list over HTTP p99 idle / under 50 writers, ms | ≤ 3× | "
            f"{idle:.2f} / {load:.2f} = {load / idle:.1f}× (p50 {med(name, 'idle_p50'):.2f} / "
            f"{med(name, 'load_p50'):.2f}) |"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process: {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
