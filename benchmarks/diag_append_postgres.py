#!/usr/bin/env python
"""Where a PostgreSQL append's time goes: ours, our own statements without Python, raw.

A diagnostic for the W1 append ratio on PostgreSQL (bench_core.py), like
diag_append_sqlite.py:

1. **ours**: ``record_message`` through SyncGateway, W1 (5,000 appends over 50 sessions).
2. **our SQL, replayed**: every statement our store sent through psycopg for the same W1
   (recorded once with its parameters and options), replayed on one of the store's own
   pooled connections (it has the composite types registered) in the same shape: one
   pipeline and one transaction per append, synced after the last statement. The
   difference to (1) is Python; the difference to (3) is what the statements cost the
   server (table lock, NOTIFY, more rows and indexes) and the unprepared statements.
3. **raw**: the peers' raw adapter on psycopg (INSERT + UPSERT per transaction), one
   round trip per statement, as bench_core measures it; and the same two statements in
   the two pipeline shapes: eventsourcing's (``with conn.pipeline(), conn.transaction()``
   plus ``pipeline.sync()``, as in ``PostgresApplicationRecorder.insert_events``) and a
   pipeline that sends BEGIN ... COMMIT and syncs once.

Fresh schemas, dropped afterwards; repetitions interleaved.

    .venv/bin/python benchmarks/diag_append_postgres.py [--reps 3] [--appends 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import bench_core as bc
import psycopg
from sessionwire import SyncGateway

Op = tuple[Any, Any, dict[str, Any]]  # (query, params, execute options)


class _Recorder:
    ops: list[Op] | None = None


@contextmanager
def recording() -> Iterator[None]:
    """Record what runs through psycopg cursors meanwhile (diagnostic patch)."""
    execute = psycopg.Cursor.execute

    def recording_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if _Recorder.ops is not None:
            _Recorder.ops.append((query, params, kwargs))
        return execute(self, query, params, **kwargs)

    psycopg.Cursor.execute = recording_execute  # type: ignore[method-assign]
    try:
        yield
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


def record_w1(url: str, work: list[tuple[str, str, str]]) -> list[list[Op]]:
    per_append: list[list[Op]] = []
    gw = SyncGateway.open(store=url)
    try:
        with recording():
            for key, role, text in work:
                _Recorder.ops = []
                gw.record_message(key, role=role, content=text)
                per_append.append(_Recorder.ops)
    finally:
        _Recorder.ops = None
        gw.close()
    return per_append


def replay(connection: Any, per_append: list[list[Op]]) -> list[float]:
    clock = time.perf_counter
    latencies = []
    for ops in per_append:
        t0 = clock()
        with connection.pipeline() as pipeline, connection.transaction():
            with connection.cursor() as cursor:
                for query, params, options in ops:
                    cursor.execute(query, params, **options)
            pipeline.sync()
        latencies.append(clock() - t0)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--appends", type=int, default=5_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--postgres-url", default=bc.DEFAULT_POSTGRES)
    args = parser.parse_args()
    bc.quiet_logs()
    size = bc.Size(**{**bc.FULL.__dict__, "w1_appends": args.appends, "w1_sessions": args.sessions})
    work = bc.w1_messages(size)
    stores = bc.StoreFactory("postgres", args.postgres_url)
    results: dict[str, list[dict[str, float]]] = {
        "ours": [],
        "our_sql_replayed": [],
        "raw": [],
        "raw_pipeline_es_shape": [],
        "raw_pipeline_one_sync": [],
    }
    try:
        recorded_url = stores.fresh("record")
        per_append = record_w1(recorded_url, work)
        statements = statistics.fmean(len(ops) for ops in per_append)
        for rep in range(args.reps):
            gw = SyncGateway.open(store=stores.fresh(f"ours-{rep}"))
            setting = bc.durability_of(gw, "postgres")["synchronous_commit"]
            # A store on the recorded schema, emptied: the replay re-inserts the same rows.
            target = SyncGateway.open(store=stores.fresh(f"replay-{rep}"))
            replay_schema = bc.store_of(target).recorder.datastore.schema
            raw = bc.RawPostgres(args.postgres_url, stores.fresh_schema(), setting)

            def run_replay(target: Any = target, schema: str = replay_schema) -> list[float]:
                datastore = bc.store_of(target).recorder.datastore
                with datastore.get_connection() as connection:
                    # Point the recorded statements' schema at this store's schema.
                    ops = [
                        [
                            (_retarget(q, recorded_schema(recorded_url), schema), p, o)
                            for q, p, o in step
                        ]
                        for step in per_append
                    ]
                    return replay(connection, ops)

            raw_es = bc.RawPostgres(args.postgres_url, stores.fresh_schema(), setting)
            raw_one = bc.RawPostgres(args.postgres_url, stores.fresh_schema(), setting)
            runs = [
                ("ours", lambda gw=gw: bc.timed_loop(bc.record_calls(gw, work))[1]),
                ("our_sql_replayed", run_replay),
                ("raw", lambda r=raw: bc.timed_loop(bc.raw_append_calls(r, work))[1]),
                ("raw_pipeline_es_shape", lambda r=raw_es: _raw_pipelined(r, work, False)),
                ("raw_pipeline_one_sync", lambda r=raw_one: _raw_pipelined(r, work, True)),
            ]
            order = runs if rep % 2 == 0 else runs[::-1]
            for name, run in order:
                results[name].append(summary(run()))
            gw.close()
            target.close()
            for one in (raw, raw_es, raw_one):
                one.close()
    finally:
        stores.close()
    print(
        f"W1 on PostgreSQL: {args.appends} appends over {args.sessions} sessions, {args.reps} reps"
    )
    print(f"statements per append (ours, through psycopg cursors): {statements:.1f}")
    print(f"{'variant':<22}{'per_s':>8}{'p50_ms':>9}{'p99_ms':>9}{'mean_ms':>9}")
    for name, reps in results.items():
        med = {k: statistics.median(r[k] for r in reps) for k in ("per_s", "p50_ms", "p99_ms")}
        mean = statistics.median(r["mean_ms"] for r in reps)
        print(
            f"{name:<22}{med['per_s']:>8.0f}{med['p50_ms']:>9.3f}{med['p99_ms']:>9.3f}{mean:>9.3f}"
        )
    return 0


def recorded_schema(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


def _retarget(query: Any, old: str, new: str) -> Any:
    if isinstance(query, str):
        return query.replace(old, new)
    if isinstance(query, bytes):
        return query.replace(old.encode(), new.encode())
    # psycopg.sql.Composed / SQL: render, then replace.
    return psycopg.sql.SQL(query.as_string(None).replace(old, new))  # type: ignore[arg-type]


def summary(latencies: list[float]) -> dict[str, float]:
    return {"per_s": round(len(latencies) / sum(latencies)), **bc.summary_ms(latencies)}


def _raw_pipelined(raw: bc.RawPostgres, work: list[tuple[str, str, str]], one_sync: bool) -> list:
    connection = raw.connection
    clock = time.perf_counter
    latencies = []
    for k, r, t in work:
        now = time.time()
        block = {"type": "text", "text": t}
        message = {"role": r, "content": [block], "timestamp": int(now * 1000)}
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        t0 = clock()
        if one_sync:
            with connection.pipeline(), connection.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(raw.upsert, (k, now, now))
                cursor.execute(raw.insert, (k, data))
                cursor.execute("COMMIT")
        else:
            with connection.pipeline() as pipeline, connection.transaction():
                with connection.cursor() as cursor:
                    cursor.execute(raw.upsert, (k, now, now))
                    cursor.execute(raw.insert, (k, data))
                pipeline.sync()
        latencies.append(clock() - t0)
    return latencies


if __name__ == "__main__":
    sys.exit(main())
