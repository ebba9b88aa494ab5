#!/usr/bin/env python
"""CPU per durable append on PostgreSQL, ours against raw psycopg: this process's CPU
(``time.process_time``, every thread: the gateway and its sealer) and the server's CPU
(the backends of this process's own connections, from ``/proc/<pid>/stat``).

On a machine whose cores the server shares with the gateways (as here: 2 cores), the
scale-out ratio of bench_postgres_scaleout.py is bounded by the ratio of these sums, so
this says where an append's cost is, whatever else the machine is doing: CPU time, not
wall time. Needs the server on this machine and leave to read its processes' ``/proc``
entries (root, or the server's own user).

* **ours**: ``SyncGateway.record_message`` round-robin over 10 sessions of a fresh schema
  (after 30 warm-up appends: connections opened, statements prepared).
* **raw**: one psycopg connection, per message one transaction with an UPSERT into
  ``sessions`` and an INSERT into ``messages`` (bench_postgres_scaleout.py's raw side).

Repetitions alternate which goes first; medians. The workers run this interpreter, so
another checkout's venv measures that checkout's code (interleave two checkouts by
running the script with each one's python in turn).

    .venv/bin/python benchmarks/bench_postgres_cpu.py [--appends 500] [--reps 3]
        [--url postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

COMMON = """
import json, os, sys, time, uuid
import psycopg
url, count = sys.argv[1], int(sys.argv[2])
app = f"cpu-{uuid.uuid4().hex[:8]}"
os.environ["PGAPPNAME"] = app  # libpq: every connection this process opens

def server_cpu():
    with psycopg.connect(url, autocommit=True, application_name="cpu-observer") as c:
        pids = [r[0] for r in c.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,))]
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")

def report(run, warm):
    for n in range(30):
        run(n, warm)
    server, client, wall = server_cpu(), time.process_time(), time.perf_counter()
    for n in range(count):
        run(n, f"message {n} " * 8)
    wall = time.perf_counter() - wall
    client = time.process_time() - client
    server = server_cpu() - server
    print(json.dumps({"per_s": count / wall, "client_ms": 1000 * client / count,
                      "server_ms": 1000 * server / count}))
"""

OURS = (
    COMMON
    + """
from sessionwire import SyncGateway
schema = f"bench_{uuid.uuid4().hex[:12]}"
gateway = SyncGateway.open(store=f"{url}?schema={schema}", resume=False)
try:
    report(lambda n, text: gateway.record_message(f"bench:{n % 10}", role="user",
                                                  content=text), "warm-up")
finally:
    gateway.close()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA "{schema}" CASCADE')
"""
)

RAW = (
    COMMON
    + """
schema = f'"bench_{uuid.uuid4().hex[:12]}"'
c = psycopg.connect(url, autocommit=True)
c.execute(f"CREATE SCHEMA {schema}")
c.execute(f"CREATE TABLE {schema}.sessions (session_key TEXT PRIMARY KEY, "
          "created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)")
c.execute(f"CREATE INDEX ON {schema}.sessions (updated_at)")
c.execute(f"CREATE TABLE {schema}.messages (id BIGSERIAL PRIMARY KEY, "
          "session_key TEXT NOT NULL, data TEXT NOT NULL)")
c.execute(f"CREATE INDEX ON {schema}.messages (session_key, id)")
upsert = (f"INSERT INTO {schema}.sessions (session_key, created_at, updated_at) "
          "VALUES (%s, %s, %s) ON CONFLICT (session_key) "
          "DO UPDATE SET updated_at = excluded.updated_at")
insert = f"INSERT INTO {schema}.messages (session_key, data) VALUES (%s, %s)"

def append(n, text):
    now = time.time()
    data = json.dumps({"role": "user", "content": [{"type": "text", "text": text}],
                       "timestamp": int(now * 1000)}, separators=(",", ":"))
    with c.transaction():
        c.execute(upsert, (f"bench:{n % 10}", now, now))
        c.execute(insert, (f"bench:{n % 10}", data))

try:
    report(append, "warm-up")
finally:
    c.execute(f"DROP SCHEMA {schema} CASCADE")
    c.close()
"""
)


def measure(script: str, url: str, appends: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", script, url, str(appends)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"ours": [], "raw": []}
    for rep in range(args.reps):
        pair = [("ours", OURS), ("raw", RAW)]
        for name, script in pair if rep % 2 == 0 else reversed(pair):
            result = measure(script, args.url, args.appends)
            runs[name].append(result)
            print(f"rep {rep + 1} {name}: {result}", file=sys.stderr)
    summary = {
        "appends": args.appends,
        "reps": args.reps,
        "load_average": os.getloadavg(),
        **{
            name: {
                key: round(statistics.median(r[key] for r in results), 3)
                for key in ("per_s", "client_ms", "server_ms")
            }
            for name, results in runs.items()
        },
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
