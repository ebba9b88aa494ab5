"""The Citus connection benchmark still runs: two rounds on the tier's coordinator (its
plain side a local table there), in a subprocess. Only on the Citus run of the tier.

No timing assertions: only that the script works, reports each figure and leaves no
schema behind.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from postgres_server import ON_CITUS, POSTGRES_URL

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_citus_connections.py"


@pytest.mark.postgres
@pytest.mark.skipif(not ON_CITUS, reason="needs the Citus run of the tier (a coordinator)")
def test_the_citus_connection_benchmark_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--citus", POSTGRES_URL, "--plain", POSTGRES_URL,
         "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {"citus", "plain", "ratio"}
    assert all(float(value) > 0 for value in rows["citus"] + rows["plain"])
    with psycopg.connect(POSTGRES_URL) as connection:
        left = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench_connections%'"
        ).fetchall()
    assert left == []
