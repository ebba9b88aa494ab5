"""What a save across two sessions costs on Citus (ADR 0052): the same two inserts into a
distributed table, keyed to one session (one shard's transaction) or to two sessions on
different workers (Citus's two-phase commit). Interleaved rounds, wall time per transaction.

    python benchmarks/bench_citus_2pc.py [URL] [TRANSACTIONS]

URL is a Citus coordinator (default ``postgresql://postgres@127.0.0.1:55432/postgres``); a
schema ``bench2pc`` is made and dropped.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid

import psycopg

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:55432/postgres"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
ROUNDS = 3
INSERT = "INSERT INTO bench2pc.e VALUES (%s, %s, 1, '\\x00')"


def keys_on_two_workers(connection: psycopg.Connection[object]) -> tuple[str, str]:
    by_node: dict[int, str] = {}
    for key in "abcdefgh":
        (port,) = connection.execute(
            "SELECT nodeport FROM citus_shards WHERE shardid = "
            "get_shard_id_for_distribution_column('bench2pc.e', %s::text)",
            (key,),
        ).fetchone() or (0,)
        by_node.setdefault(int(port), key)
    first, second = list(by_node.values())[:2]
    return first, second


def run(first: str, second: str) -> float:
    """Milliseconds per transaction of N transactions of two inserts (keys first, second)."""
    with psycopg.connect(URL) as connection:
        started = time.perf_counter()
        for _ in range(N):
            with connection.transaction():
                connection.execute(INSERT, (first, uuid.uuid4()))
                connection.execute(INSERT, (second, uuid.uuid4()))
        return (time.perf_counter() - started) / N * 1000


def main() -> None:
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS bench2pc CASCADE")
        connection.execute("CREATE SCHEMA bench2pc")
        connection.execute(
            "CREATE TABLE bench2pc.e (k text NOT NULL, id uuid NOT NULL, v bigint NOT NULL, "
            "state bytea, PRIMARY KEY (k, id, v))"
        )
        connection.execute("SELECT create_distributed_table('bench2pc.e', 'k', shard_count => 4)")
        first, second = keys_on_two_workers(connection)
    one: list[float] = []
    two: list[float] = []
    for _ in range(ROUNDS):
        one.append(run(first, first))
        two.append(run(first, second))
    print(f"{N} transactions x {ROUNDS} interleaved rounds (keys {first!r}, {second!r})")
    print(f"one shard : {statistics.median(one):.2f} ms/txn, rounds {[round(x, 2) for x in one]}")
    print(f"two shards: {statistics.median(two):.2f} ms/txn, rounds {[round(x, 2) for x in two]}")
    print(f"ratio: {statistics.median(two) / statistics.median(one):.2f}")
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute("DROP SCHEMA bench2pc CASCADE")


if __name__ == "__main__":
    main()
