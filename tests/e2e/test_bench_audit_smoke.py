"""The audit-state benchmark still runs: a small session on SQLite, in a subprocess.

No timing assertions: only that the script works and reports every point it measures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_audit_state.py"


@pytest.mark.slow
def test_the_audit_state_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--events", "400", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    states = result["states"]
    early = states["version 10"]
    assert (early["version"], early["messages"]) == (10, 9)
    assert early["median_ms"] >= 0
    assert states["version 400 (latest)"]["messages"] == 399
    assert states["instant 00:00:08.5 after opening"]["version"] == 9
