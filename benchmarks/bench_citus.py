#!/usr/bin/env python
"""The scale model's figures on a Citus cluster (issue 41 item 4, ADR 0053): CPU, saves
and two-phase commits per append and per exchange, with the store's tables on one worker
and spread over two.

Three schemas on one coordinator with two workers: **local**, the tables plain ones on
the coordinator (no ``distribution``: what plain PostgreSQL costs on the same server), and
two with ``distribution=citus``:

* **one**: made while the second worker takes no shards
  (``citus_set_node_property(…, 'shouldhaveshards', false)``): 3 shards a table, all on
  the first worker;
* **two**: made with both workers taking shards: 6 shards a table, 3 on each (a shard
  count of its own, so it is not colocated with ``one``'s shards; each worker holds as
  many shards of it as the first holds of ``one``).

Per round, each schema in turn (the order alternates), one gateway on it (``PGAPPNAME``
marks its connections; Citus keeps its worker connections cached), after a warm-up:

* **append**: ``record_message`` round-robin over 10 sessions;
* **exchange, one shard**: ``sessions_send`` from one session to another whose key hashes
  to the same shard (bench_exchange's exchange: reply awaited, announce skipped, then
  ``wait_idle``);
* **exchange, across**: the same between two sessions on different shards (``one``) or on
  different workers (``two``).

Figures per operation: this process's CPU (``time.process_time``: the gateway and its
threads), the server's CPU (``/proc/<pid>/stat`` of the gateway's coordinator backends
and of the worker backends serving them, found by the global pid Citus names them with),
the gateway's saves (store transactions), and the two-phase commits it started (rows of
``pg_dist_transaction`` with its backends' pids; the 2PC recovery is paused meanwhile so
none is removed). Medians of the rounds. The cluster's CPU is shared with whatever else
runs on the machine: CPU time, not wall time, is the figure.

    .venv/bin/python benchmarks/bench_citus.py --url postgresql://postgres@127.0.0.1:26432/postgres
        [--rounds 3] [--appends 60] [--exchanges 8] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from bench_runs import INSTANT, CountingSaves, config_with
from sessionwire import Gateway
from sessionwire.testing import ScriptedRuntime

WARM_UP = 5
GPID_PIDS = 10_000_000_000  # Citus's global pid: node id * 10^10 + the backend's pid
EVENTS = "sessionwire_events"
SHARDS = {"local": 0, "one": 3, "two": 6}
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Node:
    host: str
    port: int

    def url(self, database: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"


@dataclass
class Cluster:
    coordinator: str
    database: str
    workers: list[Node] = field(default_factory=list)

    def sql(self, statement: str, *params: Any, url: str | None = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(
            url or self.coordinator, autocommit=True, application_name="bench-citus-observer"
        ) as connection:
            cursor = connection.execute(statement, params)
            return cursor.fetchall() if cursor.description else []


def _ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def _backends(cluster: Cluster, app: str) -> dict[str, dict[int, int]]:
    """CPU ticks of every live backend of the gateway: its own on the coordinator and
    the worker backends Citus opened for them."""
    mine = [
        int(row[0])
        for row in cluster.sql("SELECT pid FROM pg_stat_activity WHERE application_name = %s", app)
    ]
    found = {"coordinator": {pid: _ticks(pid) for pid in mine}}
    for worker in cluster.workers:
        rows = cluster.sql(
            "SELECT pid, application_name FROM pg_stat_activity "
            "WHERE application_name LIKE 'citus_internal gpid=%%'",
            url=worker.url(cluster.database),
        )
        found[f"worker:{worker.port}"] = {
            int(pid): _ticks(int(pid))
            for pid, name in rows
            if int(str(name).split("=")[1]) % GPID_PIDS in mine
        }
    return found


def _two_phase(cluster: Cluster, pids: set[int]) -> tuple[int, int]:
    """The 2PC transactions the gateway's backends started, and their prepared
    participants (a gid is ``citus_<group>_<pid>_<transaction>_<connection>``)."""
    rows = cluster.sql("SELECT gid FROM pg_dist_transaction")
    transactions: set[tuple[str, str]] = set()
    participants = 0
    for (gid,) in rows:
        parts = str(gid).split("_")
        if len(parts) >= 5 and int(parts[2]) in pids:
            transactions.add((parts[2], parts[3]))
            participants += 1
    return len(transactions), participants


def _placements(cluster: Cluster, schema: str, keys: list[str]) -> dict[str, tuple[int, int]]:
    """Each key's shard and the port of the worker holding it."""
    table = f'"{schema}".{EVENTS}'
    rows = cluster.sql(
        "SELECT k, s, n.nodeport FROM unnest(%s::text[]) k, "
        "LATERAL get_shard_id_for_distribution_column(%s::regclass, k) s "
        "JOIN pg_dist_placement p ON p.shardid = s JOIN pg_dist_node n USING (groupid)",
        keys,
        table,
    )
    return {str(key): (int(shard), int(port)) for key, shard, port in rows}


