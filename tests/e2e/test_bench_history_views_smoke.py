"""ADR 0054's diagnostic still runs: where a read-200's Python went when every line was
rendered on read (``benchmarks/diag_history_read.py``), at a tiny size in a subprocess.

No timing assertions: only that the script works and reports every step it measures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_history_read_diagnostic_runs() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "diag_history_read.py"),
            "--number",
            "1",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    steps = json.loads(done.stdout)
    assert len(steps) == 8
    assert all(value > 0 for value in steps.values())
