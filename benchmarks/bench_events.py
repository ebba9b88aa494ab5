"""Benchmark: the live event stream (``gw.subscribe``, ADR 0023). Not a test: figures for
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_events.py [--events N] [--reps R] [--no-postgres]
        [--out FILE]

1. Latency from commit to subscriber, p50/p99 over N events written one at a time:
   - SQLite, one process: the subscriber is woken by the commit (no polling);
   - PostgreSQL, one process: woken by this process's sealer after its pass;
   - PostgreSQL, two processes: a writer process and a subscriber process (another
     gateway on the same schema, which finds the writer's events by its poll, every
     0.25 s). The writer notes the wall time each save returned (committed), the
     subscriber the time each event reached it.
2. The writer's append rate (``record_message``, one message per save, SQLite) with 0,
   10 and 100 subscribers reading every event in the same process, and 100 with page
   sharing turned off; in one interleaved run (R rounds of every setting, each on a
   fresh store), reported as ratios to 0 subscribers (median of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
from bench_stores import drop_schema, store_url
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.event_stream import subscription as stream_module

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

SHARED_PAGES = stream_module.CACHED_PAGES


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def latency_figures(samples_ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(samples_ms, 0.50), 3),
        "p99_ms": round(percentile(samples_ms, 0.99), 3),
        "max_ms": round(max(samples_ms), 3),
        "events": len(samples_ms),
    }


def text_of(event: dict[str, Any]) -> str:
    return str(event["data"]["message"]["content"][0]["text"])


async def latency_in_process(url: str, events: int) -> dict[str, float]:
    """One gateway: the writer writes one message at a time, the subscriber (a task of
    the same loop) notes when each arrives; committed is when the save returned."""
    gw = await Gateway.open(store=url)
    try:
        await gw.record_message("bench", role="user", content="warm-up")
        store_of(gw).seal()
        received: dict[str, float] = {}
        arrived: dict[str, asyncio.Future[None]] = {}
        loop = asyncio.get_running_loop()
        subscription = gw.subscribe(after=store_of(gw).sealed_position())

        async def follow() -> None:
            async for event in subscription:
                if event["type"] == "MessageAppended":
                    text = text_of(event)
                    received[text] = time.perf_counter()
                    arrived.setdefault(text, loop.create_future()).set_result(None)
                    if len(received) == events:
                        return

        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0)
        samples = []
        for n in range(events):
            text = f"e{n}"
            await gw.record_message("bench", role="user", content=text)
            committed = time.perf_counter()
            await arrived.setdefault(text, loop.create_future())
            samples.append((received[text] - committed) * 1000)
        await follower
        return latency_figures(samples)
    finally:
        await gw.close()


async def pg_writer(url: str, events: int, out: Path) -> None:
    gw = await Gateway.open(store=url)
    try:
        stamps = {}
        for n in range(events):
            await gw.record_message("bench", role="user", content=f"e{n}")
            stamps[f"e{n}"] = time.time()  # committed: the save returned
            await asyncio.sleep(0.01)  # a steady writer, not a burst
        out.write_text(json.dumps(stamps))
    finally:
        await gw.close()


async def pg_subscriber(url: str, events: int, out: Path, ready: Path) -> None:
    gw = await Gateway.open(store=url, resume=False)
    try:
        received = {}
        subscription = gw.subscribe(after=0)
        ready.write_text("ready")
        async for event in subscription:
            if event["type"] == "MessageAppended":
                received[text_of(event)] = time.time()
                if len(received) == events:
                    break
        out.write_text(json.dumps(received))
    finally:
        await gw.close()


def latency_two_processes(url: str, events: int, workdir: Path) -> dict[str, float]:
    script = str(Path(__file__).resolve())
    wrote, got, ready = workdir / "wrote.json", workdir / "got.json", workdir / "ready"
    # The schema exists before either process opens it.
    asyncio.run(_create(url))
    subscriber = subprocess.Popen(
        [sys.executable, script, "--role", "subscriber", "--url", url,
         "--events", str(events), "--file", str(got), "--ready", str(ready)]
    )  # fmt: skip
    while not ready.exists() and subscriber.poll() is None:
        time.sleep(0.05)  # a benchmark's own start-up, not the gateway's
    writer = subprocess.run(
        [sys.executable, script, "--role", "writer", "--url", url,
         "--events", str(events), "--file", str(wrote)],
        check=True,
    )  # fmt: skip
    assert writer.returncode == 0
    assert subscriber.wait(timeout=600) == 0
    committed = json.loads(wrote.read_text())
    received = json.loads(got.read_text())
    return latency_figures([(received[k] - committed[k]) * 1000 for k in committed])


async def _create(url: str) -> None:
    gw = await Gateway.open(store=url)
    await gw.close()


async def append_rate(url: str, subscribers: int, messages: int, *, shared: bool) -> float:
    """Messages per second one writer records while ``subscribers`` read every event."""
    stream_module.CACHED_PAGES = SHARED_PAGES if shared else 0
    gw = await Gateway.open(store=url)
    try:
        await gw.record_message("bench", role="user", content="warm-up")
        start = store_of(gw).sealed_position()
        last = start + messages

        async def follow() -> None:
            async for event in gw.subscribe(after=start):
                if event["position"] >= last:
                    return

        followers = [asyncio.ensure_future(follow()) for _ in range(subscribers)]
        await asyncio.sleep(0)
        began = time.perf_counter()
        for n in range(messages):
            await gw.record_message("bench", role="user", content=f"m{n}")
        elapsed = time.perf_counter() - began
        await asyncio.gather(*followers)
        return messages / elapsed
    finally:
        stream_module.CACHED_PAGES = SHARED_PAGES
        await gw.close()


SETTINGS = (("0", 0, True), ("10", 10, True), ("100", 100, True), ("100 unshared", 100, False))


def writer_cost(messages: int, reps: int, workdir: Path) -> dict[str, Any]:
    rates: dict[str, list[float]] = {name: [] for name, _, _ in SETTINGS}
    for _ in range(reps):
        for name, subscribers, shared in SETTINGS:
            url, _ = store_url("sqlite", workdir)
            rates[name].append(asyncio.run(append_rate(url, subscribers, messages, shared=shared)))
    base = statistics.median(rates["0"])
    return {
        name: {
            "appends_per_s_median": round(statistics.median(values), 1),
            "ratio_to_0": round(statistics.median(values) / base, 3),
            "rounds": [round(v, 1) for v in values],
        }
        for name, values in rates.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500, help="events per latency run")
    parser.add_argument("--messages", type=int, default=500, help="appends per rate round")
    parser.add_argument("--reps", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--role", choices=["writer", "subscriber"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "writer":
        asyncio.run(pg_writer(args.url, args.events, args.file))
        return 0
    if args.role == "subscriber":
        asyncio.run(pg_subscriber(args.url, args.events, args.file, args.ready))
        return 0

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        url, _ = store_url("sqlite", workdir)
        figures["latency_sqlite"] = asyncio.run(latency_in_process(url, args.events))
        print("latency, SQLite, one process:", figures["latency_sqlite"], flush=True)
        if not args.no_postgres:
            url, schema = store_url("postgres", workdir)
            try:
                figures["latency_postgres"] = asyncio.run(latency_in_process(url, args.events))
            finally:
                drop_schema(schema)
            print("latency, PostgreSQL, one process:", figures["latency_postgres"], flush=True)
            url, schema = store_url("postgres", workdir)
            try:
                figures["latency_postgres_two_processes"] = latency_two_processes(
                    url, args.events, workdir
                )
            finally:
                drop_schema(schema)
            print(
                "latency, PostgreSQL, two processes:",
                figures["latency_postgres_two_processes"],
                flush=True,
            )
        figures["writer_cost_sqlite"] = writer_cost(args.messages, args.reps, workdir)
        for name, row in figures["writer_cost_sqlite"].items():
            print(f"append rate with {name} subscriber(s): {row}", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
