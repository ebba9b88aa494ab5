#!/usr/bin/env python
"""Where N gateway processes on one PostgreSQL schema wait (issue 23's scale-out row).

Runs the ``bench_postgres_scaleout.py`` workload (N processes, each ``record_message``
round-robin over its own sessions) once per N, and meanwhile samples, every
``--every`` ms on a connection of its own, what each of the gateways' backends is doing
(``pg_stat_activity``: active or idle, wait event, statement), and the WAL written
meanwhile (the server's, all of it). Each process counts its
sealer's passes (taken, or left to another holder of the lock) and the rows they sealed,
and its own CPU; the server's CPU is each backend's, from ``/proc`` (the server must run
on this machine for that column).

    .venv/bin/python benchmarks/diag_scaleout_postgres.py [--processes 1,2,4]
        [--appends 300] [--every 5] [--raw] [--url postgresql://postgres@127.0.0.1:5432/test]

``--raw`` measures the benchmark's raw psycopg workers the same way (their CPU and
their backends'), for the bound CPU puts on the ratio when the server shares the cores.

A diagnostic, not a benchmark: the sampler costs CPU of its own; compare shares across
N, not rates with the benchmark's.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the workloads are the benchmark's

from bench_postgres_scaleout import RAW, create_tables, drop, raw_schema  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")

WORKER = """
import json, os, sys, time
from sessionwire import SyncGateway
from sessionwire.adapters.store import postgres
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if os.environ.get("DIAG_SEALER_SAVES"):  # saves per sealing pass (ADR 0058)
    postgres.BackgroundSealer.SAVES_PER_PASS = int(os.environ["DIAG_SEALER_SAVES"])
if os.environ.get("DIAG_SEALER_LAG"):  # seconds a save waits for a pass, at most
    postgres.BackgroundSealer.MAX_LAG = float(os.environ["DIAG_SEALER_LAG"])
passes = {"taken": 0, "skipped": 0, "rows": 0, "seconds": 0.0, "cpu": 0.0}
batch = postgres.PostgresSessionRecorder._seal_batch
def counted(self, *, wait):
    began, cpu = time.perf_counter(), time.thread_time()
    found = batch(self, wait=wait)
    passes["seconds"] += time.perf_counter() - began
    passes["cpu"] += time.thread_time() - cpu
    if found is None:
        passes["skipped"] += 1
    else:
        passes["taken"] += 1
        passes["rows"] += found
    return found
postgres.PostgresSessionRecorder._seal_batch = counted
keys = [f"diag:{name}:{n}" for n in range(10)]
with SyncGateway.open(store=url, resume=False) as gateway:
    gateway.record_message(keys[0], role="user", content="warm-up")
    print("ready", flush=True)
    sys.stdin.readline()
    for key in passes:
        passes[key] = 0
    cpu, start = time.process_time(), time.perf_counter()
    for n in range(count):
        gateway.record_message(keys[n % len(keys)], role="user", content=f"message {n} " * 8)
    end, cpu = time.perf_counter(), time.process_time() - cpu
    print(json.dumps({"start": start, "end": end, "cpu": cpu, "sealer": passes}), flush=True)
    sys.stdin.readline()  # the server's CPU is read while this process's backends live
"""


def raw_worker() -> str:
    """``bench_postgres_scaleout``'s raw worker, reporting its CPU and staying until told."""
    began = "start = time.perf_counter()\n"
    ended = 'print(json.dumps({"start": start, "end": end}), flush=True)\n'
    assert began in RAW
    assert ended in RAW
    return RAW.replace(began, "cpu = time.process_time()\n" + began).replace(
        ended,
        'print(json.dumps({"start": start, "end": end, "cpu": time.process_time() - cpu}), '
        "flush=True)\nsys.stdin.readline()\n",
    )


SAMPLE = (
    "SELECT application_name, pid, state, wait_event_type, wait_event, "
    "left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query "
    "FROM pg_stat_activity WHERE application_name LIKE 'diag-%%' AND pid <> pg_backend_pid()"
)


