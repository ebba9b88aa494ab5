#!/usr/bin/env python
"""Loop lag: how late a 5 ms ticker on the gateway's own event loop wakes while the
gateway works (issue 22 item 2). Not a test: figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_loop_lag.py [--stores memory sqlite postgres]
        [--workloads w1 mix concurrent timeline] [--reps 3] [--quick] [--out FILE]
        [--checkout new=.venv/bin/python --checkout old=/work/wt-old/.venv/bin/python]

A ticker coroutine sleeps 5 ms at a time on the loop the gateway runs on and records
each wake-up's lateness (actual minus asked-for sleep): whatever holds the loop thread
(SQL, CPU on the loop, the GIL held by the store's threads) shows up there. It runs from
just before a workload's timed part to its end; p50, p99 and max are over its ticks.
Targets (issue 22): p99 <= 10 ms, max <= 50 ms on a quiet machine.

Workloads (the gateway on the real SystemClock, so the ticker and the gateway share time):

- ``idle``: an open gateway doing nothing for 5 s: the floor, what the machine's other
  load (the OS scheduling this process's loop thread late) adds on its own.
- ``w1``: 2,000 sequential ``record_message`` appends into one session.
- ``mix``: 200 ``sessions_send`` (wait mode) and 200 ``sessions_spawn``, alternating, a
  ScriptedRuntime answering at once; ``wait_idle`` every 20 pairs.
- ``concurrent``: 40 ``sessions_send`` at once into 40 group sessions
  (``agents.defaults.maxConcurrent: 80``), the agents answering after 200 ms of real time;
  5 rounds.
- ``timeline``: ``await gw.timeline(key)`` of a 2,000-message session, 5 calls (the
  fill is not timed). A checkout whose ``timeline`` is sync (``12a9b34``) is called
  through a shim, on the loop, as its callers did.

Each (rep, workload, store) runs in a fresh subprocess, interleaved: rep by rep, every
workload on every store, the stores' order alternating between reps. A worker that does
not finish in ``--timeout`` seconds is killed and reported as frozen (a loop that never
turns again cannot report its own lag). ``--checkout LABEL=PYTHON`` (repeatable) runs the
workers with that interpreter, another checkout's venv, so the same script measures that
checkout's code; with several, each cell runs once per checkout back to back, their
order alternating between reps. ``LABEL=PYTHON:gc-freeze`` runs that checkout's workers
with ``gc.collect(); gc.freeze()`` right after the gateway opens (what a service could do
once started: its start-up objects leave the collector's full passes, which otherwise
stop every thread, the loop's included).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
TICK = 0.005
TARGETS = {"p99_ms": 10.0, "max_ms": 50.0}
STORES = ("memory", "sqlite", "postgres")
WORKLOADS = ("idle", "w1", "mix", "concurrent", "timeline")

# Sizes: (full, quick)
SIZES = {
    "w1_appends": (2_000, 200),
    "mix_pairs": (200, 20),
    "runs": (40, 40),
    "rounds": (5, 1),
    "timeline_messages": (2_000, 200),
    "timeline_calls": (5, 2),
}
AGENT_SECONDS = 0.2

MIX_SCRIPT = {
    "rules": [
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_task", "reply": "done: {message}"},
        {"step": "subagent_announce", "reply": "Result: done\nNotes: none"},
        {"reply": "done: {message}"},
    ]
}
CONCURRENT_SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "done", "delaySeconds": AGENT_SECONDS},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
QUIET = {"agentToAgent": {"maxPingPongTurns": 0}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Ticker:
    """Sleeps TICK at a time on the running loop; each wake-up's lateness is the lag."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._running = True
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while self._running:
            asked = time.perf_counter()
            await asyncio.sleep(TICK)
            self.lags.append(time.perf_counter() - asked - TICK)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        await asyncio.sleep(0)  # the first tick is asleep before the work begins

    async def stop(self) -> dict[str, Any]:
        self._running = False
        assert self._task is not None
        await self._task
        lags = self.lags or [0.0]
        return {
            "ticks": len(self.lags),
            "p50_ms": round(statistics.median(lags) * 1000, 2),
            "p99_ms": round(percentile(lags, 0.99) * 1000, 2),
            "max_ms": round(max(lags) * 1000, 2),
            "over_10ms": sum(1 for lag in lags if lag > 0.010),
        }


# Worker: one workload on one store, in this process ------------------------------------


def _store_url(store: str, workdir: Path) -> tuple[str, str | None]:
    if store == "memory":
        return "memory", None
    if store == "sqlite":
        return f"sqlite:///{workdir}/lag-{uuid.uuid4().hex[:8]}.db", None
    schema = f"bench_lag_{uuid.uuid4().hex[:10]}"
    return f"{POSTGRES}?schema={schema}", schema


