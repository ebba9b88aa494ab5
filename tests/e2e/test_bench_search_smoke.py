"""The search benchmark still runs: a small store on SQLite, in a subprocess.

No timing assertions: only that the script works and reports each figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_search.py"


@pytest.mark.slow
def test_the_search_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            *("--messages", "2000", "--rounds", "2", "--appends", "20", "--calls", "2"),
            *("--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert set(report["search_ms_cpu"]) == {
        "rare word (20 matches)",
        "common word",
        "two words",
        "no match",
    }
    assert report["append"]["ratio"] > 0
