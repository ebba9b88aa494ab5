#!/usr/bin/env python
"""Core benchmarks: durable appends, ``sessions_list`` and ``sessions_history`` at scale.

A benchmark, not a test: it reports figures beside their targets and exits 0 whether or
not the targets are met (non-zero only when a run breaks or reads back wrong data).

    .venv/bin/python benchmarks/bench_core.py --store all --out bench.json
    .venv/bin/python benchmarks/bench_core.py --quick --store sqlite     # smoke size

Every (store, workload) pair runs in a fresh subprocess, on a fresh temp dir (SQLite) or
fresh schemas (PostgreSQL, dropped afterwards), so each peak-RSS figure is its own run's.

Workloads:

- ``append``: W1 of shared/reference/peer-bench-results.md — 5,000 ``record_message``
  calls round-robin over 50 sessions (one durable commit each), against raw ``sqlite3``
  (or raw ``psycopg``) doing per message one transaction with an INSERT into ``messages``
  and an UPSERT of a ``sessions`` row, with the durability settings read from our own
  store's connection. Repetitions are interleaved, each on a fresh database.
- ``reads``: a store prefilled with 100,000 one-message sessions, one 100,000-message
  session and one 1,000-message session (through ``store.save`` in batches; the same
  events and read model as ``record_message`` writes, checked at small size first), then
  ``sessions_list(limit=50)``, ``sessions_history(limit=200)`` on both sessions, and
  appends into the big session against appends into a fresh one, interleaved; then the
  same reads again after ANALYZE (the store never runs it; see docs/benchmarks.md).

``--repeat N`` runs every (store, workload) N times, interleaved, and reports medians with
min-max; ``--wait-quiet S`` waits up to S seconds for an idle machine before each worker.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import math
import os
import platform
import pstats
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import structlog
from sessionwire import SyncGateway
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.clock_and_ids import Clock, IdSource
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage, content_blocks

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
PAYLOAD_BYTES = 300  # JSON bytes of one stored message, as in the peers' workload
REQUESTER = "agent:main:main"
FILL_PREFIX = "agent:main:bench:fill:"
BIG_KEY = "agent:main:bench:big"
SMALL_KEY = "agent:main:bench:small"
FRESH_KEY = "agent:main:bench:fresh"
W1_PREFIX = "agent:main:bench:w1:"

# name -> (comparison, bound, unit, description)
TARGETS: dict[str, tuple[str, float, str, str]] = {
    "append_ratio_vs_raw": (">=", 0.5, "x", "W1 appends/s, ours / raw (same durability)"),
    "sessions_list_p50_ms": ("<=", 5.0, "ms", "sessions_list(limit=50), 100k sessions"),
    "sessions_history_p50_ms": ("<=", 10.0, "ms", "sessions_history(limit=200), 100k-msg session"),
    "history_big_vs_small_ratio": ("<=", 2.0, "x", "history p50, 100k-msg / 1k-msg session"),
    "append_big_vs_fresh_ratio": ("<=", 2.0, "x", "append p50, 100k-msg / fresh session"),
    "sessions_list_p50_ms_after_analyze": ("<=", 5.0, "ms", "the same, after ANALYZE"),
    "sessions_history_p50_ms_after_analyze": ("<=", 10.0, "ms", "the same, after ANALYZE"),
}


@dataclass(frozen=True)
class Size:
    w1_appends: int
    w1_sessions: int
    reps: int
    fill_sessions: int
    big_messages: int
    small_messages: int
    calls: int
    appends: int
    check_sessions: int
    check_messages: int


FULL = Size(
    w1_appends=5_000,
    w1_sessions=50,
    reps=3,
    fill_sessions=100_000,
    big_messages=100_000,
    small_messages=1_000,
    calls=200,
    appends=300,
    check_sessions=60,
    check_messages=250,
)
QUICK = Size(
    w1_appends=300,
    w1_sessions=10,
    reps=1,
    fill_sessions=500,
    big_messages=2_000,
    small_messages=250,
    calls=20,
    appends=20,
    check_sessions=12,
    check_messages=30,
)


# Payload ------------------------------------------------------------------------------

_WORDS = [
    *("session", "gateway", "transcript", "agent", "message", "history", "list", "tool"),
    *("reply", "channel", "model", "token", "context", "thread", "user", "assistant"),
    *("result", "audit", "event", "store", "replay", "index", "query", "commit"),
    *("durable", "latency", "budget", "review", "deploy"),
]


def message_text(i: int, role: str) -> str:
    """Deterministic text whose stored message JSON is PAYLOAD_BYTES long."""
    probe = TranscriptMessage(
        role=role,  # type: ignore[arg-type]
        content=content_blocks(""),
        timestamp=1_700_000_000_000,
    )
    room = PAYLOAD_BYTES - len(probe.to_json().encode())
    words = [f"#{i}"]
    k = i
    while sum(len(w) + 1 for w in words) < room:
        k = (k * 1103515245 + 12345) % 2**31
        words.append(_WORDS[k % len(_WORDS)])
    return " ".join(words)[:room]


def role_of(i: int) -> str:
    return "user" if i % 2 == 0 else "assistant"


def stamped(i: int, at: datetime) -> TranscriptMessage:
    role = role_of(i)
    return TranscriptMessage(
        role=role,  # type: ignore[arg-type]
        content=content_blocks(message_text(i, role)),
        timestamp=int(at.timestamp() * 1000),
    )


# Statistics -----------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 4),
        "p99_ms": round(pct(ms, 99), 4),
        "mean_ms": round(statistics.fmean(ms), 4),
        "max_ms": round(max(ms), 4),
    }


def peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    scale = 1 if sys.platform == "darwin" else 1024
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20, 1)


# Stores ---------------------------------------------------------------------------------


class SettableClock(Clock):
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    async def sleep(self, seconds: float) -> None:
        return None


class CountingIds(IdSource):
    def __init__(self) -> None:
        self.n = 0

    def new_id(self) -> uuid.UUID:
        self.n += 1
        return uuid.UUID(int=self.n)


def first_value(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


class StoreFactory:
    """Fresh store URLs for one worker: files in a temp dir, or schemas dropped at exit."""

    def __init__(self, kind: str, postgres_url: str) -> None:
        self.kind = kind
        self.postgres_url = postgres_url
        self._tmp = tempfile.TemporaryDirectory(prefix="sessionwire-bench-")
        self.schemas: list[str] = []

    def fresh(self, name: str) -> str:
        if self.kind == "sqlite":
            path = Path(self._tmp.name) / f"{name}-{uuid.uuid4().hex[:8]}"
            path.mkdir()
            return f"sqlite:///{path}/sessions.db"
        schema = self.fresh_schema()
        return f"{self.postgres_url}?schema={schema}"

    def fresh_dir(self) -> Path:
        path = Path(self._tmp.name) / f"raw-{uuid.uuid4().hex[:8]}"
        path.mkdir()
        return path

    def fresh_schema(self) -> str:
        schema = f"bench_{uuid.uuid4().hex[:16]}"
        self.schemas.append(schema)
        return schema

    def close(self) -> None:
        self._tmp.cleanup()
        if self.schemas:
            import psycopg

            with psycopg.connect(self.postgres_url, autocommit=True) as connection:
                for schema in self.schemas:
                    connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def durability_of(gw: SyncGateway, kind: str) -> dict[str, str]:
    """The durability settings of our store's own connection."""
    datastore = store_of(gw).recorder.datastore
    found: dict[str, str] = {}
    with datastore.transaction(commit=False) as cursor:
        names = ("journal_mode", "synchronous") if kind == "sqlite" else ("synchronous_commit",)
        for name in names:
            cursor.execute(f"PRAGMA {name}" if kind == "sqlite" else f"SHOW {name}")
            found[name] = str(first_value(cursor.fetchone()))
    return found


