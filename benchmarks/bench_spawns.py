"""Benchmarks for sub-agents (issue 4). Not tests: figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_spawns.py [--store sqlite|postgres] [--quick] [--out FILE]

1. spawn → announce overhead with an instant scripted agent: wall time from
   sessions_spawn to the recorded report, per spawn, and per store transaction.
2. Archiving 10,000 expired children: spawn them (kept), let them announce, close the
   gateway, reopen it 61 virtual minutes later and time until every child is archived;
   peak memory of the whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from bench_stores import drop_schema, store_url
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import ScriptedRuntime, VirtualClock

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "done: {message}"},
        {"step": "subagent_announce", "reply": "Result: done\nNotes: none"},
    ]
}
START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def count(gateway: Gateway, name: str) -> int:
    return sum(1 for _, event in store_of(gateway).events() if type(event).__name__ == name)


async def spawn_overhead(kind: str, workdir: Path, spawns: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    gateway = await Gateway.open(store=url, runtime=ScriptedRuntime.from_dict(SCRIPT))
    try:
        await gateway.record_message("main", role="user", content="hi", channel="webchat", to="u")
        saves = 0
        original = store_of(gateway).save

        def counting(*aggregates: Any) -> None:
            nonlocal saves
            saves += 1
            original(*aggregates)

        store_of(gateway).save = counting  # type: ignore[method-assign]
        walls = []
        for index in range(spawns):
            started = time.perf_counter()
            result = await gateway.call_tool("main", "sessions_spawn", {"task": f"t{index}"})
            assert result["status"] == "accepted", result
            await gateway.wait_idle()
            walls.append(time.perf_counter() - started)
        assert count(gateway, "SubagentAnnounced") == spawns
        return {
            "spawns": spawns,
            "spawn_to_report_ms_p50": statistics.median(walls) * 1000,
            "spawn_to_report_ms_p99": sorted(walls)[int(0.99 * (len(walls) - 1))] * 1000,
            "saves_per_spawn": saves / spawns,
            "ms_per_save": statistics.median(walls) * 1000 / (saves / spawns),
        }
    finally:
        await gateway.close()
        drop_schema(schema)


async def archive_expired(kind: str, workdir: Path, children: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    clock = VirtualClock(start=START)
    gateway = await Gateway.open(store=url, runtime=ScriptedRuntime.from_dict(SCRIPT), clock=clock)
    try:
        await gateway.record_message("main", role="user", content="hi")
        started = time.perf_counter()
        for index in range(children):
            result = await gateway.call_tool("main", "sessions_spawn", {"task": f"t{index}"})
            assert result["status"] == "accepted", result
            if index % 500 == 499:
                await gateway.wait_idle()
        await gateway.wait_idle()
        setup = time.perf_counter() - started
    finally:
        await gateway.close()
    later = VirtualClock(start=START + timedelta(minutes=61))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    gateway = await Gateway.open(store=url, runtime=ScriptedRuntime.from_dict(SCRIPT), clock=later)
    try:
        await gateway.wait_idle()
        elapsed = time.perf_counter() - started
        archived = count(gateway, "SubagentArchived")
        listed = await gateway.call_tool("main", "sessions_list", {})
        assert archived == children, archived
        assert listed["count"] == 1, listed["count"]
        return {
            "children": children,
            "setup_s": setup,
            "archive_all_s": elapsed,
            "archived_per_s": children / elapsed,
            "peak_rss_mb_before_reopen": rss_before,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    finally:
        await gateway.close()
        drop_schema(schema)


async def run_all(kind: str, quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        return {
            "store": kind,
            "spawn_overhead": await spawn_overhead(kind, workdir, 20 if quick else 300),
            "archive": await archive_expired(kind, workdir, 200 if quick else 10_000),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    figures = asyncio.run(run_all(args.store, args.quick))
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
