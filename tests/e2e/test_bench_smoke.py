"""The core benchmark still runs: bench_core.py --quick on SQLite, in a subprocess.

No timing assertions: this only checks that the script works and prints every figure.
The benchmark is not imported; it stays out of the test suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_core.py"
FIGURES = (
    "append_ratio_vs_raw",
    "sessions_list_p50_ms",
    "sessions_history_p50_ms",
    "history_big_vs_small_ratio",
    "append_big_vs_fresh_ratio",
    "sessions_list_p50_ms_after_analyze",
    "sessions_history_p50_ms_after_analyze",
    "peak_rss_mb[append]",
    "peak_rss_mb[reads]",
)


@pytest.mark.slow
def test_quick_benchmark_runs_and_prints_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--store", "sqlite", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for figure in FIGURES:
        assert figure in done.stdout, f"{figure} missing from:\n{done.stdout}"
    written = json.loads(out.read_text())
    assert {row["figure"] for row in written["figures"]} == set(FIGURES)
    assert written["failed"] == []
