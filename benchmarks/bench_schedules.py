"""Benchmarks for schedules (decision 36, ADR 0047). Not tests: figures for the report
and docs/schedules.md's claims.

    .venv/bin/python benchmarks/bench_schedules.py [--store sqlite|postgres] [--due 500]

1. Firing: an interval schedule driven by a VirtualClock through ``--due`` due times,
   each recording its firing and starting its run (an instant scripted agent): wall
   time per firing, the run included.
2. A gap: the gateway closed, the clock moved past 1, 100 and 10,000 due times, and the
   gateway reopened: the open's wall time (one late firing, whatever the gap).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from bench_stores import drop_schema, store_url
from sessionwire import Gateway
from sessionwire.testing import ScriptedRuntime, VirtualClock

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

SCRIPT = {"rules": [{"step": "scheduled", "reply": "done"}]}
START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
EVERY = 60


async def firing(kind: str, workdir: Path, due: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    clock = VirtualClock(start=START)
    gateway = await Gateway.open(store=url, clock=clock, runtime=ScriptedRuntime.from_dict(SCRIPT))
    try:
        await gateway.schedule("tick", every_seconds=EVERY, message="tick")
        began = time.perf_counter()
        await clock.advance(EVERY * due)
        await gateway.wait_idle()
        seconds = time.perf_counter() - began
        (listed,) = await gateway.schedules()
        assert listed["fired"] == due, listed
    finally:
        await gateway.close()
        drop_schema(schema)
    return {"due": due, "seconds": round(seconds, 3), "msPerFiring": round(seconds / due * 1000, 2)}


async def gap(kind: str, workdir: Path, missed: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    clock = VirtualClock(start=START)
    runtime = ScriptedRuntime.from_dict(SCRIPT)
    try:
        gateway = await Gateway.open(store=url, clock=clock, runtime=runtime)
        await gateway.schedule("tick", every_seconds=EVERY, message="tick")
        await gateway.close()
        await clock.advance(EVERY * missed)
        began = time.perf_counter()
        gateway = await Gateway.open(store=url, clock=clock, runtime=runtime)
        seconds = time.perf_counter() - began
        (listed,) = await gateway.schedules()
        assert (listed["fired"], listed["late"]) == (1, 1 if missed > 1 else 0), listed
        await gateway.close()
    finally:
        drop_schema(schema)
    return {"missed": missed, "openSeconds": round(seconds, 3)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--due", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        result = {
            "store": args.store,
            "firing": await firing(args.store, workdir, args.due),
            "gaps": [await gap(args.store, workdir, missed) for missed in (1, 100, 10_000)],
        }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