def _pairs(cluster: Cluster, schema: str, topology: str) -> dict[str, tuple[str, str]]:
    keys = [f"cron:p{n}" for n in range(64)]
    if topology == "local":  # one node: every pair is alike
        return {"exchange_same_shard": (keys[0], keys[1]), "exchange_across": (keys[0], keys[2])}
    # A session's rows live under its full key (``cron:x`` is the main agent's): placed
    # by ``cron:x`` itself, the "same shard" pair was two shards as often as not.
    full = _placements(cluster, schema, [f"agent:main:{key}" for key in keys])
    where = {key: full[f"agent:main:{key}"] for key in keys}
    first = keys[0]
    same = next(k for k in keys[1:] if where[k][0] == where[first][0])
    if topology == "one":
        across = next(k for k in keys[1:] if where[k][0] != where[first][0])
    else:
        across = next(k for k in keys[1:] if where[k][1] != where[first][1])
    return {"exchange_same_shard": (first, same), "exchange_across": (first, across)}


async def _exchange(gateway: Gateway, source: str, target: str, index: int) -> None:
    result = await gateway.call_tool(
        source,
        "sessions_send",
        {"sessionKey": target, "message": f"m{index}", "timeoutSeconds": 30},
    )
    assert result["status"] == "ok", result
    await gateway.wait_idle()


async def _window(
    cluster: Cluster, gateway: Gateway, app: str, count: int, step: Any
) -> dict[str, float]:
    counter = CountingSaves(gateway)
    before = _backends(cluster, app)
    pids = set(before["coordinator"])
    tpc_before = _two_phase(cluster, pids)
    client = time.process_time()
    for index in range(count):
        await step(index)
    client = time.process_time() - client
    after = _backends(cluster, app)
    pids |= set(after["coordinator"])
    tpc_after = _two_phase(cluster, pids)
    figures = {"client_ms": 1000 * client / count, "saves": counter.count / count}
    server = 0.0
    for node, ticks in after.items():
        spent = sum(t - before[node].get(pid, 0) for pid, t in ticks.items()) / TICK
        figures[f"{node}_ms"] = 1000 * spent / count
        server += spent
    figures["server_ms"] = 1000 * server / count
    figures["cpu_ms"] = figures["client_ms"] + figures["server_ms"]
    figures["two_phase"] = (tpc_after[0] - tpc_before[0]) / count
    figures["prepared"] = (tpc_after[1] - tpc_before[1]) / count
    return figures


async def _round(
    cluster: Cluster, url: str, topology: str, args: argparse.Namespace, first: int
) -> dict[str, dict[str, float]]:
    app = f"bench-citus-{uuid.uuid4().hex[:8]}"
    os.environ["PGAPPNAME"] = app
    gateway = await Gateway.open(
        config=config_with(ping_pong_turns=0),
        store=url,
        runtime=ScriptedRuntime.from_dict(INSTANT),
        resume=False,
    )
    try:
        schema = url.split("schema=")[1].split("&")[0]
        pairs = _pairs(cluster, schema, topology)
        for source, target in pairs.values():
            for key in (source, target):
                await gateway.record_message(key, role="user", content="hi")
        for index in range(WARM_UP):
            await gateway.record_message(f"bench:{index % 10}", role="user", content="warm")
            for source, target in pairs.values():
                await _exchange(gateway, source, target, -1 - index)

        async def append(index: int) -> None:
            await gateway.record_message(
                f"bench:{index % 10}", role="user", content=f"message {first + index} " * 8
            )

        result = {"append": await _window(cluster, gateway, app, args.appends, append)}
        for name, (source, target) in pairs.items():

            async def exchange(index: int, source: str = source, target: str = target) -> None:
                await _exchange(gateway, source, target, first + index)

            result[name] = await _window(cluster, gateway, app, args.exchanges, exchange)
        return result
    finally:
        await gateway.close()


