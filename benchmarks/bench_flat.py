#!/usr/bin/env python
"""Flatness (issue 23): the same calls on a store of 1k and one of 100k, CPU per call.

Two stores side by side in one process: the *small* one holds 1,000 one-message sessions
and one session of 1,000 messages, the *big* one 100,000 and 100,000 (prefilled as
``bench_core.py``'s reads workload does, through ``store.save`` in batches). Then, in
blocks alternating small and big (big first on odd blocks):

- ``list-50``: ``sessions_list(limit=50)``;
- ``read-200``: ``sessions_history(limit=200)`` of the long session;
- ``append``: ``record_message`` into the long session (one durable commit each).

Per block, the process's CPU time (all threads: the loop's, the writer's, the readers')
divided by the calls, and the wall time likewise; on PostgreSQL also the server's CPU of
this process's own connections (their backends' ``/proc/<pid>/stat``, found by the
application name this process gives every connection, as ``bench_postgres_cpu.py``
does; needs the server on this machine). The figures are the medians over the blocks,
and big / small is the drift. CPU per call is what the other jobs on a shared
machine change least; the store never runs ANALYZE, so neither does this.

    .venv/bin/python benchmarks/bench_flat.py --store sqlite --blocks 5
    .venv/bin/python benchmarks/bench_flat.py --store postgres --blocks 5
    .venv/bin/python benchmarks/bench_flat.py --store sqlite --big 5000 --blocks 3  # smoke

``--dir D`` keeps the SQLite stores in D and reuses them (prefilling 100k takes minutes;
each run's appends add to the long session, which stays 100k-long within 1%).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench_core import (  # a sibling script (its directory is on sys.path)
    DEFAULT_POSTGRES,
    REQUESTER,
    BenchFailure,
    StoreFactory,
    fill_session,
    fill_sessions,
    message_text,
    role_of,
)
from sessionwire import SyncGateway
from sessionwire.adapters.testkit.internals import internals, store_of

LONG_KEY = "agent:main:bench:long"


def prefill(gw: SyncGateway, sessions: int, messages: int) -> dict[str, float]:
    store = store_of(gw)
    ids = internals(gw).ids
    base = datetime.now(tz=UTC) - timedelta(days=30)
    t0 = time.perf_counter()
    fill_sessions(store, sessions, base, ids, batch=1000)
    t1 = time.perf_counter()
    fill_session(store, LONG_KEY, messages, base + timedelta(days=1), ids, batch=1000)
    t2 = time.perf_counter()
    # PostgreSQL seals behind its writers: done now, not during the measured calls.
    store.seal()
    return {
        "sessions_s": round(t1 - t0, 1),
        "messages_s": round(t2 - t1, 1),
        "seal_s": round(time.perf_counter() - t2, 1),
    }


def store_url(
    args: argparse.Namespace, stores: StoreFactory, name: str, size: int
) -> tuple[str, bool]:
    """The store's URL, and whether it is filled already (a SQLite file kept in --dir)."""
    if args.dir is None or args.store != "sqlite":
        return stores.fresh(name), False
    path = Path(args.dir) / f"{name}-{size}.db"
    return f"sqlite:///{path}", path.exists()


def calls_of(gw: SyncGateway) -> dict[str, Callable[[int], None]]:
    """Each operation, checked as it runs (a wrong answer would make its figure meaningless)."""
    list_params = {"limit": 50}
    history_params = {"sessionKey": LONG_KEY, "limit": 200}

    def list_50(i: int) -> None:
        rows = gw.call_tool(REQUESTER, "sessions_list", list_params).get("sessions") or []
        if len(rows) != 50:
            raise BenchFailure(f"sessions_list gave {len(rows)} rows")

    def read_200(i: int) -> None:
        messages = gw.call_tool(REQUESTER, "sessions_history", history_params).get("messages")
        if not messages or len(messages) != 200:
            raise BenchFailure("sessions_history gave the wrong rows")

    def append(i: int) -> None:
        role = role_of(i)
        gw.record_message(LONG_KEY, role=role, content=message_text(i, role))

    return {"list-50": list_50, "read-200": read_200, "append": append}


APP = f"bench-flat-{uuid.uuid4().hex[:8]}"


