"""The timeline benchmark still runs: a small log on SQLite, in a subprocess.

No timing assertions: only that the script works, that the indexed timeline equals the
full scan (the script exits non-zero otherwise), and that it reports both figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_timeline.py"


@pytest.mark.slow
def test_the_timeline_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--events", "600", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads(out.read_text())["runs"]
    assert result["events_in_log"] >= 600
    assert result["indexed"]["entries"] == result["full_scan"]["entries"] == 55
    assert result["indexed"]["median_ms"] >= 0
