"""Benchmark: ``gw.runs`` / ``gw.run`` over 1,000 and 100,000 runs (issue 13). Not a test.

    .venv/bin/python benchmarks/bench_run_listing.py [--store sqlite|postgres] [--runs N]

The runs read model (``sw_runs``) is filled directly with synthetic rows (many sessions,
every status, a few runs per trace), then each query is timed through the gateway's
public methods: p50 over repeated calls, at 1,000 runs and at ``--runs`` runs, so the
ratio shows whether a query is flat in the number of runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from bench_stores import drop_schema, store_url
from sessionwire import Gateway, GatewayConfig
from sessionwire.application.projection import RunRow
from sessionwire.domain.run import RunState

STATUSES = ("ok", "ok", "ok", "error", "timeout", "cancelled", "running", "queued")
SESSIONS = 500
CALLS = 200
START_MS = 1_780_000_000_000


def rows(count: int, first: int) -> list[RunRow]:
    made = []
    for index in range(first, first + count):
        run_id = str(uuid.UUID(int=index + 1))
        status = STATUSES[index % len(STATUSES)]
        state = RunState(
            run_id=run_id,
            # Every tenth run in one busy session: its listing is full at 1,000 runs too.
            session_key="agent:main:work:busy"
            if index % 10 == 0
            else f"agent:main:work:{index % SESSIONS}",
            agent_id="main",
            step="primary",
            message="m",
            timeout_seconds=600,
            trace_id=str(uuid.UUID(int=(index // 4) + 1)),
            hops=1,
            status=status,  # type: ignore[arg-type]
            attempts=1,
            started_at=START_MS + index * 1000,
            ended_at=START_MS + index * 1000 + 500 if status not in ("running", "queued") else None,
        )
        made.append(
            RunRow(
                id=uuid.UUID(run_id), created_at=START_MS + index * 1000, state=state, is_new=True
            )
        )
    return made


def fill(gw: Gateway, count: int, already: int) -> None:
    store: Any = gw.store
    batch = 5000
    for first in range(already, count, batch):
        with store.writing() as cursor:
            execute = partial(cursor.execute, **store.read_model.write_options)
            store.read_model.write_runs(execute, rows(min(batch, count - first), first))
    store.analyze()


def p50(call: Any) -> float:
    timings = []
    for _ in range(CALLS):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def measure(gw: Gateway, count: int) -> dict[str, float]:
    newest = str(uuid.UUID(int=count))
    return {
        "runs() limit 50": p50(lambda: gw.runs()),
        "runs(session_key) limit 50": p50(lambda: gw.runs(session_key="agent:main:work:busy")),
        "runs(status='error') limit 50": p50(lambda: gw.runs(status="error")),
        "runs(trace_id)": p50(lambda: gw.runs(trace_id=str(uuid.UUID(int=count // 8)))),
        "run(run_id)": p50(lambda: gw.run(newest)),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        url, schema = store_url(args.store, Path(workdir))
        gw = await Gateway.open(config=GatewayConfig(), store=url)
        try:
            results: dict[str, Any] = {"store": args.store, "runs": args.runs}
            fill(gw, 1000, 0)
            small = measure(gw, 1000)
            fill(gw, args.runs, 1000)
            large = measure(gw, args.runs)
            results["p50_ms"] = {
                name: {"1k": round(small[name], 3), "large": round(large[name], 3),
                       "ratio": round(large[name] / small[name], 2)}
                for name in small
            }  # fmt: skip
        finally:
            await gw.close()
            drop_schema(schema)
    json.dump(results, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    asyncio.run(main())