class ServerCpu:
    """CPU seconds so far of the PostgreSQL backends serving this process (0 on SQLite)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.connection: Any = None
        if args.store == "postgres":
            import psycopg

            os.environ["PGAPPNAME"] = APP  # libpq: every connection opened from now on
            self.connection = psycopg.connect(
                args.postgres_url, autocommit=True, application_name="bench-flat-observer"
            )

    def seconds(self) -> float:
        if self.connection is None:
            return 0.0
        pids = [
            row[0]
            for row in self.connection.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,)
            )
        ]
        ticks = 0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # a backend that ended meanwhile
                continue
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def block(call: Callable[[int], None], n: int, server: ServerCpu) -> tuple[float, float, float]:
    """(CPU µs, wall µs, server CPU µs) per call over n calls."""
    server0 = server.seconds()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(n):
        call(i)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return (cpu / n * 1e6, wall / n * 1e6, (server.seconds() - server0) / n * 1e6)


def run(args: argparse.Namespace) -> dict[str, Any]:
    stores = StoreFactory(args.store, args.postgres_url)
    server = ServerCpu(args)
    result: dict[str, Any] = {"store": args.store, "small": args.small, "big": args.big}
    try:
        sizes = {"small": args.small, "big": args.big}
        urls = {name: store_url(args, stores, name, n) for name, n in sizes.items()}
        gws = {name: SyncGateway.open(store=url) for name, (url, _) in urls.items()}
        try:
            result["prefill"] = {
                name: prefill(gws[name], n, n)
                for name, n in sizes.items()
                if not urls[name][1]  # a kept store (--dir) is filled already
            }
            calls = {name: calls_of(gw) for name, gw in gws.items()}
            for name in calls:  # warm-up: page cache, statement caches, session cache
                for call in calls[name].values():
                    for i in range(10):
                        call(i)
            samples: dict[str, dict[str, list[tuple[float, float, float]]]] = {
                op: {"small": [], "big": []} for op in calls["small"]
            }
            for b in range(args.blocks):
                order = ("small", "big") if b % 2 == 0 else ("big", "small")
                for op in samples:
                    n = args.appends if op == "append" else args.calls
                    for name in order:
                        samples[op][name].append(block(calls[name][op], n, server))
            result["ops"] = {op: summarise(per) for op, per in samples.items()}
        finally:
            for gw in gws.values():
                gw.close()
    finally:
        server.close()
        stores.close()
    return result


def summarise(per: dict[str, list[tuple[float, float, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in per.items():
        cpu = [c for c, _, _ in values]
        both = [c + s for c, _, s in values]
        out[name] = {
            "cpu_us": round(statistics.median(cpu), 1),
            "cpu_us_range": [round(min(cpu), 1), round(max(cpu), 1)],
            "wall_us": round(statistics.median(w for _, w, _ in values), 1),
            "server_cpu_us": round(statistics.median(s for _, _, s in values), 1),
            "client_and_server_cpu_us": round(statistics.median(both), 1),
        }
    for figure in ("cpu_us", "wall_us", "server_cpu_us", "client_and_server_cpu_us"):
        if out["small"][figure]:
            out[f"{figure}_drift"] = round(out["big"][figure] / out["small"][figure], 3)
    return out


def only(args: argparse.Namespace, name: str, op: str, n: str) -> int:
    """One operation on one kept store: under ``valgrind --tool=callgrind``, the
    instructions of N calls less those of 0 calls are the operation's, whatever the load.

        valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
            .venv/bin/python benchmarks/bench_flat.py --dir D --only big read-200 200
    """
    size = args.small if name == "small" else args.big
    path = Path(args.dir) / f"{name}-{size}.db"
    if not path.exists():
        raise SystemExit(f"bench_flat: no kept store {path}; fill it with --dir first")
    gw = SyncGateway.open(store=f"sqlite:///{path}")
    try:
        call = calls_of(gw)[op]
        for i in range(10):
            call(i)
        for i in range(int(n)):
            call(i)
    finally:
        gw.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--blocks", type=int, default=5, help="blocks per (op, store)")
    parser.add_argument("--calls", type=int, default=100, help="reads per block")
    parser.add_argument("--appends", type=int, default=100, help="appends per block")
    parser.add_argument(
        "--dir", help="SQLite: keep the prefilled stores here and reuse them in later runs"
    )
    parser.add_argument("--out", help="write the JSON result here too")
    parser.add_argument(
        "--only",
        nargs=3,
        metavar=("STORE", "OP", "N"),
        help="SQLite, kept stores: open only STORE (small or big, filled by an earlier run "
        "with --dir), warm OP up and call it N times, nothing else (for instruction counts)",
    )
    args = parser.parse_args()
    if args.only:
        return only(args, *args.only)
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
