"""Benchmark of run listings (issue 13): ``gw.runs(limit=50)`` and
``gw.runs(session_key=…)`` p50 over many runs, beside the same over 1,000 runs. Not a
test: figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_runs_listing.py [--store sqlite|postgres|all]
        [--runs 100000] [--small 1000] [--sessions 10] [--calls 200] [--out FILE]

How the read model is filled: a gateway with scripted agents makes ``--seed-sends`` real
``sessions_send`` runs (each send: the target's turn, a reply-back and an announce, so
every step and the exchange link are real rows). Those rows are then replicated with
plain INSERTs into ``sw_runs`` (the runs read model, ADR 0017), each copy a new run id,
its own trace, a later ``created_at`` and one of ``--sessions`` real sessions, until the
table holds ``--small`` runs (measured), then ``--runs`` (measured again). Replicating
rows costs seconds where 100k real runs would cost many minutes of agent turns, and the
listings read only this table. On PostgreSQL the table is ANALYZEd after each fill (as
autovacuum would).

Each figure is the median of ``--calls`` calls, after 20 unmeasured ones; the ratio
large/small shows whether a listing stays flat as the runs grow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import structlog
from bench_stores import POSTGRES, drop_schema, store_url
from sessionwire import Gateway
from sessionwire.testing import ScriptedRuntime

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

AGENTS = {
    "rules": [
        {"step": "primary", "reply": "done: {message}"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
COLUMNS = (
    "run_id, status, session_key, agent_id, step, requester_key, trace_id, parent_run_id, "
    "hop, created_at, started_at, ended_at, attempt, usage, model, error, exchange_id, spawn_id"
)
WARMUP = 20


class Table:
    """Plain SQL on the store's ``sw_runs`` (SQLite file or PostgreSQL schema)."""

    def __init__(self, url: str, schema: str | None) -> None:
        self.schema = schema
        if schema is None:
            self.db: Any = sqlite3.connect(url.removeprefix("sqlite:///"))
            self.name = "sw_runs"
            self.marker = "?"
        else:
            import psycopg

            self.db = psycopg.connect(POSTGRES, autocommit=False)
            self.name = f'"{schema}".sw_runs'
            self.marker = "%s"

    def rows(self) -> list[tuple[Any, ...]]:
        return list(self.db.execute(f"SELECT {COLUMNS} FROM {self.name}").fetchall())

    def count(self) -> int:
        return int(self.db.execute(f"SELECT count(*) FROM {self.name}").fetchone()[0])

    def insert(self, rows: list[tuple[Any, ...]]) -> None:
        marks = ", ".join([self.marker] * 18)
        cursor = self.db.cursor()
        cursor.executemany(f"INSERT INTO {self.name} ({COLUMNS}) VALUES ({marks})", rows)
        self.db.commit()
        if self.schema is not None:
            with self.db.cursor() as analyze:
                analyze.execute(f"ANALYZE {self.name}")
            self.db.commit()

    def close(self) -> None:
        self.db.close()


def replicas(
    templates: list[tuple[Any, ...]], sessions: list[str], start: int, count: int, after: int
) -> list[tuple[Any, ...]]:
    """``count`` copies of the real rows: new ids and traces, later times, spread over the
    sessions (a copy keeps its step, status, usage and links' shape)."""
    made = []
    for index in range(start, start + count):
        row = list(templates[index % len(templates)])
        run_id = str(uuid.uuid4())
        shift = after + index  # 1 ms apart, all after the real runs
        row[0] = run_id
        row[2] = sessions[index % len(sessions)]
        row[6] = run_id if row[7] is None else str(uuid.uuid4())
        row[9] = shift
        row[10] = None if row[10] is None else shift
        row[11] = None if row[11] is None else shift + 5
        made.append(tuple(row))
    return made


async def seed(url: str, sessions: list[str], sends: int) -> None:
    gateway = await Gateway.open(store=url, runtime=ScriptedRuntime.from_dict(AGENTS))
    try:
        await gateway.record_message("main", role="user", content="bench")
        for key in sessions:
            await gateway.record_message(key, role="user", content="bench", channel="discord")
        for number in range(sends):
            target = sessions[number % len(sessions)]
            params = {"sessionKey": target, "message": f"job {number}", "timeoutSeconds": 30}
            sent = await gateway.call_tool("main", "sessions_send", params)
            assert sent["status"] == "ok", sent
        await gateway.wait_idle()
    finally:
        await gateway.close()


async def measure(url: str, session: str, calls: int) -> dict[str, float]:
    gateway = await Gateway.open(store=url, resume=False)
    try:
        figures = {}
        for name, filters in (
            ("runs_limit50", {"limit": 50}),
            ("runs_session", {"session_key": session, "limit": 50}),
            ("runs_status_running", {"status": "running", "limit": 50}),
        ):
            times = []
            for call in range(WARMUP + calls):
                started = time.perf_counter()
                found = await gateway.runs(**filters)
                elapsed = time.perf_counter() - started
                if call >= WARMUP:
                    times.append(elapsed)
            if name != "runs_status_running":
                assert len(found["runs"]) == 50, (name, len(found["runs"]))
            figures[f"{name}_p50_ms"] = round(statistics.median(times) * 1000, 3)
        return figures
    finally:
        await gateway.close()


async def bench_store(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    sessions = [f"discord:group:bench{number}" for number in range(args.sessions)]
    try:
        started = time.perf_counter()
        await seed(url, sessions, args.seed_sends)
        seeded = time.perf_counter() - started
        table = Table(url, schema)
        try:
            templates = table.rows()
            after = max(row[9] for row in templates) + 1
            canonical = [f"agent:main:{key}" for key in sessions]
            result: dict[str, Any] = {
                "store": kind,
                "real_runs": len(templates),
                "seed_seconds": round(seeded, 1),
            }
            for label, target in (("small", args.small), ("large", args.runs)):
                have = table.count()
                fill_started = time.perf_counter()
                while have < target:
                    batch = min(10_000, target - have)
                    table.insert(replicas(templates, canonical, have, batch, after))
                    have += batch
                result[f"{label}_fill_seconds"] = round(time.perf_counter() - fill_started, 1)
                result[f"{label}_runs"] = table.count()
                figures = await measure(url, sessions[0], args.calls)
                result.update({f"{label}_{name}": value for name, value in figures.items()})
            for name in ("runs_limit50", "runs_session", "runs_status_running"):
                small = result[f"small_{name}_p50_ms"]
                result[f"{name}_large_vs_small"] = round(result[f"large_{name}_p50_ms"] / small, 2)
            return result
        finally:
            table.close()
    finally:
        drop_schema(schema)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seed-sends", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.store == "all" else [args.store]
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for kind in kinds:
            result = await bench_store(kind, args, Path(workdir))
            results.append(result)
            print(json.dumps(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