def server_ticks(pids: set[int]) -> int:
    """utime + stime of these backends (those still alive)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def wal_position(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert found is not None
    return int(found[0])


class Sampler(threading.Thread):
    def __init__(self, url: str, every: float) -> None:
        super().__init__(daemon=True)
        self.url, self.every = url, every
        self.counts: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self.pids: set[int] = set()
        self.start_ticks: dict[int, int] = {}
        self.go = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                rows = conn.execute(SAMPLE).fetchall()
                for _app, pid, state, wtype, wevent, query in rows:
                    if pid not in self.pids:
                        self.pids.add(pid)
                        self.start_ticks[pid] = server_ticks({pid})
                    if not self.go.is_set():
                        continue
                    if state == "active":
                        what = f"active {wtype or 'CPU'}:{wevent or '-'} | {query}"
                    else:
                        what = f"{state} {wtype or ''}:{wevent or ''}"
                    self.counts[what] += 1
                if self.go.is_set():
                    self.samples += 1
                time.sleep(self.every)


def run_once(url: str, processes: int, appends: int, every: float, *, raw: bool) -> dict[str, Any]:
    schema = f"diag_{uuid.uuid4().hex[:12]}"
    store = f"{url}?schema={schema}"
    env = dict(os.environ)
    try:
        if raw:
            raw_schema(url, schema)
            code, args = raw_worker(), [url, schema]
        else:
            create_tables(store)
            code, args = WORKER, [store]
        workers = []
        for n in range(processes):
            env["PGAPPNAME"] = f"diag-p{n}"
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-c", code, *args, f"p{n}", str(appends)],
                    cwd=ROOT,
                    env=dict(env),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        sampler = Sampler(url, every / 1000)
        sampler.start()
        time.sleep(0.3)  # the sampler has seen every backend opened so far
        wal_before = wal_position(url)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        sampler.go.set()
        outs = []
        for worker in workers:
            assert worker.stdout is not None
            outs.append(json.loads(worker.stdout.readline()))
        wal_bytes = wal_position(url) - wal_before
        sampler.stop.set()
        sampler.join()
        ticks = sum(server_ticks({pid}) - sampler.start_ticks.get(pid, 0) for pid in sampler.pids)
        for worker in workers:
            worker.communicate("go\n", timeout=900)
            assert worker.returncode == 0
    finally:
        drop(url, schema)
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    total = processes * appends
    sealer = {k: sum(o["sealer"][k] for o in outs) for k in outs[0].get("sealer", {})}
    busy = {what: n for what, n in sampler.counts.items() if not what.startswith("idle")}
    seen = sum(busy.values()) or 1
    return {
        "processes": processes,
        "appends_per_s": round(total / wall),
        "client_cpu_ms_per_append": round(1000 * sum(o["cpu"] for o in outs) / total, 3),
        "server_cpu_ms_per_append": round(1000 * ticks / TICKS / total, 3),
        # The whole server's WAL (any other writer's too): what each COMMIT's flush waits on.
        "wal_bytes_per_append": round(wal_bytes / total),
        "of": "raw psycopg" if raw else "ours",
        "sealer": None
        if raw
        else {
            "passes_taken": sealer["taken"],
            "passes_left_to_holder": sealer["skipped"],
            "rows_sealed": sealer["rows"],
            "rows_per_taken_pass": round(sealer["rows"] / max(1, sealer["taken"]), 1),
            "wall_ms_in_passes_per_append": round(1000 * sealer["seconds"] / total, 3),
            "client_cpu_ms_per_append": round(1000 * sealer["cpu"] / total, 3),
        },
        "samples": sampler.samples,
        "backends_per_gateway": round(len(sampler.pids) / processes, 1),
        "busy_backends_per_sample": round(seen / max(1, sampler.samples), 2),
        "busy_states": [
            f"{100 * count / seen:5.1f}%  {what}"
            for what, count in collections.Counter(busy).most_common(12)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--appends", type=int, default=300, help="appends per process")
    parser.add_argument("--every", type=float, default=5.0, help="ms between samples")
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument(
        "--raw", action="store_true", help="also the raw psycopg workers, after ours at each N"
    )
    args = parser.parse_args()
    for n in (int(x) for x in args.processes.split(",")):
        for raw in (False, True) if args.raw else (False,):
            found = run_once(args.url, n, args.appends, args.every, raw=raw)
            print(json.dumps(found, indent=2), flush=True)


if __name__ == "__main__":
    main()
