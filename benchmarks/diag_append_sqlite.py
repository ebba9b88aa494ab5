#!/usr/bin/env python
"""Where a SQLite append's time goes: ours, our own SQL without Python, and the raw floor.

A diagnostic for the W1 append ratio (bench_core.py), not a benchmark with targets:

1. **ours**: ``record_message`` through SyncGateway, W1 (5,000 appends over 50 sessions).
2. **our SQL, replayed**: every statement, BEGIN, COMMIT and ROLLBACK that our store ran
   for the same W1 (recorded once, with its parameters), replayed through a bare
   ``sqlite3`` connection on a fresh file with our schema (copied from ``sqlite_master``)
   and our connection's pragmas. The difference to (1) is Python (gateway, aggregate,
   eventsourcing, pydantic, asyncio); the difference to (3) is the schema and statements.
3. **raw**: the peers' raw adapter (INSERT + UPSERT per transaction), as in bench_core.

Also reports the WAL frames (4 KiB pages) each append's commit writes, measured on a
replay with auto-checkpoints off. Repetitions are interleaved, each on fresh files.

    .venv/bin/python benchmarks/diag_append_sqlite.py [--reps 3] [--appends 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import bench_core as bc
from sessionwire import SyncGateway

Op = tuple[str, Any, Any]  # ("execute" | "executemany" | "commit" | "rollback", sql, params)


class _Recorder:
    ops: list[Op] | None = None  # where the running append's operations go


class _RecordingCursor(sqlite3.Cursor):
    def execute(self, sql: str, params: Any = (), /) -> Any:  # type: ignore[override]
        if _Recorder.ops is not None:
            _Recorder.ops.append(("execute", sql, params))
        return super().execute(sql, params)

    def executemany(self, sql: str, params: Any, /) -> Any:  # type: ignore[override]
        params = list(params)
        if _Recorder.ops is not None:
            _Recorder.ops.append(("executemany", sql, params))
        return super().executemany(sql, params)


class _RecordingConnection(sqlite3.Connection):
    def cursor(self, factory: Any = _RecordingCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def commit(self) -> None:
        if _Recorder.ops is not None:
            _Recorder.ops.append(("commit", None, None))
        super().commit()

    def rollback(self) -> None:
        if _Recorder.ops is not None:
            _Recorder.ops.append(("rollback", None, None))
        super().rollback()


@contextmanager
def recording_connections() -> Iterator[None]:
    """Connections that eventsourcing opens meanwhile record what runs on them."""
    connect = sqlite3.connect

    def recording_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(*args, **{**kwargs, "factory": _RecordingConnection})

    sqlite3.connect = recording_connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = connect  # type: ignore[assignment]


def record_w1(directory: Path, work: list[tuple[str, str, str]]) -> tuple[list[list[Op]], list]:
    """Our ops per append, plus the schema (CREATE statements) of the store they ran on."""
    per_append: list[list[Op]] = []
    with recording_connections():
        gw = SyncGateway.open(store=f"sqlite:///{directory}/record.db")
        try:
            for key, role, text in work:
                _Recorder.ops = []
                gw.record_message(key, role=role, content=text)
                per_append.append(_Recorder.ops)
        finally:
            _Recorder.ops = None
            gw.close()
    with sqlite3.connect(directory / "record.db") as connection:
        schema = connection.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type = 'index', rowid"
        ).fetchall()
    return per_append, [row[0] for row in schema]


def replay_connection(path: Path, schema: list, synchronous: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={int(synchronous)}")
    for statement in schema:
        connection.execute(statement)
    return connection


def replay(connection: sqlite3.Connection, per_append: list[list[Op]]) -> list[float]:
    clock = time.perf_counter
    latencies = []
    for ops in per_append:
        t0 = clock()
        for kind, sql, params in ops:
            if kind == "execute":
                connection.execute(sql, params).fetchall()
            elif kind == "executemany":
                connection.executemany(sql, params)
            elif kind == "commit":
                connection.execute("COMMIT")
            else:
                connection.execute("ROLLBACK")
        latencies.append(clock() - t0)
    return latencies


def frames_per_commit(directory: Path, schema: list, per_append: list[list[Op]]) -> float:
    path = directory / "frames.db"
    connection = replay_connection(path, schema, "2")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA wal_autocheckpoint=0")
    sample = per_append[: min(1000, len(per_append))]
    replay(connection, sample)
    frames = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    connection.close()
    return round(frames / len(sample), 2)


def raw_frames_per_commit(directory: Path, work: list[tuple[str, str, str]]) -> float:
    raw = bc.RawSqlite(directory, "2")
    raw.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.connection.execute("PRAGMA wal_autocheckpoint=0")
    sample = work[: min(1000, len(work))]
    bc.run_raw_w1(raw, sample)
    frames = raw.connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    raw.close()
    return round(frames / len(sample), 2)


def loop_overhead_us(n: int = 20_000) -> float:
    """What SyncGateway's run_until_complete costs for a coroutine that does nothing."""
    loop = asyncio.new_event_loop()

    async def nothing() -> None:
        return None

    start = time.perf_counter()
    for _ in range(n):
        loop.run_until_complete(nothing())
    loop.close()
    return round((time.perf_counter() - start) / n * 1e6, 1)


