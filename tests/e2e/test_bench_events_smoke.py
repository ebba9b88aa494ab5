"""The event stream benchmark still runs: tiny sizes, SQLite only, in a subprocess.

No timing assertions: only that the script works and reports every figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_events.py"


@pytest.mark.slow
def test_the_event_stream_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "events.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--events", "20", "--messages", "20", "--reps", "1",
         "--no-postgres", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=BENCH.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert figures["latency_sqlite"]["events"] == 20
    assert figures["latency_sqlite"]["p99_ms"] >= figures["latency_sqlite"]["p50_ms"] >= 0
    cost = figures["writer_cost_sqlite"]
    assert set(cost) == {"0", "10", "100", "100 unshared"}
    assert cost["0"]["ratio_to_0"] == 1.0
    assert all(row["appends_per_s_median"] > 0 for row in cost.values())
