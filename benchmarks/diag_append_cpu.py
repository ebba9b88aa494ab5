#!/usr/bin/env python
"""Where a W1 append's CPU goes on SQLite: the loop thread and the writer thread apart.

A diagnostic for issue 23's W1 target (docs/benchmarks.md), not a benchmark with targets.
``Gateway.record_message`` into 50 sessions round-robin on an SQLite file (the peers'
W1 call: channel and chat type set), ``--appends`` after 200 warm-up ones. Prints CPU
per append for the whole process, the event loop's thread and the store's writer thread
(each thread's own CPU clock), and the writer's commits (saves per commit).

    .venv/bin/python benchmarks/diag_append_cpu.py [--appends 3000] [--profile FILE]

``--profile FILE`` writes a cProfile of the timed appends on the loop thread's CPU clock.
For instruction counts (load-independent), run it under callgrind twice, with
``--appends N`` and ``--appends 2N``, and divide the difference by N:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/diag_append_cpu.py --appends 1000

To compare two checkouts, run each one's copy with its own Python (or with PYTHONPATH
pointing at the other's package), interleaved. ``--raw``: the same appends through bare
``sqlite3`` (the peers' raw adapter: WAL, ``synchronous=FULL``, INSERT + UPSERT per
transaction) on the main thread, the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sqlite3
import tempfile
import threading
import time

from sessionwire import Gateway, GatewayConfig

PREFIX = "agent:main:bench:group:"
TEXT = "the deploy finished but the cache warm-up is still running on two hosts "
SESSIONS = 50
WARM_UP = 200


def _thread_clock(name_prefix: str) -> int | None:
    for thread in threading.enumerate():
        if thread.name.startswith(name_prefix) and thread.ident is not None:
            return time.pthread_getcpuclockid(thread.ident)
    return None


async def append_cpu(appends: int, profile: cProfile.Profile | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{directory}/w1.db")
        try:
            return await appends_on(gateway, appends, profile)
        finally:
            await gateway.close()


async def appends_on(
    gateway: Gateway, appends: int, profile: cProfile.Profile | None = None
) -> dict[str, float]:
    """CPU per append (µs) of ``appends`` W1 appends into ``gateway``, after the warm-up
    ones (0 for none): the process, the loop thread and the writer thread (benchmarks/probe_mypyc.py
    measures a copy of the package with the same loop)."""

    async def append(n: int) -> None:
        await gateway.record_message(
            f"{PREFIX}s{n % SESSIONS:03d}",
            role="user" if n % 2 else "assistant",
            content=f"[{n}] {TEXT}",
            channel="bench",
            chat_type="group",
        )

    for n in range(WARM_UP):
        await append(n)
    writer = _thread_clock("sessionwire-writer")
    writer_started = time.clock_gettime(writer) if writer is not None else 0.0
    loop_started, process_started = time.thread_time(), time.process_time()
    if profile is not None:
        profile.enable()
    for n in range(WARM_UP, WARM_UP + appends):
        await append(n)
    if profile is not None:
        profile.disable()
    loop_cpu = time.thread_time() - loop_started
    process_cpu = time.process_time() - process_started
    writer_cpu = time.clock_gettime(writer) - writer_started if writer is not None else 0.0
    micro = 1e6 / appends if appends else 0.0
    return {
        "process": process_cpu * micro,
        "loop": loop_cpu * micro,
        "writer": writer_cpu * micro,
    }


RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_key TEXT PRIMARY KEY, created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated_at);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, session_key TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS messages_session ON messages (session_key, id);
"""
RAW_INSERT = "INSERT INTO messages (session_key, data) VALUES (?, ?)"
RAW_UPSERT = (
    "INSERT INTO sessions (session_key, created_at, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT(session_key) DO UPDATE SET updated_at = excluded.updated_at"
)


def raw_cpu(appends: int) -> float:
    """The peers' raw sqlite3 adapter's append (WAL, FULL): µs of CPU per append."""
    with tempfile.TemporaryDirectory() as directory:
        connection = sqlite3.connect(f"{directory}/raw.db", isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.executescript(RAW_SCHEMA)
        cursor = connection.cursor()

        def append(n: int) -> None:
            key = f"{PREFIX}s{n % SESSIONS:03d}"
            stamp = time.time()
            message = {"role": "user" if n % 2 else "assistant", "content": f"[{n}] {TEXT}"}
            cursor.execute("BEGIN")
            cursor.execute(RAW_INSERT, (key, json.dumps({**message, "timestamp": stamp})))
            cursor.execute(RAW_UPSERT, (key, stamp, stamp))
            cursor.execute("COMMIT")

        for n in range(WARM_UP):
            append(n)
        started = time.process_time()
        for n in range(WARM_UP, WARM_UP + appends):
            append(n)
        took = time.process_time() - started
        connection.close()
    return took * 1e6 / appends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=3000)
    parser.add_argument("--profile", help="write a cProfile (loop thread's CPU clock) here")
    parser.add_argument("--raw", action="store_true", help="bare sqlite3 instead (the floor)")
    args = parser.parse_args()
    if args.raw:
        print(f"raw sqlite3 append µs CPU: process {raw_cpu(args.appends):.0f}")
        return
    profile = cProfile.Profile(time.thread_time) if args.profile else None
    took = asyncio.run(append_cpu(args.appends, profile))
    print(
        f"append µs CPU: process {took['process']:.0f}, loop thread {took['loop']:.0f}, "
        f"writer thread {took['writer']:.0f}"
    )
    if profile is not None:
        with open(args.profile, "w") as out:
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(80)


if __name__ == "__main__":
    main()