def summary(latencies: list[float]) -> dict[str, float]:
    wall = sum(latencies)
    return {"per_s": round(len(latencies) / wall), **bc.summary_ms(latencies)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--appends", type=int, default=5_000)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    bc.quiet_logs()
    size = bc.Size(**{**bc.FULL.__dict__, "w1_appends": args.appends, "w1_sessions": args.sessions})
    work = bc.w1_messages(size)
    results: dict[str, list[dict[str, float]]] = {"ours": [], "our_sql_replayed": [], "raw": []}
    with tempfile.TemporaryDirectory(prefix="sessionwire-diag-") as tmp:
        root = Path(tmp)
        per_append, schema = record_w1(root, work)
        ops_per_append = statistics.fmean(len(ops) for ops in per_append)
        for rep in range(args.reps):
            rep_dir = root / f"rep{rep}"
            rep_dir.mkdir()
            gw = SyncGateway.open(store=f"sqlite:///{rep_dir}/ours.db")
            synchronous = bc.durability_of(gw, "sqlite")["synchronous"]
            connection = replay_connection(rep_dir / "replay.db", schema, synchronous)
            raw = bc.RawSqlite(rep_dir, synchronous)
            runs = [
                ("ours", lambda gw=gw: bc.timed_loop(bc.record_calls(gw, work))[1]),
                ("our_sql_replayed", lambda c=connection: replay(c, per_append)),
                ("raw", lambda r=raw: bc.timed_loop(bc.raw_append_calls(r, work))[1]),
            ]
            order = runs if rep % 2 == 0 else runs[::-1]
            for name, run in order:
                results[name].append(summary(run()))
            gw.close()
            connection.close()
            raw.close()
        frames = {
            "our_sql": frames_per_commit(root, schema, per_append),
            "raw": raw_frames_per_commit(_fresh(root), work),
        }
    print(f"W1: {args.appends} appends over {args.sessions} sessions, {args.reps} reps")
    print(f"statements per append (ours, incl. BEGIN/COMMIT/ROLLBACK): {ops_per_append:.1f}")
    print(f"WAL frames per append commit: ours {frames['our_sql']}, raw {frames['raw']}")
    print(f"asyncio run_until_complete of an empty coroutine: {loop_overhead_us()} us")
    print(f"{'variant':<18}{'per_s':>8}{'p50_ms':>9}{'p99_ms':>9}{'mean_ms':>9}")
    for name, reps in results.items():
        med = {k: statistics.median(r[k] for r in reps) for k in ("per_s", "p50_ms", "p99_ms")}
        mean = statistics.median(r["mean_ms"] for r in reps)
        print(
            f"{name:<18}{med['per_s']:>8.0f}{med['p50_ms']:>9.3f}{med['p99_ms']:>9.3f}{mean:>9.3f}"
        )
    return 0


def _fresh(root: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=root))


if __name__ == "__main__":
    sys.exit(main())
