"""Benchmark: the bulk paths (issue 14, target 5: ≥ 50,000 messages/s on SQLite). Not a
test: figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_bulk.py [--messages 20000] [--reps 3]
        [--stores sqlite,postgres] [--out FILE]

Three workloads, each into a fresh store, each repetition in a child process of its own
(so each reports its own peak RSS), repetitions interleaved (prefill, audit import,
import openclaw, prefill, ...):

- ``raw``: plain sqlite3 writing the same rows a prefill stores (see ``raw_sqlite``), at
  the same durability: the floor this disk and this machine set.
- ``prefill``: ``record_many`` of N messages into one session, batches of 1,000, through
  the public API, on SQLite and PostgreSQL (timed: the calls; the gateway is open and has
  recorded one message before, so pydantic's validators are built).
- ``audit-import-batched`` / ``-single``: ``sessionwire audit import FILE`` (in process,
  the CLI's own entry) of a whole-store export holding one session of N messages, into
  a new SQLite file. Batched: the session was prefilled by ``record_many`` (one
  MessagesAppended per 1,000). Single: recorded one by one (N MessageAppended events, a
  store recorded live); an import keeps the events as they are, so it replays N events.
- ``openclaw``: ``sessionwire import openclaw DIR`` of an OpenClaw state directory with one
  session whose transcript has N message lines, into a new SQLite file.

Each figure is messages/s over the timed call (median of the repetitions), with the CPU
seconds the process spent meanwhile (its threads, the store's writer included): on a
shared machine the wall rate also measures the other processes. The files the imports
read are made once, before any timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import structlog
from sessionwire.adapters.testkit.internals import store_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stores import drop_schema, store_url

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
BATCH = 1_000
TARGET = 50_000
KEY = "agent:main:discord:group:bulk"
SESSION_ID = "8c3a7f4e-1111-4a1b-9c2d-000000000001"


def text(n: int) -> str:
    return f"message {n}: " + "lorem ipsum " * 8


def batch_of(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if n % 2 else "assistant", "content": text(n)}
        for n in range(start, start + count)
    ]


# Inputs (made once, untimed) -----------------------------------------------------------


def make_export(workdir: Path, messages: int, *, batched: bool) -> Path:
    """A whole-store export of one session of ``messages``: recorded one by one (one
    MessageAppended each) or by ``record_many`` (one MessagesAppended per 1,000)."""
    from sessionwire import GatewayConfig, SyncGateway
    from sessionwire.adapters.cli.main import main
    from sessionwire.adapters.store.event_store import EventSourcedStore
    from sessionwire.domain.session import Session
    from sessionwire.domain.transcript import TranscriptMessage

    name = "batched" if batched else "single"
    url = f"sqlite:///{workdir}/export-{name}.db"
    if batched:
        with SyncGateway.open(store=url) as gateway:
            for start in range(0, messages, BATCH):
                gateway.record_many(KEY, batch_of(start, min(BATCH, messages - start)))
    else:
        store = EventSourcedStore(
            url, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key)
        )
        try:
            session = Session.open(key=KEY, session_id=uuid4(), agent_id="main", at=START)
            for n in range(messages):
                line = TranscriptMessage(
                    role="user" if n % 2 else "assistant",
                    content=[{"type": "text", "text": text(n)}],
                    timestamp=int(START.timestamp() * 1000),
                )
                session.append_message(line, at=START)
                if (n + 1) % BATCH == 0:
                    store.save(session)
            store.save(session)
        finally:
            store.close()
    out = workdir / f"export-{name}.jsonl"
    code = main(["--store", url, "audit", "export", "-o", str(out)])
    assert code == 0, "the export failed"
    return out


def make_openclaw(workdir: Path, messages: int) -> Path:
    """An OpenClaw state directory: one session with ``messages`` transcript lines."""
    root = workdir / "openclaw"
    sessions = root / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    last = START + timedelta(seconds=messages)
    store = {"agent:main:main": {"sessionId": SESSION_ID, "updatedAt": _ms(last)}}
    (sessions / "sessions.json").write_text(json.dumps(store))
    with (sessions / f"{SESSION_ID}.jsonl").open("w") as transcript:
        transcript.write(json.dumps({"type": "session", "version": 3, "id": SESSION_ID}) + "\n")
        for n in range(messages):
            message = {
                "role": "user" if n % 2 else "assistant",
                "content": [{"type": "text", "text": text(n)}],
                "timestamp": _ms(START + timedelta(seconds=n)),
            }
            line = {"type": "message", "id": f"m{n}", "message": message}
            transcript.write(json.dumps(line) + "\n")
    return root


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# One repetition (in a child process) ---------------------------------------------------


async def prefill(url: str, messages: int) -> tuple[float, float]:
    from sessionwire import Gateway, GatewayConfig

    gateway = await Gateway.open(config=GatewayConfig(), store=url)
    try:
        # One message elsewhere first: pydantic builds its validators on first use, once
        # per process; a gateway that has recorded anything has paid it already.
        await gateway.record_many("agent:main:warm", batch_of(0, 1))
        began, cpu = time.perf_counter(), _cpu()
        for start in range(0, messages, BATCH):
            await gateway.record_many(
                KEY, batch_of(start, min(BATCH, messages - start)), channel="bench"
            )
        elapsed, cpu = time.perf_counter() - began, _cpu() - cpu
        stored = store_of(gateway).session(KEY)
        assert stored is not None
        assert stored.state.message_count == messages
    finally:
        await gateway.close()
    return elapsed, cpu


def raw_sqlite(path: Path, messages: int) -> tuple[float, float]:
    """The floor: plain sqlite3 (WAL, synchronous=FULL, one commit per 1,000) writing what
    a prefill stores, no more: per batch one event row holding the batch's JSON, one
    transcript row per message (primary key (session, seq))."""
    import sqlite3

    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute(
        "CREATE TABLE events (id TEXT, version INTEGER, state BLOB, PRIMARY KEY (id, version))"
    )
    connection.execute(
        "CREATE TABLE transcript (session TEXT, seq INTEGER, role TEXT, message TEXT, "
        "PRIMARY KEY (session, seq))"
    )
    stamp = int(START.timestamp() * 1000)
    began, cpu = time.perf_counter(), _cpu()
    for start in range(0, messages, BATCH):
        rows = [
            (
                KEY,
                n + 2,
                item["role"],
                json.dumps(
                    {
                        "role": item["role"],
                        "content": [{"type": "text", "text": item["content"]}],
                        "timestamp": stamp,
                    },
                    separators=(",", ":"),
                ),
            )
            for n, item in enumerate(batch_of(start, min(BATCH, messages - start)), start)
        ]
        connection.execute("BEGIN IMMEDIATE")
        state = ("[" + ",".join(row[3] for row in rows) + "]").encode()
        connection.execute("INSERT INTO events VALUES (?, ?, ?)", (KEY, rows[-1][1], state))
        connection.executemany("INSERT INTO transcript VALUES (?, ?, ?, ?)", rows)
        connection.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - began, _cpu() - cpu
    connection.close()
    return elapsed, cpu


def cli(*args: str) -> tuple[float, float]:
    """The command as run, in process: its whole cost but the interpreter's start and the
    CLI's modules, imported lazily on first use (loaded here before the clock starts)."""
    import sessionwire.adapters.cli.audit
    import sessionwire.adapters.cli.imports  # noqa: F401
    from sessionwire.adapters.cli.main import main

    began, cpu = time.perf_counter(), _cpu()
    code = main(list(args))
    elapsed, cpu = time.perf_counter() - began, _cpu() - cpu
    assert code == 0, f"sessionwire {' '.join(args)} exited {code}"
    return elapsed, cpu


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def one(workload: str, store: str, messages: int, source: str, workdir: Path) -> dict[str, Any]:
    url, schema = store_url(store, workdir)
    # CPU: this process's threads over the timed part, the store's writer thread included.
    try:
        if workload == "raw":
            elapsed, cpu = raw_sqlite(workdir / f"raw-{uuid4().hex[:8]}.db", messages)
        elif workload == "prefill":
            elapsed, cpu = asyncio.run(prefill(url, messages))
        elif workload.startswith("audit-import"):
            elapsed, cpu = cli("--store", url, "--json", "audit", "import", source)
        else:
            elapsed, cpu = cli("--store", url, "--json", "import", "openclaw", source)
    finally:
        drop_schema(schema)
    return {
        "seconds": elapsed,
        "messages_per_s": messages / elapsed,
        "messages_per_cpu_s": messages / cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# The run ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--stores", default="sqlite,postgres", help="for the prefill")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", nargs=4, metavar=("WORKLOAD", "STORE", "SOURCE", "DIR"))
    args = parser.parse_args()
    if args.one:
        workload, store, source, directory = args.one
        print(json.dumps(one(workload, store, args.messages, source, Path(directory))))
        return

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        began = time.perf_counter()
        batched = make_export(workdir, args.messages, batched=True)
        single = make_export(workdir, args.messages, batched=False)
        openclaw = make_openclaw(workdir, args.messages)
        print(f"inputs made in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        runs = [("raw", "sqlite", "-")]
        runs += [("prefill", store, "-") for store in args.stores.split(",")]
        runs += [
            ("audit-import-batched", "sqlite", str(batched)),
            ("audit-import-single", "sqlite", str(single)),
            ("openclaw", "sqlite", str(openclaw)),
        ]
        results: dict[str, list[dict[str, Any]]] = {}
        for rep in range(args.reps):
            for workload, store, source in runs:
                done = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--messages",
                        str(args.messages),
                        "--one",
                        workload,
                        store,
                        source,
                        str(workdir),
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    sys.exit(f"{workload} on {store} failed:\n{done.stdout}{done.stderr}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                name = f"{workload}[{store}]"
                results.setdefault(name, []).append(row)
                print(
                    f"rep {rep + 1} {name}: {row['messages_per_s']:,.0f} messages/s "
                    f"({row['seconds']:.2f} s, {row['messages_per_cpu_s']:,.0f} per CPU "
                    f"second, peak RSS {row['peak_rss_mb']:.0f} MB)",
                    file=sys.stderr,
                )

    figures = []
    print(f"\n{args.messages:,} messages, {args.reps} interleaved reps, medians\n")
    # Per CPU second: what the code costs, whatever else the machine runs meanwhile (the
    # wall-clock rate on a shared machine is also the other processes' share of it).
    print(
        f"{'workload':<24} {'messages/s':>12} {'target':>8} {'per CPU s':>10} {'peak RSS MB':>12}"
    )
    for name, rows in results.items():
        rate = statistics.median(r["messages_per_s"] for r in rows)
        per_cpu = statistics.median(r["messages_per_cpu_s"] for r in rows)
        rss = max(r["peak_rss_mb"] for r in rows)
        met = "met" if rate >= TARGET else "no"
        print(f"{name:<24} {rate:>12,.0f} {met:>8} {per_cpu:>10,.0f} {rss:>12.0f}")
        figures.append(
            {
                "figure": f"messages_per_s[{name}]",
                "value": rate,
                "target": TARGET,
                "reps": [r["messages_per_s"] for r in rows],
                "messages_per_cpu_s": per_cpu,
                "peak_rss_mb": rss,
            }
        )
    if args.out:
        args.out.write_text(json.dumps({"messages": args.messages, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