# Raw baselines --------------------------------------------------------------------------


class RawSqlite:
    """The peers' raw adapter: one transaction per message, INSERT + UPSERT."""

    def __init__(self, directory: Path, synchronous: str) -> None:
        self.connection = sqlite3.connect(
            directory / "raw.db", isolation_level=None, check_same_thread=False
        )
        c = self.connection
        c.execute("PRAGMA journal_mode=WAL")
        c.execute(f"PRAGMA synchronous={int(synchronous)}")
        c.execute(
            "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, created_at REAL NOT NULL, "
            "updated_at REAL NOT NULL)"
        )
        c.execute("CREATE INDEX sessions_updated ON sessions (updated_at)")
        c.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "session_key TEXT NOT NULL, data TEXT NOT NULL)"
        )
        c.execute("CREATE INDEX messages_session ON messages (session_key, id)")

    def settings(self) -> dict[str, str]:
        c = self.connection
        return {
            "journal_mode": str(c.execute("PRAGMA journal_mode").fetchone()[0]),
            "synchronous": str(c.execute("PRAGMA synchronous").fetchone()[0]),
        }

    def append(self, key: str, message: dict[str, Any]) -> None:
        now = time.time()
        c = self.connection
        c.execute("BEGIN")
        c.execute(
            "INSERT INTO sessions (session_key, created_at, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (session_key) DO UPDATE SET updated_at = excluded.updated_at",
            (key, now, now),
        )
        c.execute(
            "INSERT INTO messages (session_key, data) VALUES (?, ?)",
            (key, json.dumps(message, separators=(",", ":"), ensure_ascii=False)),
        )
        c.execute("COMMIT")

    def counts(self) -> tuple[int, int]:
        c = self.connection
        return (
            c.execute("SELECT count(*) FROM sessions").fetchone()[0],
            c.execute("SELECT count(*) FROM messages").fetchone()[0],
        )

    def close(self) -> None:
        self.connection.close()