def _make(cluster: Cluster, topology: str, second: Node) -> str:
    """A new distributed schema for ``topology``: its shards on the first worker only, or
    on both."""
    schema = f"bench_citus_{topology}_{uuid.uuid4().hex[:8]}"
    if topology == "local":
        os.environ.pop("PGOPTIONS", None)
        asyncio.run(_open_and_close(f"{cluster.coordinator}?schema={schema}"))
        return f"{cluster.coordinator}?schema={schema}"
    url = f"{cluster.coordinator}?schema={schema}&distribution=citus"
    cluster.sql(
        "SELECT citus_set_node_property(%s, %s, 'shouldhaveshards', %s)",
        second.host,
        second.port,
        topology == "two",
    )
    os.environ["PGOPTIONS"] = (
        f"-c citus.shard_count={SHARDS[topology]} -c citus.max_cached_conns_per_worker=8"
    )
    try:
        asyncio.run(_open_and_close(url))
    finally:
        cluster.sql(
            "SELECT citus_set_node_property(%s, %s, 'shouldhaveshards', true)",
            second.host,
            second.port,
        )
    ports = {
        int(row[0])
        for row in cluster.sql(
            "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = %s::regclass",
            f'"{schema}".{EVENTS}',
        )
    }
    expected = 1 if topology == "one" else 2
    assert len(ports) == expected, f"{topology}: shards on {sorted(ports)}"
    return url


async def _open_and_close(url: str) -> None:
    gateway = await Gateway.open(store=url, resume=False)
    await gateway.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:26432/postgres")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--appends", type=int, default=60)
    parser.add_argument("--exchanges", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cluster = Cluster(args.url, args.url.rsplit("/", 1)[1])
    cluster.workers = [
        Node(str(host), int(port))
        for host, port in cluster.sql(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid > 0 "
            "AND noderole = 'primary' ORDER BY groupid"
        )
    ]
    assert len(cluster.workers) == 2, f"two workers needed, found {cluster.workers}"
    urls = {topology: _make(cluster, topology, cluster.workers[1]) for topology in SHARDS}
    cluster.sql("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
    cluster.sql("SELECT pg_reload_conf()")
    rounds: dict[str, list[dict[str, dict[str, float]]]] = {t: [] for t in SHARDS}
    try:
        for number in range(args.rounds):
            order = list(SHARDS) if number % 2 == 0 else list(reversed(SHARDS))  # interleaved
            for topology in order:
                first = number * max(args.appends, args.exchanges)
                figures = asyncio.run(_round(cluster, urls[topology], topology, args, first))
                rounds[topology].append(figures)
                print(f"round {number + 1} {topology}: {json.dumps(figures)}", file=sys.stderr)
    finally:
        cluster.sql("ALTER SYSTEM RESET citus.recover_2pc_interval")
        cluster.sql("SELECT pg_reload_conf()")
        for url in urls.values():
            schema = url.split("schema=")[1].split("&")[0]
            cluster.sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    medians = {
        topology: {
            workload: {
                name: round(statistics.median(r[workload].get(name, 0.0) for r in results), 3)
                for name in sorted({n for r in results for n in r[workload]})
            }
            for workload in results[0]
        }
        for topology, results in rounds.items()
    }
    summary = {
        "rounds": args.rounds,
        "appends": args.appends,
        "exchanges": args.exchanges,
        "shards": SHARDS,
        "load_average": os.getloadavg(),
        "medians": medians,
        "all_rounds": rounds,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "all_rounds"}, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
