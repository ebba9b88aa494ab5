#!/usr/bin/env python
"""What a new connection and a statement cost on a Citus coordinator, beside the same on a
plain PostgreSQL server: the reason CI's Citus tier takes about 3.5 times the plain tier
(docs/benchmarks.md, "CI's Citus tier").

Each test opens gateways, and so new connections, and its statements are small. Per
round, in turn on each server (the order alternates): connect, run one statement that
reads every shard of a distributed table (on plain PostgreSQL the same table, local),
run it again on the same connection, close. On the coordinator, the first statement of a
new connection also opens that backend's connections to the workers. Figures are the
medians of the rounds, in milliseconds of wall time (the servers' work is what is
measured, so not this process's CPU), with the load average beside them: the machine is
shared, so quote ratios from one run.

    .venv/bin/python benchmarks/bench_citus_connections.py \\
        --citus postgresql://postgres@127.0.0.1:26432/postgres \\
        --plain postgresql://postgres@127.0.0.1:5432/test [--rounds 40]

It makes a schema ``bench_connections_citus`` on the coordinator (a distributed table of
4 shards) and ``bench_connections_plain`` on the other server (a local table; the two URLs
may name one server), and drops them at the end. It asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import psycopg


def schema(name: str) -> str:
    return f"bench_connections_{name}"


def make_table(url: str, name: str) -> None:
    table = f"{schema(name)}.sessions"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema(name)} CASCADE")
        connection.execute(f"CREATE SCHEMA {schema(name)}")
        connection.execute(f"CREATE TABLE {table} (key text PRIMARY KEY, body text)")
        if name == "citus":
            connection.execute("SET citus.shard_count = 4")
            connection.execute("SELECT create_distributed_table(%s, 'key')", (table,))
        connection.execute(
            f"INSERT INTO {table} SELECT 'agent:main:' || n, 'x' FROM generate_series(1, 100) n"
        )


def drop_table(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema(name)} CASCADE")


def one_round(url: str, name: str) -> tuple[float, float, float]:
    """Milliseconds: connecting, the first statement, the same statement again."""
    table = f"{schema(name)}.sessions"
    started = time.perf_counter()
    connection: Any = psycopg.connect(url, autocommit=True)
    connected = time.perf_counter()
    connection.execute(f"SELECT count(*) FROM {table}").fetchone()
    first = time.perf_counter()
    connection.execute(f"SELECT count(*) FROM {table}").fetchone()
    second = time.perf_counter()
    connection.close()
    return (
        (connected - started) * 1000,
        (first - connected) * 1000,
        (second - first) * 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--citus", required=True, help="the Citus coordinator's URL")
    parser.add_argument("--plain", required=True, help="a plain PostgreSQL server's URL")
    parser.add_argument("--rounds", type=int, default=40)
    options = parser.parse_args()
    servers = {"citus": options.citus, "plain": options.plain}
    for name, url in servers.items():
        make_table(url, name)
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in servers}
    try:
        for number in range(options.rounds):
            order = list(servers) if number % 2 == 0 else list(reversed(servers))
            for name in order:
                figures[name].append(one_round(servers[name], name))
    finally:
        for name, url in servers.items():
            drop_table(url, name)
    load = os.getloadavg()
    print(f"{options.rounds} rounds, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'':8}{'connect':>10}{'first':>10}{'again':>10}  (ms, medians)")
    medians = {
        name: [statistics.median(column) for column in zip(*rows, strict=True)]
        for name, rows in figures.items()
    }
    for name, row in medians.items():
        print(f"{name:8}" + "".join(f"{value:10.1f}" for value in row))
    ratio = [c / p for c, p in zip(medians["citus"], medians["plain"], strict=True)]
    print(f"{'ratio':8}" + "".join(f"{value:9.1f}×" for value in ratio))


if __name__ == "__main__":
    main()