class RawPostgres:
    """The same raw adapter on psycopg, in its own fresh schema."""

    def __init__(self, url: str, schema: str, synchronous_commit: str) -> None:
        import psycopg

        self.connection = psycopg.connect(url, autocommit=True)
        c = self.connection
        self.s = f'"{schema}"'
        c.execute(f"CREATE SCHEMA {self.s}")
        c.execute(f"SET synchronous_commit = '{synchronous_commit}'")
        c.execute(
            f"CREATE TABLE {self.s}.sessions (session_key TEXT PRIMARY KEY, "
            "created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)"
        )
        c.execute(f"CREATE INDEX ON {self.s}.sessions (updated_at)")
        c.execute(
            f"CREATE TABLE {self.s}.messages (id BIGSERIAL PRIMARY KEY, "
            "session_key TEXT NOT NULL, data TEXT NOT NULL)"
        )
        c.execute(f"CREATE INDEX ON {self.s}.messages (session_key, id)")
        self.upsert = (
            f"INSERT INTO {self.s}.sessions (session_key, created_at, updated_at) "
            "VALUES (%s, %s, %s) ON CONFLICT (session_key) "
            "DO UPDATE SET updated_at = excluded.updated_at"
        )
        self.insert = f"INSERT INTO {self.s}.messages (session_key, data) VALUES (%s, %s)"

    def settings(self) -> dict[str, str]:
        row = self.connection.execute("SHOW synchronous_commit").fetchone()
        return {"synchronous_commit": str(row[0]) if row else "?"}

    def append(self, key: str, message: dict[str, Any]) -> None:
        now = time.time()
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        with self.connection.transaction():
            self.connection.execute(self.upsert, (key, now, now))
            self.connection.execute(self.insert, (key, data))

    def counts(self) -> tuple[int, int]:
        c = self.connection
        sessions = c.execute(f"SELECT count(*) FROM {self.s}.sessions").fetchone()
        messages = c.execute(f"SELECT count(*) FROM {self.s}.messages").fetchone()
        return (sessions[0] if sessions else 0, messages[0] if messages else 0)

    def close(self) -> None:
        self.connection.close()


# Workload: appends (W1) -------------------------------------------------------------------


def w1_messages(size: Size) -> list[tuple[str, str, str]]:
    """(session key, role, text) for each W1 append: round-robin over the sessions."""
    return [
        (f"{W1_PREFIX}{i % size.w1_sessions:03d}", role_of(i), message_text(i, role_of(i)))
        for i in range(size.w1_appends)
    ]


def timed_loop(calls: list[Callable[[], Any]]) -> tuple[float, list[float]]:
    latencies: list[float] = []
    clock = time.perf_counter
    start = clock()
    for call in calls:
        t0 = clock()
        call()
        latencies.append(clock() - t0)
    return clock() - start, latencies


def record_calls(gw: SyncGateway, work: list[tuple[str, str, str]]) -> list[Callable[[], Any]]:
    """One ``record_message`` call per (key, role, text) of the workload."""
    return [(lambda k=k, r=r, t=t: gw.record_message(k, role=r, content=t)) for k, r, t in work]


def raw_append_calls(
    raw: RawSqlite | RawPostgres, work: list[tuple[str, str, str]]
) -> list[Callable[[], Any]]:
    """The same workload as plain inserts of the dict we store: role, blocks, timestamp."""

    def call(k: str, r: str, t: str) -> None:
        message = {
            "role": r,
            "content": [{"type": "text", "text": t}],
            "timestamp": int(time.time() * 1000),
        }
        raw.append(k, message)

    return [(lambda k=k, r=r, t=t: call(k, r, t)) for k, r, t in work]


def run_ours_w1(gw: SyncGateway, work: list[tuple[str, str, str]]) -> dict[str, Any]:
    wall, latencies = timed_loop(record_calls(gw, work))
    return {"wall_s": round(wall, 4), "per_s": round(len(work) / wall, 1), **summary_ms(latencies)}


def run_raw_w1(raw: RawSqlite | RawPostgres, work: list[tuple[str, str, str]]) -> dict[str, Any]:
    wall, latencies = timed_loop(raw_append_calls(raw, work))
    return {"wall_s": round(wall, 4), "per_s": round(len(work) / wall, 1), **summary_ms(latencies)}


