"""Benchmark: ``audit state`` of a 100,000-event session. Not a test: figures for
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_audit_state.py [--store sqlite|postgres] [--events N]
        [--out FILE]

One session of N events (SessionOpened + N-1 messages, one second apart) is written
straight through the store port in batches; then the session is rebuilt at an early
version (10), at the middle and at the end, and at an early and a middle instant. Each
figure is the median wall time of 5 calls, with the peak Python memory one call
allocates (tracemalloc) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import structlog
from bench_stores import drop_schema, store_url
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.audit.state import SessionAsOf, session_as_of
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = "agent:main:discord:group:audited"
BATCH = 2_000
REPEATS = 5


def fill(store: EventSourcedStore, events: int) -> float:
    """Write one session of ``events`` events; returns the seconds it took."""
    began = time.perf_counter()
    session = Session.open(key=KEY, session_id=uuid4(), agent_id="main", at=START)
    for n in range(1, events):
        at = START + timedelta(seconds=n)
        session.append_message(
            TranscriptMessage(
                role="user" if n % 2 else "assistant",
                content=[{"type": "text", "text": f"message {n}: " + "lorem ipsum " * 8}],
                timestamp=int(at.timestamp() * 1000),
            ),
            at=at,
        )
        if len(session.pending_events) >= BATCH:
            store.save(session)
    store.save(session)
    return time.perf_counter() - began


def measure(call: Callable[[], SessionAsOf]) -> dict[str, Any]:
    times = []
    answer = call()
    for _ in range(REPEATS):
        began = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - began)
    tracemalloc.start()
    call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "version": answer.version,
        "messages": len(answer.transcript),
        "median_ms": round(statistics.median(times) * 1000, 2),
        "peak_alloc_mb": round(peak / 2**20, 2),
    }


def run(kind: str, events: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workdir:
        url, schema = store_url(kind, Path(workdir))
        store = EventSourcedStore(url, kind_of=lambda state: "group")
        try:
            fill_seconds = fill(store, events)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            middle = events // 2
            points: dict[str, Callable[[], SessionAsOf]] = {
                "version 10": lambda: session_as_of(store, KEY, version=10),
                f"version {middle}": lambda: session_as_of(store, KEY, version=middle),
                f"version {events} (latest)": lambda: session_as_of(store, KEY, version=events),
                "instant 00:00:08.5 after opening": lambda: session_as_of(
                    store, KEY, at=START + timedelta(seconds=8.5)
                ),
                f"instant {middle} s after opening": lambda: session_as_of(
                    store, KEY, at=START + timedelta(seconds=middle - 0.5)
                ),
            }
            figures = {name: measure(call) for name, call in points.items()}
            return {
                "store": kind,
                "events": events,
                "fill_seconds": round(fill_seconds, 1),
                "states": figures,
                "peak_rss_mb_before_queries": round(rss_before, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
        finally:
            store.close()
            drop_schema(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = run(args.store, args.events)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
