"""Benchmark: ``audit timeline`` of one session in a large log. Not a test: figures for
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_timeline.py [--store sqlite|postgres]
        [--events N ...] [--out FILE]

For each log size N the store gets sessions of 100 events each (SessionOpened and 99
messages) up to N events, with the audited session among them: 40 events of its own and
5 runs it took part in (3 events each). Its timeline is then read two ways: by the index
(``session_timeline``, what ``audit timeline`` does) and by one pass over the whole log
(``_scanned``, what it did before the index). Each figure is the median wall time of 5
calls; both ways must give the same entries.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import structlog
from bench_stores import drop_schema, store_url
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.audit.timeline import TimelineEntry, _scanned, session_timeline
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = "agent:main:discord:group:audited"
PER_SESSION = 100
REPEATS = 5


def message(n: int, at: datetime) -> TranscriptMessage:
    return TranscriptMessage(
        role="user" if n % 2 else "assistant",
        content=[{"type": "text", "text": f"message {n}: " + "lorem ipsum " * 8}],
        timestamp=int(at.timestamp() * 1000),
    )


def session_of(key: str, events: int, at: datetime) -> Session:
    session = Session.open(key=key, session_id=uuid4(), agent_id="main", at=at)
    for n in range(1, events):
        session.append_message(message(n, at), at=at)
    return session


def run_for(key: str, at: datetime) -> Run:
    run = Run.start(
        run_id=uuid4(),
        session_key=key,
        agent_id="main",
        step="primary",
        message="sum up",
        timeout_seconds=30,
        at=at,
        requester_key="agent:main:main",
    )
    run.dispatch(at=at)
    run.complete(reply="done", usage=None, model=None, at=at)
    return run


def fill(store: EventSourcedStore, events: int) -> tuple[float, int]:
    """Sessions of PER_SESSION events up to ``events``, the audited one in the middle."""
    began = time.perf_counter()
    written = 0
    n = 0
    while written < events:
        at = START + timedelta(seconds=n)
        if n == events // PER_SESSION // 2:
            audited = session_of(KEY, 40, at)
            runs = [run_for(KEY, at) for _ in range(5)]
            store.save(audited, *runs)
            written += 40 + 15
        else:
            store.save(session_of(f"agent:main:discord:group:g{n}", PER_SESSION, at))
            written += PER_SESSION
        n += 1
    return time.perf_counter() - began, store.log_position()


def measure(call: Callable[[], list[TimelineEntry]]) -> tuple[dict[str, Any], list[TimelineEntry]]:
    times = []
    answer = call()
    for _ in range(REPEATS):
        began = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - began)
    figures = {
        "entries": len(answer),
        "median_ms": round(statistics.median(times) * 1000, 2),
        "min_ms": round(min(times) * 1000, 2),
        "max_ms": round(max(times) * 1000, 2),
    }
    return figures, answer


def run(kind: str, events: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workdir:
        url, schema = store_url(kind, Path(workdir))
        store = EventSourcedStore(url, kind_of=lambda state: "group")
        try:
            fill_seconds, logged = fill(store, events)
            indexed, by_index = measure(lambda: session_timeline(store, KEY).entries)
            scanned, by_scan = measure(lambda: list(_scanned(store, KEY)))
            if by_index != by_scan:
                raise SystemExit("the indexed timeline differs from the full scan")
            return {
                "store": kind,
                "events_in_log": logged,
                "fill_seconds": round(fill_seconds, 1),
                "indexed": indexed,
                "full_scan": scanned,
            }
        finally:
            store.close()
            drop_schema(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--events", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {"runs": [run(args.store, events) for events in args.events]}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