def check_w1(gw: SyncGateway, size: Size, work: list[tuple[str, str, str]]) -> None:
    listed = gw.call_tool(REQUESTER, "sessions_list", {"limit": 200})
    expect(listed.get("count") == min(200, size.w1_sessions), f"W1 list: {listed}")
    last_key, _, last_text = work[-1]
    history = gw.call_tool(REQUESTER, "sessions_history", {"sessionKey": last_key, "limit": 1000})
    messages = history.get("messages", [])
    expect(len(messages) == size.w1_appends // size.w1_sessions, "W1 history length")
    expect(messages[-1]["content"][0]["text"] == last_text, "W1 newest message")


def workload_append(kind: str, size: Size, postgres_url: str, profile_dir: Path | None) -> dict:
    stores = StoreFactory(kind, postgres_url)
    work = w1_messages(size)
    reps: list[dict[str, Any]] = []
    try:
        for rep in range(size.reps):
            gw = SyncGateway.open(store=stores.fresh(f"w1-ours-{rep}"))
            try:
                ours_settings = durability_of(gw, kind)
                if kind == "sqlite":
                    expect(ours_settings["journal_mode"] == "wal", f"ours: {ours_settings}")
                    raw: RawSqlite | RawPostgres = RawSqlite(
                        stores.fresh_dir(), ours_settings["synchronous"]
                    )
                else:
                    raw = RawPostgres(
                        postgres_url, stores.fresh_schema(), ours_settings["synchronous_commit"]
                    )
                raw_settings = raw.settings()
                expect(
                    all(raw_settings[k] == v for k, v in ours_settings.items()),
                    f"raw settings {raw_settings} differ from ours {ours_settings}",
                )
                # Interleave: odd repetitions run ours first.
                if rep % 2 == 0:
                    raw_result = run_raw_w1(raw, work)
                    ours_result = run_ours_w1(gw, work)
                else:
                    ours_result = run_ours_w1(gw, work)
                    raw_result = run_raw_w1(raw, work)
                expect(raw.counts() == (size.w1_sessions, size.w1_appends), "raw counts")
                raw.close()
                check_w1(gw, size, work)
                if profile_dir is not None and rep == 0:
                    profile_w1(gw, size, kind, profile_dir)
            finally:
                gw.close()
            reps.append(
                {
                    "rep": rep,
                    "ours": ours_result,
                    "raw": raw_result,
                    "ratio": round(ours_result["per_s"] / raw_result["per_s"], 4),
                    "durability": ours_settings,
                }
            )
    finally:
        stores.close()
    ratio = statistics.median(r["ratio"] for r in reps)
    return {
        "workload": "append",
        "appends": size.w1_appends,
        "sessions": size.w1_sessions,
        "payload_bytes": PAYLOAD_BYTES,
        "reps": reps,
        "durability": reps[0]["durability"],
        "ours_per_s_median": statistics.median(r["ours"]["per_s"] for r in reps),
        "raw_per_s_median": statistics.median(r["raw"]["per_s"] for r in reps),
        "ours_p50_ms_median": statistics.median(r["ours"]["p50_ms"] for r in reps),
        "ours_p99_ms_median": statistics.median(r["ours"]["p99_ms"] for r in reps),
        "raw_p50_ms_median": statistics.median(r["raw"]["p50_ms"] for r in reps),
        "raw_p99_ms_median": statistics.median(r["raw"]["p99_ms"] for r in reps),
        "figures": {"append_ratio_vs_raw": round(ratio, 4)},
        "peak_rss_mb": peak_rss_mb(),
    }


def profile_w1(gw: SyncGateway, size: Size, kind: str, profile_dir: Path) -> None:
    """An extra, untimed pass under cProfile into the same store (other sessions)."""
    work = [(f"{W1_PREFIX}p{k[-3:]}", r, t) for k, r, t in w1_messages(size)]
    with profiled(profile_dir / f"{kind}-append"):
        for k, r, t in work:
            gw.record_message(k, role=r, content=t)


# Workload: reads at scale -----------------------------------------------------------------


def fill_sessions(
    store: Any, count: int, base: datetime, ids: IdSource, batch: int, prefix: str = FILL_PREFIX
) -> None:
    """``count`` sessions of one message each, ``batch`` sessions per transaction."""
    for start in range(0, count, batch):
        aggregates = []
        for i in range(start, min(count, start + batch)):
            at = base + timedelta(milliseconds=i)
            session = Session.open(
                key=f"{prefix}{i:06d}", session_id=ids.new_id(), agent_id="main", at=at
            )
            session.append_message(stamped(i, at), at=at)
            aggregates.append(session)
        store.save(*aggregates)


def fill_session(
    store: Any, key: str, count: int, base: datetime, ids: IdSource, batch: int
) -> None:
    """One session of ``count`` messages, ``batch`` messages per transaction."""
    session = Session.open(key=key, session_id=ids.new_id(), agent_id="main", at=base)
    for i in range(count):
        at = base + timedelta(milliseconds=i)
        session.append_message(stamped(i, at), at=at)
        if (i + 1) % batch == 0 or i + 1 == count:
            store.save(session)


def public_fill(gw: SyncGateway, clock: SettableClock, size: Size, base: datetime) -> None:
    for i in range(size.check_sessions):
        clock.at = base + timedelta(milliseconds=i)
        role = role_of(i)
        gw.record_message(f"{FILL_PREFIX}{i:06d}", role=role, content=message_text(i, role))
    later = base + timedelta(days=1)
    for i in range(size.check_messages):
        clock.at = later + timedelta(milliseconds=i)
        role = role_of(i)
        gw.record_message(SMALL_KEY, role=role, content=message_text(i, role))


def log_of(store: Any) -> list[tuple[int, str, dict[str, Any]]]:
    return [(n, type(e).__qualname__, e.model_dump(mode="json")) for n, e in store.events()]


def check_prefill_equivalence(stores: StoreFactory, size: Size) -> dict[str, Any]:
    """The fast prefill must leave the same events and read model as record_message."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    clock = SettableClock(base)
    public = SyncGateway.open(store=stores.fresh("check-public"), clock=clock, ids=CountingIds())
    fast = SyncGateway.open(store=stores.fresh("check-fast"), clock=clock, ids=CountingIds())
    try:
        public_fill(public, clock, size, base)
        fast_store = store_of(fast)
        ids = internals(fast).ids
        # Small odd batches, so that several sessions and messages share a transaction.
        fill_sessions(fast_store, size.check_sessions, base, ids, batch=7)
        fill_session(
            fast_store, SMALL_KEY, size.check_messages, base + timedelta(days=1), ids, batch=64
        )
        public_model = store_of(public).read_model_snapshot()
        fast_model = fast_store.read_model_snapshot()
        same_model = public_model == fast_model
        same_log = log_of(store_of(public)) == log_of(fast_store)
        expect(same_model, "fast prefill: read model differs from the public path's")
        expect(same_log, "fast prefill: event log differs from the public path's")
        return {
            "sessions": size.check_sessions,
            "messages": size.check_messages,
            "read_model_rows": {k: len(v) for k, v in public_model.items()},
            "same_read_model": same_model,
            "same_event_log": same_log,
        }
    finally:
        public.close()
        fast.close()


def workload_reads(kind: str, size: Size, postgres_url: str, profile_dir: Path | None) -> dict:
    stores = StoreFactory(kind, postgres_url)
    result: dict[str, Any] = {"workload": "reads"}
    try:
        result["prefill_check"] = check_prefill_equivalence(stores, size)
        gw = SyncGateway.open(store=stores.fresh("reads"))
        try:
            result.update(run_reads(gw, kind, size, profile_dir))
        finally:
            gw.close()
    finally:
        stores.close()
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def run_reads(gw: SyncGateway, kind: str, size: Size, profile_dir: Path | None) -> dict:
    store = store_of(gw)
    ids = internals(gw).ids
    out: dict[str, Any] = {
        "fill_sessions": size.fill_sessions,
        "big_messages": size.big_messages,
        "small_messages": size.small_messages,
        "prefill_method": "store.save(*aggregates): 1,000 sessions or 1,000 messages per "
        "transaction (same events and read-model rows as record_message; checked)",
    }
    # Prefill in the past, so that the timed appends are the newest sessions.
    base = datetime.now(tz=UTC) - timedelta(days=30)
    t0 = time.perf_counter()
    fill_sessions(store, size.fill_sessions, base, ids, batch=1000)
    t1 = time.perf_counter()
    fill_session(store, BIG_KEY, size.big_messages, base + timedelta(days=1), ids, batch=1000)
    t2 = time.perf_counter()
    fill_session(store, SMALL_KEY, size.small_messages, base + timedelta(days=2), ids, batch=1000)
    t3 = time.perf_counter()
    out["prefill_s"] = {
        "sessions": round(t1 - t0, 2),
        "big_session": round(t2 - t1, 2),
        "small_session": round(t3 - t2, 2),
    }
    out["prefill_per_s"] = {
        "sessions": round(size.fill_sessions / (t1 - t0)),
        "big_session_messages": round(size.big_messages / (t2 - t1)),
    }
    out["rss_after_prefill_mb"] = peak_rss_mb()

    # sessions_list(limit=50): the newest is the small session, then the big one, ...
    list_params = {"limit": 50}

    def list_call() -> None:
        listed = gw.call_tool(REQUESTER, "sessions_list", list_params)
        rows = listed.get("sessions") or []
        newest_first = all(a["updatedAt"] >= b["updatedAt"] for a, b in pairwise(rows))
        if listed.get("count") != 50 or len(rows) != 50 or not newest_first:
            raise BenchFailure(f"sessions_list read back wrong rows: {str(listed)[:300]}")

    last_big = message_text(size.big_messages - 1, role_of(size.big_messages - 1))
    last_small = message_text(size.small_messages - 1, role_of(size.small_messages - 1))

    def history_call(key: str, count: int, last: str) -> Callable[[], None]:
        params = {"sessionKey": key, "limit": 200}
        want = min(200, count)

        def call() -> None:
            found = gw.call_tool(REQUESTER, "sessions_history", params)
            messages = found.get("messages")
            if not messages or len(messages) != want or messages[-1]["content"][0]["text"] != last:
                raise BenchFailure(f"sessions_history read back wrong rows: {str(found)[:300]}")

        return call

    first = gw.call_tool(REQUESTER, "sessions_list", {"limit": 3})["sessions"]
    expect([r["key"] for r in first[:2]] == [SMALL_KEY, BIG_KEY], f"newest sessions: {first}")

    from sessionwire.application.ports.session_read_model import SessionQuery

    query = SessionQuery(limit=50, agent_ids=frozenset({"main"}))
    big_id = store.session(BIG_KEY).id

    def measure_reads(big_last: str) -> dict[str, Any]:
        big_history = history_call(BIG_KEY, size.big_messages, big_last)
        small_history = history_call(SMALL_KEY, size.small_messages, last_small)
        for _ in range(10):  # warm-up (page cache, statement caches)
            list_call()
            big_history()
            small_history()
        _, list_lat = timed_loop([list_call] * size.calls)
        big_lat, small_lat = interleaved(big_history, small_history, size.calls)
        # Store-level reads (no tool layer): the query's share of the tool's time.
        _, store_list = timed_loop([lambda: store.list_sessions(query)] * size.calls)
        _, store_hist = timed_loop(
            [lambda: store.transcript(big_id, limit=200, include_tools=False)] * size.calls
        )
        return {
            "sessions_list": summary_ms(list_lat),
            "history_big": summary_ms(big_lat),
            "history_small": summary_ms(small_lat),
            "store_list_sessions": summary_ms(store_list),
            "store_transcript_big": summary_ms(store_hist),
        }

    out.update(measure_reads(last_big))

    # Appends into the big session against appends into a fresh one, interleaved.
    gw.record_message(FRESH_KEY, role="user", content=message_text(0, "user"))
    gw.record_message(BIG_KEY, role="assistant", content=message_text(1, "assistant"))
    texts = [(role_of(i), message_text(i, role_of(i))) for i in range(size.appends)]
    it_big = iter(texts)
    it_fresh = iter(texts)

    def append_big() -> None:
        r, t = next(it_big)
        gw.record_message(BIG_KEY, role=r, content=t)

    def append_fresh() -> None:
        r, t = next(it_fresh)
        gw.record_message(FRESH_KEY, role=r, content=t)

    big_app, fresh_app = interleaved(append_big, append_fresh, size.appends)
    out["append_big"] = summary_ms(big_app)
    out["append_fresh"] = summary_ms(fresh_app)
    big_row = store.session(BIG_KEY).state
    expect(big_row.message_count == size.big_messages + 1 + size.appends, "big message count")
    big_last = texts[-1][1]

    if profile_dir is not None:
        with profiled(profile_dir / f"{kind}-sessions_list"):
            for _ in range(size.calls):
                list_call()
        big_history = history_call(BIG_KEY, size.big_messages, big_last)
        with profiled(profile_dir / f"{kind}-sessions_history_big"):
            for _ in range(size.calls):
                big_history()
        with profiled(profile_dir / f"{kind}-append_big"):
            for r, t in texts:
                gw.record_message(BIG_KEY, role=r, content=t)
            big_last = texts[-1][1]

    # The same reads once the tables have planner statistics. Our store never runs
    # ANALYZE; on PostgreSQL autovacuum would (this server has autovacuum off).
    started = time.perf_counter()
    analyze(store, kind)
    out["analyze_s"] = round(time.perf_counter() - started, 2)
    out["after_analyze"] = measure_reads(big_last)

    after = out["after_analyze"]
    out["figures"] = {
        "sessions_list_p50_ms": out["sessions_list"]["p50_ms"],
        "sessions_history_p50_ms": out["history_big"]["p50_ms"],
        "history_big_vs_small_ratio": round(
            out["history_big"]["p50_ms"] / out["history_small"]["p50_ms"], 4
        ),
        "append_big_vs_fresh_ratio": round(
            out["append_big"]["p50_ms"] / out["append_fresh"]["p50_ms"], 4
        ),
        "sessions_list_p50_ms_after_analyze": after["sessions_list"]["p50_ms"],
        "sessions_history_p50_ms_after_analyze": after["history_big"]["p50_ms"],
    }
    return out


def analyze(store: Any, kind: str) -> None:
    """Planner statistics for the store's tables only (a schema of its own on PostgreSQL)."""
    with store.recorder.datastore.transaction(commit=True) as cursor:
        if kind == "sqlite":
            cursor.execute("ANALYZE")
            return
        schema = store.recorder.datastore.schema
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))
        tables = [first_value(row) for row in cursor.fetchall()]
        for table in tables:
            cursor.execute(f'ANALYZE "{schema}"."{table}"')


