"""``benchmarks/bench_list_read.py`` still runs, on SQLite and with ``--store`` on
PostgreSQL (ADR 0054's read there), at a tiny size in a subprocess.

No timing assertions: only that the script works and reports each figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_server import POSTGRES_URL

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_list_and_read_benchmark_runs(engine: str, request: pytest.FixtureRequest) -> None:
    store: list[str] = []
    if engine == "postgres":
        request.getfixturevalue("postgres_url")  # skipped (or failed in CI) without a server
        store = ["--store", POSTGRES_URL]
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench_list_read.py"),
            "--messages",
            "201",
            "--sessions",
            "50",
            "--chunks",
            "1",
            *store,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert {"read-200 µs", "list-50 µs", "list-1 µs"} <= figures.keys()
    assert ("server" in figures["read-200 µs"]) is (engine == "postgres")
