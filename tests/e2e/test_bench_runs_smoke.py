"""The runs benchmark still runs: tiny sizes on SQLite, in a subprocess.

No timing assertions: only that every send is accepted under the default visibility's
config the script sets (it failed so on main: ``tree`` refused its sends), that the
transactions are counted, that each target's runs ran in the order they were queued, and
that every figure is reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runs.py"


@pytest.mark.slow
def test_the_runs_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    done = subprocess.run(
        [
            *(sys.executable, str(BENCH), "--store", "sqlite", "--sends", "3"),
            *("--concurrent", "6", "--targets", "2", "--exchanges", "1", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    latency = result["send_latency"]
    assert latency["sends"] == 3
    # A send's primary run, its announce run and the exchange, each saved (issue 3: 10).
    assert latency["saves_per_send"] >= 3
    assert latency["overhead_to_appends"] > 0
    concurrent = result["concurrent"]
    assert concurrent["runs_seen"] == 6
    assert concurrent["per_session_order_held"] is True
    assert result["ping_pong"]["exchanges"] == 1
    assert result["peak_rss_mb"] > 0
