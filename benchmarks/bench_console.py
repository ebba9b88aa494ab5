"""Benchmark: the console's sessions page over many sessions. Not a test: figures for
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_console.py [--store sqlite|postgres]
        [--sessions N] [--repeats R] [--out FILE]

The store gets N sessions (each opened with one message, through the store's normal
write path, 100 sessions a save), a tenth of them cron sessions, a few labelled. Then
the sessions page is requested through the console app in process (routing, the query,
the template: everything but the network), the requests interleaved round-robin:

- ``first``: the first page (50 rows, newest first);
- ``deep``: the page after row 90% of the way down (keyset: same cost as the first);
- ``kind``: cron sessions only; ``search``: a piece of a label (a substring match);
- ``transcript``: one session's page.

Each figure is the median (p50) and p95 of R requests.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import structlog
from bench_stores import drop_schema, store_url
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.console.app import create_console
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.ports.session_read_model import SessionPage
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TOKEN = "bench-console-token-0123456789abcdef"
BATCH = 100


def key_of(n: int) -> str:
    return f"agent:main:cron:job-{n}" if n % 10 == 0 else f"agent:main:discord:group:g{n}"


def fill(store: EventSourcedStore, sessions: int) -> float:
    began = time.perf_counter()
    for first in range(0, sessions, BATCH):
        batch = []
        for n in range(first, min(first + BATCH, sessions)):
            at = START + timedelta(seconds=n)
            session = Session.open(key=key_of(n), session_id=uuid4(), agent_id="main", at=at)
            text = f"hello {n}"
            message = TranscriptMessage(
                role="user",
                content=[{"type": "text", "text": text}],
                timestamp=int(at.timestamp() * 1000),
            )
            session.append_message(message, at=at)
            if n % 1000 == 0:
                session.patch({"label": f"release-{n}"}, at=at)
            batch.append(session)
        store.save(*batch)
    return time.perf_counter() - began


def run(kind: str, sessions: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workdir:
        url, schema = store_url(kind, Path(workdir))
        config = GatewayConfig()
        rules = config.key_rules
        store = EventSourcedStore(url, kind_of=lambda state: rules.kind(state.key, None))
        try:
            fill_seconds = fill(store, sessions)
            store.analyze()
            app = FastAPI()
            app.mount(
                "/console", create_console(OffLoopStore(store), config, TokenSet.operator(TOKEN))
            )
            client = TestClient(app)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            # The row 90% of the way down, as a "Next page" link would name it.
            deep_rows = store.session_page(SessionPage(limit=int(sessions * 0.9)))
            deep = deep_rows[-1].state
            requests = {
                "first": ("/console/", {}),
                "deep": ("/console/", {"after": f"{deep.updated_at}:{deep.key}"}),
                "kind": ("/console/", {"kind": "cron"}),
                "search": ("/console/", {"q": "release-5"}),
                "transcript": (f"/console/sessions/{key_of(sessions // 2)}", {}),
            }
            times: dict[str, list[float]] = {name: [] for name in requests}
            rows: dict[str, int] = {}
            for name, (path, params) in requests.items():  # warm up, and check
                answer = client.get(path, params=params, headers=headers)
                if answer.status_code != 200:
                    raise SystemExit(f"{name}: HTTP {answer.status_code}")
                rows[name] = answer.text.count('<a href="/console/sessions/')
            for _ in range(repeats):
                for name, (path, params) in requests.items():
                    began = time.perf_counter()
                    client.get(path, params=params, headers=headers)
                    times[name].append(time.perf_counter() - began)
            return {
                "store": kind,
                "sessions": sessions,
                "events_in_log": store.log_position(),
                "fill_seconds": round(fill_seconds, 1),
                "repeats": repeats,
                "pages": {
                    name: {
                        "rows_linked": rows[name],
                        "p50_ms": round(statistics.median(spent) * 1000, 2),
                        "p95_ms": round(sorted(spent)[int(len(spent) * 0.95) - 1] * 1000, 2),
                    }
                    for name, spent in times.items()
                },
            }
        finally:
            store.close()
            drop_schema(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = json.dumps(run(args.store, args.sessions, args.repeats), indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