def interleaved(
    a: Callable[[], Any], b: Callable[[], Any], n: int
) -> tuple[list[float], list[float]]:
    """Latencies of a and b, called alternately (b first on odd rounds)."""
    clock = time.perf_counter
    lat_a: list[float] = []
    lat_b: list[float] = []
    for i in range(n):
        order = ((a, lat_a), (b, lat_b)) if i % 2 == 0 else ((b, lat_b), (a, lat_a))
        for call, into in order:
            t0 = clock()
            call()
            into.append(clock() - t0)
    return lat_a, lat_b


# Helpers --------------------------------------------------------------------------------


class BenchFailure(RuntimeError):
    """A run that read back wrong data; its figures would mean nothing."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise BenchFailure(message)


@contextmanager
def profiled(path: Path) -> Iterator[None]:
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        path.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(f"{path}.prof")
        text = io.StringIO()
        stats = pstats.Stats(profile, stream=text)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
        Path(f"{path}.txt").write_text(text.getvalue())


def machine_info(postgres_url: str | None) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    info: dict[str, Any] = {
        "date_utc": datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "tempdir": tempfile.gettempdir(),
        "tempdir_fs": filesystem_of(tempfile.gettempdir()),
        "packages": package_versions(),
        "source": source_version(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    if postgres_url:
        try:
            import psycopg

            with psycopg.connect(postgres_url, connect_timeout=3) as c:
                for name in (
                    "server_version",
                    "synchronous_commit",
                    "fsync",
                    "shared_buffers",
                    "autovacuum",
                ):
                    row = c.execute(f"SHOW {name}").fetchone()
                    info[f"postgres_{name}"] = row[0] if row else None
        except Exception as error:
            info["postgres"] = f"unavailable: {error}"
    return info


def filesystem_of(path: str) -> str:
    best = ("", "?")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            mount, fs = parts[1], parts[2]
            if path.startswith(mount) and len(mount) > len(best[0]):
                best = (mount, f"{fs} on {parts[0]} (mounted at {mount})")
    except OSError:
        pass
    return best[1]


def source_version() -> str:
    """The commit the benchmark ran on, and whether the work tree had changes."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.rstrip("\n")

    commit = git("rev-parse", "--short", "HEAD").strip() or "?"
    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line]
    return f"{commit} (uncommitted changes: {', '.join(changed)})" if changed else commit


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("sessionwire", "eventsourcing", "psycopg", "pydantic", "structlog"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "?"
    return found


def postgres_problem(url: str) -> str | None:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return None
    except Exception as error:
        return f"no PostgreSQL at {url}: {error}"


# CLI ------------------------------------------------------------------------------------

WORKLOADS = {"append": workload_append, "reads": workload_reads}


def cpu_times() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return (0.0, 0.0)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    hz = os.sysconf("SC_CLK_TCK")
    return ((sum(fields) - idle) / hz, sum(fields) / hz)


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_quiet(max_wait: float, busy_below: float = 0.15, settle: int = 3) -> dict[str, Any]:
    """Wait until the machine's CPUs are idle (other jobs share this VM), up to max_wait s."""
    started = time.monotonic()
    quiet = 0
    busy = 1.0
    while time.monotonic() - started < max_wait:
        before = cpu_times()
        time.sleep(2)
        after = cpu_times()
        total = after[1] - before[1]
        busy = (after[0] - before[0]) / total if total else 0.0
        quiet = quiet + 1 if busy < busy_below else 0
        if quiet >= settle:
            break
    return {
        "waited_s": round(time.monotonic() - started, 1),
        "quiet": quiet >= settle,
        "last_busy": round(busy, 3),
    }


def run_worker(args: argparse.Namespace) -> int:
    size = QUICK if args.quick else FULL
    profile_dir = Path(args.profile) if args.profile else None
    source = source_version()  # the source this process imported (others may be editing it)
    load_before, cpu_before, own_before = os.getloadavg(), cpu_times(), own_cpu_s()
    started = time.perf_counter()
    result = WORKLOADS[args.worker](args.store, size, args.postgres_url, profile_dir)
    wall = time.perf_counter() - started
    cpu_after = cpu_times()
    busy_s = cpu_after[0] - cpu_before[0]
    total_s = cpu_after[1] - cpu_before[1]
    # Everything busy on the machine but this process: other jobs, and the PostgreSQL
    # server working for us. Shows when a run shared the VM with something else.
    result["machine_load"] = {
        "loadavg_1m_before": round(load_before[0], 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "cpu_busy_pct": round(100 * busy_s / total_s, 1) if total_s else None,
        "other_cpu_pct": round(100 * (busy_s - (own_cpu_s() - own_before)) / total_s, 1)
        if total_s
        else None,
        "wall_s": round(wall, 1),
    }
    result["store"] = args.store
    result["source"] = source
    Path(args.result).write_text(json.dumps(result, indent=2))
    return 0


def spawn(args: argparse.Namespace, store: str, workload: str) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result_path = handle.name
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        workload,
        "--store",
        store,
        "--result",
        result_path,
        "--postgres-url",
        args.postgres_url,
    ]
    if args.quick:
        command.append("--quick")
    if args.profile:
        command += ["--profile", args.profile]
    waited = None
    if args.wait_quiet:
        waited = wait_quiet(args.wait_quiet)
        print(f"[{store}/{workload}] waited for an idle machine: {waited}", flush=True)
    print(f"[{store}/{workload}] running in a fresh process ...", flush=True)
    started = time.perf_counter()
    completed = subprocess.run(command, check=False)
    try:
        if completed.returncode != 0:
            return {"error": f"worker exited {completed.returncode}", "store": store}
        result: dict[str, Any] = json.loads(Path(result_path).read_text())
    finally:
        Path(result_path).unlink(missing_ok=True)
    result["worker_wall_s"] = round(time.perf_counter() - started, 1)
    result["waited_for_idle"] = waited
    print(f"[{store}/{workload}] done in {result['worker_wall_s']} s", flush=True)
    return result


def verdict(name: str, value: float) -> str:
    op, bound, _, _ = TARGETS[name]
    met = value >= bound if op == ">=" else value <= bound
    return "met" if met else "NOT MET"


Results = dict[str, dict[str, list[dict[str, Any]]]]  # store -> workload -> runs


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def report(results: Results) -> list[dict[str, Any]]:
    """One row per figure: the median over the runs (fresh processes), with min and max."""
    rows: list[dict[str, Any]] = []
    for store, workloads in results.items():
        for workload, runs in workloads.items():
            good = [run for run in runs if "figures" in run]
            if not good:
                continue
            for name in good[0]["figures"]:
                op, bound, unit, what = TARGETS[name]
                values = spread([run["figures"][name] for run in good])
                rows.append(
                    {
                        "store": store,
                        "figure": name,
                        "what": what,
                        "value": values["median"],
                        "min": values["min"],
                        "max": values["max"],
                        "runs": len(good),
                        "unit": unit,
                        "target": f"{op} {bound:g}",
                        "status": verdict(name, values["median"]),
                    }
                )
            rss = spread([run["peak_rss_mb"] for run in good])
            rows.append(
                {
                    "store": store,
                    "figure": f"peak_rss_mb[{workload}]",
                    "what": f"ru_maxrss of the {workload} worker process",
                    "value": rss["median"],
                    "min": rss["min"],
                    "max": rss["max"],
                    "runs": len(good),
                    "unit": "MB",
                    "target": "-",
                    "status": "-",
                }
            )
    return rows


DETAIL_KEYS = (
    "sessions_list",
    "history_big",
    "history_small",
    "append_big",
    "append_fresh",
    "store_list_sessions",
    "store_transcript_big",
)


def print_report(results: Results, rows: list[dict[str, Any]]) -> None:
    print()
    print(f"{'store':<9}{'figure':<38}{'median':>12} {'(min-max)':<19}{'target':<9}{'status':<9}")
    for row in rows:
        value = f"{row['value']:g} {row['unit']}"
        span = f"({row['min']:g}-{row['max']:g})" if row["runs"] > 1 else ""
        print(
            f"{row['store']:<9}{row['figure']:<38}{value:>12} {span:<19}{row['target']:<9}"
            f"{row['status']:<9}"
        )
    for store, workloads in results.items():
        for workload, runs in workloads.items():
            for number, run in enumerate(runs, 1):
                tag = f"{store}/{workload} run {number}"
                if "error" in run:
                    print(f"{tag}: ERROR {run['error']}")
                    continue
                print(f"\n{tag}: source {run.get('source')}")
                print(f"  machine load {run.get('machine_load')}")
                if workload == "append":
                    print(
                        f"  W1 ours {run['ours_per_s_median']:g}/s (p50 "
                        f"{run['ours_p50_ms_median']} ms, p99 {run['ours_p99_ms_median']} ms), "
                        f"raw {run['raw_per_s_median']:g}/s (p50 {run['raw_p50_ms_median']} ms, "
                        f"p99 {run['raw_p99_ms_median']} ms); durability {run['durability']}"
                    )
                    continue
                for label, part in (("", run), ("after ANALYZE: ", run["after_analyze"])):
                    for key in DETAIL_KEYS:
                        if key in part:
                            one = part[key]
                            print(
                                f"  {label}{key:<22} p50 {one['p50_ms']:>8} ms  "
                                f"p99 {one['p99_ms']:>8} ms"
                            )
                print(f"  prefill {run['prefill_s']} s; ANALYZE {run['analyze_s']} s")


def quiet_logs() -> None:
    """structlog at WARNING; must run before a gateway is opened (it binds its logger)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def main(argv: list[str] | None = None) -> int:
    quiet_logs()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--quick", action="store_true", help="small smoke size")
    parser.add_argument("--out", help="write every figure and the raw numbers as JSON here")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("BENCH_POSTGRES", DEFAULT_POSTGRES)
    )
    parser.add_argument("--profile", help="also write cProfile output (.prof/.txt) to this dir")
    parser.add_argument("--workload", choices=["append", "reads", "all"], default="all")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each worker, wait up to this long for the machine's CPUs to be idle",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="fresh-process runs per store and workload"
    )
    parser.add_argument("--worker", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args)

    stores = ["sqlite", "postgres"] if args.store == "all" else [args.store]
    workloads = ["append", "reads"] if args.workload == "all" else [args.workload]
    skipped: dict[str, str] = {}
    if "postgres" in stores:
        problem = postgres_problem(args.postgres_url)
        if problem:
            if args.store == "postgres":
                print(problem, file=sys.stderr)
                return 2
            skipped["postgres"] = problem
            stores.remove("postgres")
            print(f"skipping postgres: {problem}")
    info = machine_info(args.postgres_url if "postgres" in stores else None)
    info["size"] = "quick" if args.quick else "full"
    info["repeat"] = args.repeat
    results: Results = {s: {w: [] for w in workloads} for s in stores}
    for _ in range(args.repeat):  # interleaved: every store and workload, then again
        for store in stores:
            for workload in workloads:
                results[store][workload].append(spawn(args, store, workload))
    rows = report(results)
    print_report(results, rows)
    failed = [
        f"{s}/{w}" for s in results for w in results[s] for r in results[s][w] if "error" in r
    ]
    if args.out:
        document = {
            "machine": info,
            "targets": TARGETS,
            "figures": rows,
            "results": results,
            "skipped": skipped,
            "failed": failed,
        }
        Path(args.out).write_text(json.dumps(document, indent=2))
        print(f"\nwrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
