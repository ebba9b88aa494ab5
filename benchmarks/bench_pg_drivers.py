#!/usr/bin/env python
"""PostgreSQL from an event loop, three ways (issue 22 item 2): what each costs the client.

    .venv/bin/python benchmarks/bench_pg_drivers.py [--ops 2000] [--tasks 16]
        [--connections 4] [--reps 3] [--python /tmp/asyncpg-venv/bin/python]
        [--callgrind 200 400] [--out FILE]

The approaches, each taking a pooled connection per operation, ``--connections`` of them:

- ``threads``: today's (OffLoopStore's reads): sync psycopg on a ``psycopg_pool``
  ``ConnectionPool``, each operation a function run on a ``ThreadPoolExecutor`` of as
  many threads as connections, its answer handed back to the loop.
- ``psycopg_async``: psycopg's ``AsyncConnection`` from ``psycopg_pool``'s
  ``AsyncConnectionPool``, on the loop.
- ``asyncpg``: asyncpg's own pool (``asyncpg.create_pool``), on the loop; needs asyncpg
  importable by the workers' interpreter (``--python``), else it is reported missing.
  Its pool resets a connection on release by default (``pg_advisory_unlock_all``,
  ``CLOSE ALL``, ``UNLISTEN *``, ``RESET ALL``: a round trip per operation), so
- ``asyncpg_noreset``: the same with a pool ``reset`` that sends nothing, as psycopg's
  pools do for an idle autocommit connection.

Operations, on a fresh schema: ``select``, a primary-key SELECT of one of 1,000 session
rows; ``insert``, a transaction (BEGIN, one INSERT of a 300-byte event row, COMMIT).
Each runs ``--ops`` times ``sequential`` (one awaited after another) and spread over
``--tasks`` concurrent tasks. Figures: wall operations/s, client CPU per operation (this
process, every thread, user + system from ``os.times``, and the system share alone) and
server CPU per operation (the backends of this process's connections, from
``/proc/<pid>/stat``; needs the server on this machine and leave to read it). One worker
process per (rep, approach), the approaches' order rotating between reps; medians.

``--callgrind N1 N2``: client instructions per sequential SELECT from
``valgrind --tool=callgrind``, as (Ir at N2 - Ir at N1) / (N2 - N1), which cancels start-up
and connecting; instruction counts do not move with the machine's load.

Every worker runs the same interpreter (default: /tmp/asyncpg-venv's when it exists, a
venv with asyncpg and the project's psycopg and psycopg_pool versions), so the three
share one Python and one psycopg.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
APPROACHES = ("threads", "psycopg_async", "asyncpg", "asyncpg_noreset")
ASYNCPG_VENV = "/tmp/asyncpg-venv/bin/python"
ROWS = 1_000
STATE = b"x" * 300
WARM_UP = 100


# Worker ---------------------------------------------------------------------------------


def server_cpu(url: str, app: str) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True, application_name="drivers-observer") as c:
        pids = [
            row[0]
            for row in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,)
            )
        ]
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def create_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
        c.execute(
            f'CREATE TABLE "{schema}".sessions (session_key TEXT PRIMARY KEY, '
            "session_id UUID NOT NULL, agent_id TEXT NOT NULL, label TEXT, "
            "updated_at DOUBLE PRECISION NOT NULL, data JSONB NOT NULL)"
        )
        c.execute(
            f'CREATE TABLE "{schema}".events (originator_id UUID NOT NULL, '
            "originator_version INTEGER NOT NULL, topic TEXT NOT NULL, state BYTEA NOT NULL, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
        with c.cursor() as cursor:
            cursor.executemany(
                f'INSERT INTO "{schema}".sessions VALUES (%s, %s, %s, %s, %s, %s)',
                [
                    (
                        f"agent:main:bench:{n}",
                        uuid.uuid4(),
                        "main",
                        None,
                        time.time(),
                        json.dumps({"chatType": "direct", "n": n}),
                    )
                    for n in range(ROWS)
                ],
            )
        c.execute(f'ANALYZE "{schema}".sessions')


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class Threads:
    """Sync psycopg on a ConnectionPool, each call on a worker thread (today's way)."""

    def __init__(self, url: str, app: str, schema: str, connections: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(
            url,
            min_size=connections,
            max_size=connections,
            kwargs={"autocommit": True, "application_name": app},
            open=True,
        )
        self.pool.wait()
        self.executor = ThreadPoolExecutor(connections, thread_name_prefix="bench-pg")
        self.select_sql = f'SELECT * FROM "{schema}".sessions WHERE session_key = %s'
        self.insert_sql = f'INSERT INTO "{schema}".events VALUES (%s, %s, %s, %s)'

    def _select(self, key: str) -> Any:
        with self.pool.connection() as c:
            return c.execute(self.select_sql, (key,)).fetchone()

    def _insert(self, originator: uuid.UUID) -> None:
        with self.pool.connection() as c, c.transaction():
            c.execute(self.insert_sql, (originator, 1, "bench:Event", STATE))

    async def select(self, key: str) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._select, key)

    async def insert(self, originator: uuid.UUID) -> None:
        await asyncio.get_running_loop().run_in_executor(self.executor, self._insert, originator)

    async def close(self) -> None:
        self.executor.shutdown()
        self.pool.close()


class PsycopgAsync:
    """psycopg's AsyncConnection from an AsyncConnectionPool, on the loop."""

    def __init__(self, url: str, app: str, schema: str, connections: int) -> None:
        self.args = (url, app, connections)
        self.select_sql = f'SELECT * FROM "{schema}".sessions WHERE session_key = %s'
        self.insert_sql = f'INSERT INTO "{schema}".events VALUES (%s, %s, %s, %s)'

    async def open(self) -> None:
        from psycopg_pool import AsyncConnectionPool

        url, app, connections = self.args
        self.pool = AsyncConnectionPool(
            url,
            min_size=connections,
            max_size=connections,
            kwargs={"autocommit": True, "application_name": app},
            open=False,
        )
        await self.pool.open(wait=True)

    async def select(self, key: str) -> Any:
        async with self.pool.connection() as c:
            cursor = await c.execute(self.select_sql, (key,))
            return await cursor.fetchone()

    async def insert(self, originator: uuid.UUID) -> None:
        async with self.pool.connection() as c, c.transaction():
            await c.execute(self.insert_sql, (originator, 1, "bench:Event", STATE))

    async def close(self) -> None:
        await self.pool.close()


class Asyncpg:
    """asyncpg's pool, on the loop (its release resets the connection, as by default,
    unless ``reset`` is False)."""

    def __init__(
        self, url: str, app: str, schema: str, connections: int, *, reset: bool = True
    ) -> None:
        self.args = (url, app, connections)
        self.reset = reset
        self.select_sql = f'SELECT * FROM "{schema}".sessions WHERE session_key = $1'
        self.insert_sql = f'INSERT INTO "{schema}".events VALUES ($1, $2, $3, $4)'

    async def open(self) -> None:
        import asyncpg  # type: ignore[import-not-found]  # in its own venv only

        async def keep(connection: Any) -> None:
            """Release without a reset query."""

        url, app, connections = self.args
        self.pool = await asyncpg.create_pool(
            url,
            min_size=connections,
            max_size=connections,
            server_settings={"application_name": app},
            reset=None if self.reset else keep,
        )

    async def select(self, key: str) -> Any:
        async with self.pool.acquire() as c:
            return await c.fetchrow(self.select_sql, key)

    async def insert(self, originator: uuid.UUID) -> None:
        async with self.pool.acquire() as c, c.transaction():
            await c.execute(self.insert_sql, originator, 1, "bench:Event", STATE)

    async def close(self) -> None:
        await self.pool.close()


async def open_client(approach: str, url: str, app: str, schema: str, connections: int) -> Any:
    if approach == "threads":
        return Threads(url, app, schema, connections)
    client: PsycopgAsync | Asyncpg
    if approach == "psycopg_async":
        client = PsycopgAsync(url, app, schema, connections)
    else:
        client = Asyncpg(url, app, schema, connections, reset=approach == "asyncpg")
    await client.open()
    return client


async def run_ops(client: Any, operation: str, ops: int, tasks: int, offset: int) -> None:
    async def one(n: int) -> None:
        if operation == "select":
            row = await client.select(f"agent:main:bench:{(offset + n * 7919) % ROWS}")
            assert row is not None
        else:
            await client.insert(uuid.uuid4())

    if tasks == 1:
        for n in range(ops):
            await one(n)
        return

    async def worker(first: int) -> None:
        for n in range(first, ops, tasks):
            await one(n)

    await asyncio.gather(*(worker(first) for first in range(tasks)))


async def measure(approach: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    app = f"drivers-{uuid.uuid4().hex[:8]}"
    schema = f"bench_drv_{uuid.uuid4().hex[:10]}"
    create_schema(url, schema)
    try:
        client = await open_client(approach, url, app, schema, args.connections)
        try:
            figures: dict[str, Any] = {}
            for operation in ("select", "insert"):
                for mode, tasks in (("sequential", 1), ("concurrent", args.tasks)):
                    await run_ops(client, operation, WARM_UP, tasks, 1)
                    server = server_cpu(url, app)
                    times, wall = os.times(), time.perf_counter()
                    await run_ops(client, operation, args.ops, tasks, 0)
                    wall = time.perf_counter() - wall
                    after = os.times()
                    user, system = after.user - times.user, after.system - times.system
                    server = server_cpu(url, app) - server
                    figures[f"{operation} {mode}"] = {
                        "ops_per_s": round(args.ops / wall),
                        "client_ms": round(1000 * (user + system) / args.ops, 4),
                        # The kernel's share: thread and loop wake-ups, socket calls.
                        "client_sys_ms": round(1000 * system / args.ops, 4),
                        "server_ms": round(1000 * server / args.ops, 4),
                    }
            return figures
        finally:
            await client.close()
    finally:
        drop_schema(url, schema)


async def callgrind_ops(approach: str, url: str, ops: int, connections: int) -> None:
    """The work counted under callgrind: connect, warm up, ``ops`` sequential SELECTs."""
    app = f"drivers-cg-{uuid.uuid4().hex[:8]}"
    schema = f"bench_drv_{uuid.uuid4().hex[:10]}"
    create_schema(url, schema)
    try:
        client = await open_client(approach, url, app, schema, connections)
        try:
            await run_ops(client, "select", 20, 1, 1)
            await run_ops(client, "select", ops, 1, 0)
        finally:
            await client.close()
    finally:
        drop_schema(url, schema)


# Driver ---------------------------------------------------------------------------------


def worker_command(python: str, *extra: str) -> list[str]:
    return [python, str(Path(__file__).resolve()), *extra]


def has_asyncpg(python: str) -> bool:
    return subprocess.run([python, "-c", "import asyncpg"], capture_output=True).returncode == 0


def run_worker(python: str, approach: str, args: argparse.Namespace) -> dict[str, Any]:
    command = worker_command(
        python,
        "--worker",
        approach,
        "--url",
        args.url,
        "--ops",
        str(args.ops),
        "--tasks",
        str(args.tasks),
        "--connections",
        str(args.connections),
    )
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def callgrind_ir(python: str, approach: str, args: argparse.Namespace, ops: int) -> int:
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            *worker_command(
                python,
                "--callgrind-worker",
                approach,
                str(ops),
                "--url",
                args.url,
                "--connections",
                str(args.connections),
            ),
        ]
        subprocess.run(command, capture_output=True, text=True, check=True)
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no instruction total in callgrind's output")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=APPROACHES, help=argparse.SUPPRESS)
    parser.add_argument("--callgrind-worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=POSTGRES)
    parser.add_argument("--ops", type=int, default=2_000)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--python",
        default=ASYNCPG_VENV if Path(ASYNCPG_VENV).exists() else sys.executable,
        help="the workers' interpreter",
    )
    parser.add_argument("--callgrind", type=int, nargs=2, metavar=("N1", "N2"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(measure(args.worker, args.url, args))))
        return 0
    if args.callgrind_worker:
        approach, ops = args.callgrind_worker
        asyncio.run(callgrind_ops(approach, args.url, int(ops), args.connections))
        return 0

    approaches = list(APPROACHES)
    missing = None
    if not has_asyncpg(args.python):
        approaches.remove("asyncpg")
        approaches.remove("asyncpg_noreset")
        missing = f"asyncpg is not importable by {args.python}"
        print(missing, file=sys.stderr)
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in approaches}
    for rep in range(args.reps):
        order = approaches[rep % len(approaches) :] + approaches[: rep % len(approaches)]
        for approach in order:
            result = run_worker(args.python, approach, args)
            runs[approach].append(result)
            print(f"rep {rep + 1} {approach}: {json.dumps(result)}", file=sys.stderr)
    cells = list(runs[approaches[0]][0]) if args.reps else []
    summary: dict[str, Any] = {
        cell: {
            approach: {
                key: statistics.median(r[cell][key] for r in runs[approach])
                for key in ("ops_per_s", "client_ms", "client_sys_ms", "server_ms")
            }
            for approach in approaches
        }
        for cell in cells
    }
    figures: dict[str, Any] = {
        "ops": args.ops,
        "tasks": args.tasks,
        "connections": args.connections,
        "reps": args.reps,
        "python": args.python,
        "asyncpg_missing": missing,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "medians": summary,
        "raw": runs,
    }
    if args.callgrind:
        first, second = args.callgrind
        figures["callgrind_ir_per_select"] = {}
        for approach in approaches:
            low = callgrind_ir(args.python, approach, args, first)
            high = callgrind_ir(args.python, approach, args, second)
            per_op = (high - low) / (second - first)
            figures["callgrind_ir_per_select"][approach] = round(per_op)
            print(f"callgrind {approach}: {per_op:.0f} Ir per SELECT", file=sys.stderr)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
