"""The runs listing benchmark still runs: tiny sizes on SQLite, in a subprocess.

No timing assertions: only that the script works (it checks each listing returns a full
page) and reports every figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runs_listing.py"


@pytest.mark.slow
def test_the_runs_listing_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "runs-listing.json"
    done = subprocess.run(
        [
            *(sys.executable, str(BENCH), "--store", "sqlite", "--runs", "600"),
            *("--small", "300", "--sessions", "3", "--seed-sends", "3", "--calls", "5"),
            *("--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads(out.read_text())
    assert result["real_runs"] == 9  # 3 sends: each a turn, a reply-back and an announce
    assert result["small_runs"] == 300
    assert result["large_runs"] == 600
    for name in ("runs_limit50", "runs_session", "runs_status_running"):
        assert result[f"small_{name}_p50_ms"] > 0
        assert result[f"large_{name}_p50_ms"] > 0
        assert f"{name}_large_vs_small" in result
