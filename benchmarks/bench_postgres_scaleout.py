#!/usr/bin/env python
"""PostgreSQL scale-out (issue 14, target 4): N gateway processes vs N raw psycopg
connections appending into distinct sessions of one database, interleaved, medians.

* **ours**: N processes, each a ``SyncGateway`` on one shared fresh schema, each calling
  ``record_message`` round-robin over its own 10 sessions (one durable commit each).
* **raw**: N processes, each one psycopg connection on one shared fresh schema, doing per
  message the peers' raw adapter: one transaction with an UPSERT into ``sessions`` and an
  INSERT into ``messages`` (bench_core.RawPostgres), same ``synchronous_commit``.

Every process opens its store first and reports ready; then all start at once, and the
total rate is all appends over the span from the first start to the last finish (start-up
is not counted). Repetitions interleave ours and raw at each N.

    .venv/bin/python benchmarks/bench_postgres_scaleout.py [--reps 3] [--appends 600]
        [--processes 1,2,4] [--url postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
SESSIONS_PER_PROCESS = 10

OURS = """
import json, sys, time
from sessionwire import SyncGateway
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
keys = [f"bench:{name}:{n}" for n in range(SESSIONS)]
with SyncGateway.open(store=url, resume=False) as gateway:
    gateway.record_message(keys[0], role="user", content="warm-up")
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    for n in range(count):
        gateway.record_message(keys[n % len(keys)], role="user", content=f"message {n} " * 8)
    end = time.perf_counter()
print(json.dumps({"start": start, "end": end}), flush=True)
""".replace("SESSIONS", str(SESSIONS_PER_PROCESS))

RAW = """
import json, sys, time
import psycopg
url, schema, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
keys = [f"bench:{name}:{n}" for n in range(SESSIONS)]
c = psycopg.connect(url, autocommit=True)
s = f'"{schema}"'
upsert = (f"INSERT INTO {s}.sessions (session_key, created_at, updated_at) VALUES (%s, %s, %s) "
          "ON CONFLICT (session_key) DO UPDATE SET updated_at = excluded.updated_at")
insert = f"INSERT INTO {s}.messages (session_key, data) VALUES (%s, %s)"
def append(key, text):
    now = time.time()
    data = json.dumps({"role": "user", "content": [{"type": "text", "text": text}],
                       "timestamp": int(now * 1000)}, separators=(",", ":"))
    with c.transaction():
        c.execute(upsert, (key, now, now))
        c.execute(insert, (key, data))
append(keys[0], "warm-up")
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
for n in range(count):
    append(keys[n % len(keys)], f"message {n} " * 8)
end = time.perf_counter()
print(json.dumps({"start": start, "end": end}), flush=True)
""".replace("SESSIONS", str(SESSIONS_PER_PROCESS))


def raw_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        s = f'"{schema}"'
        c.execute(f"CREATE SCHEMA {s}")
        c.execute(
            f"CREATE TABLE {s}.sessions (session_key TEXT PRIMARY KEY, "
            "created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)"
        )
        c.execute(f"CREATE INDEX ON {s}.sessions (updated_at)")
        c.execute(
            f"CREATE TABLE {s}.messages (id BIGSERIAL PRIMARY KEY, "
            "session_key TEXT NOT NULL, data TEXT NOT NULL)"
        )
        c.execute(f"CREATE INDEX ON {s}.messages (session_key, id)")


def drop(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(commands: list[list[str]], appends: int) -> float:
    """Start the processes, release them together; total appends/s over their span."""
    workers = [
        subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for command in commands
    ]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline().strip()
        assert line == "ready", line
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    spans = []
    for worker in workers:
        out, _ = worker.communicate(timeout=900)
        assert worker.returncode == 0
        spans.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    return len(commands) * appends / wall


def ours(url: str, processes: int, appends: int) -> float:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    store = f"{url}?schema={schema}"
    try:
        commands = [
            [sys.executable, "-c", OURS, store, f"p{n}", str(appends)] for n in range(processes)
        ]
        create_tables(store)
        return run(commands, appends)
    finally:
        drop(url, schema)


def create_tables(store: str) -> None:
    """Create the tables first: N gateways opening an empty schema at once queue on the
    set-up lock, which is start-up, not appends."""
    subprocess.run(
        [sys.executable, "-c", OURS, store, "setup", "0"],
        input="go\n",
        text=True,
        capture_output=True,
        check=True,
        cwd=ROOT,
    )


def raw(url: str, processes: int, appends: int) -> float:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    raw_schema(url, schema)
    try:
        commands = [
            [sys.executable, "-c", RAW, url, schema, f"p{n}", str(appends)]
            for n in range(processes)
        ]
        return run(commands, appends)
    finally:
        drop(url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--appends", type=int, default=600, help="appends per process")
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    counts = [int(n) for n in args.processes.split(",")]
    with psycopg.connect(args.url) as c:
        sync = c.execute("SHOW synchronous_commit").fetchone()
    results: dict[int, dict[str, list[float]]] = {n: {"ours": [], "raw": []} for n in counts}
    for rep in range(args.reps):
        for n in counts:
            # Interleaved, alternating which goes first.
            pair = [("ours", ours), ("raw", raw)]
            for name, measure in pair if rep % 2 == 0 else reversed(pair):
                rate = measure(args.url, n, args.appends)
                results[n][name].append(rate)
                print(f"rep {rep + 1} N={n} {name}: {rate:,.0f} appends/s", file=sys.stderr)
    summary = {
        "synchronous_commit": sync[0] if sync else "?",
        "appends_per_process": args.appends,
        "reps": args.reps,
        "by_processes": {
            n: {
                "ours_per_s_median": round(statistics.median(r["ours"])),
                "raw_per_s_median": round(statistics.median(r["raw"])),
                "ratio": round(statistics.median(r["ours"]) / statistics.median(r["raw"]), 3),
                "ours_runs": [round(x) for x in r["ours"]],
                "raw_runs": [round(x) for x in r["raw"]],
            }
            for n, r in results.items()
        },
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