def _drop(schema: str | None) -> None:
    if schema is not None:
        import psycopg

        with psycopg.connect(POSTGRES, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _maybe(result: Any) -> Any:
    """The shim for a checkout whose reads are sync (12a9b34's ``timeline``)."""
    return await result if inspect.isawaitable(result) else result


GC_FREEZE = False


async def _open(url: str, config: dict[str, Any], script: dict[str, Any] | None) -> Any:
    from sessionwire import Gateway, GatewayConfig
    from sessionwire.testing import ScriptedRuntime

    runtime = ScriptedRuntime.from_dict(script) if script else None
    gateway = await Gateway.open(config=GatewayConfig.load(config), store=url, runtime=runtime)
    if GC_FREEZE:
        gc.collect()
        gc.freeze()
    return gateway


async def idle(url: str, quick: bool) -> dict[str, Any]:
    gateway = await _open(url, {}, None)
    try:
        ticker = Ticker()
        await ticker.start()
        await asyncio.sleep(1 if quick else 5)
        return {"lag": await ticker.stop(), "ops": 0}
    finally:
        await gateway.close()


async def w1(url: str, quick: bool) -> dict[str, Any]:
    appends = SIZES["w1_appends"][quick]
    gateway = await _open(url, {}, None)
    try:
        await gateway.record_message("bench:w1", role="user", content="warm-up")
        ticker = Ticker()
        await ticker.start()
        started = time.perf_counter()
        for n in range(appends):
            await gateway.record_message("bench:w1", role="user", content=f"message {n} " * 8)
        wall = time.perf_counter() - started
        return {"lag": await ticker.stop(), "ops": appends, "ops_per_s": round(appends / wall)}
    finally:
        await gateway.close()


async def mix(url: str, quick: bool) -> dict[str, Any]:
    pairs = SIZES["mix_pairs"][quick]
    gateway = await _open(url, {"session": QUIET}, MIX_SCRIPT)
    try:
        await gateway.record_message("main", role="user", content="hi", channel="webchat", to="u")
        await gateway.record_message("cron:target", role="user", content="hi")
        ticker = Ticker()
        await ticker.start()
        started = time.perf_counter()
        for n in range(pairs):
            sent = await gateway.call_tool(
                "main",
                "sessions_send",
                {"sessionKey": "cron:target", "message": f"m{n}", "timeoutSeconds": 30},
            )
            assert sent["status"] == "ok", sent
            spawned = await gateway.call_tool("main", "sessions_spawn", {"task": f"t{n}"})
            assert spawned["status"] == "accepted", spawned
            if n % 20 == 19:
                await gateway.wait_idle()
        await gateway.wait_idle()
        wall = time.perf_counter() - started
        return {"lag": await ticker.stop(), "ops": 2 * pairs, "ops_per_s": round(2 * pairs / wall)}
    finally:
        await gateway.close()


async def concurrent(url: str, quick: bool) -> dict[str, Any]:
    runs, rounds = SIZES["runs"][quick], SIZES["rounds"][quick]
    config = {"session": QUIET, "agents": {"defaults": {"maxConcurrent": 2 * runs}}}
    gateway = await _open(url, config, CONCURRENT_SCRIPT)
    try:
        targets = [f"agent:main:group:g{n}" for n in range(runs)]
        for key in ("agent:main:main", *targets):
            await gateway.record_message(key, role="user", content="(opened)")

        async def send(target: str, n: int) -> None:
            sent = await gateway.call_tool(
                "agent:main:main",
                "sessions_send",
                {"sessionKey": target, "message": f"go {n}", "timeoutSeconds": 60},
            )
            assert sent["status"] == "ok", sent

        ticker = Ticker()
        await ticker.start()
        started = time.perf_counter()
        round_walls = []
        for n in range(rounds):
            began = time.perf_counter()
            await asyncio.gather(*(send(target, n) for target in targets))
            await gateway.wait_idle()
            round_walls.append(time.perf_counter() - began)
        wall = time.perf_counter() - started
        return {
            "lag": await ticker.stop(),
            "ops": runs * rounds,
            "ops_per_s": round(runs * rounds / wall, 1),
            # A round is at least the agents' 200 ms; the rest is the gateway's.
            "round_ms_median": round(statistics.median(round_walls) * 1000),
        }
    finally:
        await gateway.close()


async def timeline(url: str, quick: bool) -> dict[str, Any]:
    messages, calls = SIZES["timeline_messages"][quick], SIZES["timeline_calls"][quick]
    gateway = await _open(url, {}, None)
    key = "agent:main:bench:timeline"
    try:
        for start in range(0, messages, 100):
            batch = [
                {"role": "user", "content": f"message {n} " * 8}
                for n in range(start, min(messages, start + 100))
            ]
            await gateway.record_many(key, batch)
        await _maybe(gateway.timeline(key))  # warm-up
        ticker = Ticker()
        await ticker.start()
        await asyncio.sleep(0.05)  # some ticks of an idle loop first
        walls = []
        entries = 0
        for _ in range(calls):
            began = time.perf_counter()
            answer = await _maybe(gateway.timeline(key))
            walls.append(time.perf_counter() - began)
            entries = len(answer.entries)
            await asyncio.sleep(0.02)
        return {
            "lag": await ticker.stop(),
            "ops": calls,
            "entries": entries,
            "timeline_ms_median": round(statistics.median(walls) * 1000, 1),
        }
    finally:
        await gateway.close()


WORKERS = {"idle": idle, "w1": w1, "mix": mix, "concurrent": concurrent, "timeline": timeline}


def cpu_times() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / hz, sum(fields) / hz


def run_worker(store: str, workload: str, quick: bool) -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    load, cpu_before = os.getloadavg()[0], cpu_times()
    own_before = time.process_time()
    with tempfile.TemporaryDirectory() as workdir:
        url, schema = _store_url(store, Path(workdir))
        try:
            result = asyncio.run(WORKERS[workload](url, quick))
        finally:
            _drop(schema)
    cpu_after = cpu_times()
    busy, total = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
    own = time.process_time() - own_before
    result["machine"] = {
        "loadavg_1m": round(load, 2),
        # Everything busy on the machine but this process (the PostgreSQL server working
        # for us included): shows when a run shared the VM.
        "other_cpu_pct": round(100 * (busy - own) / total, 1) if total else None,
    }
    print(json.dumps(result))


# Driver ---------------------------------------------------------------------------------


def spawn(python: str, store: str, workload: str, quick: bool, timeout: float) -> dict[str, Any]:
    python, _, option = python.partition(":")
    command = [python, __file__, "--worker", store, workload]
    command += ["--quick"] if quick else []
    command += ["--gc-freeze"] if option == "gc-freeze" else []
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"frozen": f"no answer in {timeout:.0f} s: killed"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in results if "lag" in r]
    summary: dict[str, Any] = {"reps": len(results), "measured": len(good)}
    if len(good) < len(results):
        summary["failures"] = [r for r in results if "lag" not in r]
    if not good:
        return summary
    for name in ("p50_ms", "p99_ms", "max_ms"):
        values = [r["lag"][name] for r in good]
        summary[name] = statistics.median(values)
        summary[f"{name}_range"] = [min(values), max(values)]
    for name in ("ops_per_s", "timeline_ms_median", "round_ms_median"):
        if name in good[0]:
            summary[name] = statistics.median(r[name] for r in good)
    summary["met"] = {name: bool(summary[name] <= bound) for name, bound in TARGETS.items()}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", nargs=2, metavar=("STORE", "WORKLOAD"), help=argparse.SUPPRESS)
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS[1:]))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds before a worker is killed"
    )
    parser.add_argument(
        "--checkout",
        action="append",
        metavar="LABEL=PYTHON[:gc-freeze]",
        help="a checkout's interpreter to run the workers with (default: this one)",
    )
    parser.add_argument("--gc-freeze", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker:
        global GC_FREEZE
        GC_FREEZE = args.gc_freeze
        store, workload = args.worker
        run_worker(store, workload, args.quick)
        return 0
    checkouts = [tuple(c.split("=", 1)) for c in args.checkout or [f"this={sys.executable}"]]
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    loads = [os.getloadavg()[0]]
    for rep in range(args.reps):
        stores = args.stores if rep % 2 == 0 else list(reversed(args.stores))
        ordered = checkouts if rep % 2 == 0 else list(reversed(checkouts))
        for workload in args.workloads:
            for store in stores:
                for label, python in ordered:
                    result = spawn(python, store, workload, args.quick, args.timeout)
                    runs.setdefault((label, workload, store), []).append(result)
                    line = f"rep {rep + 1} {label} {workload} {store}: {json.dumps(result)}"
                    print(line, file=sys.stderr)
        loads.append(os.getloadavg()[0])
    figures = {
        "quick": args.quick,
        "tick_ms": TICK * 1000,
        "targets": TARGETS,
        "checkouts": dict(checkouts),
        "loadavg_1m_per_rep": [round(load, 2) for load in loads],
        "results": {
            label: {
                workload: {
                    store: summarize(runs[(label, workload, store)]) for store in args.stores
                }
                for workload in args.workloads
            }
            for label, _ in checkouts
        },
        "raw": {" ".join(key): result for key, result in runs.items()},
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
