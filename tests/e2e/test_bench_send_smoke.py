"""The send benchmark still runs: tiny sizes on the memory store, in a subprocess. No
timing assertion: only that each figure is reported, and that the reads it counts are
the ones tests/integration/test_send_reads.py pins (the benchmark counts as they do)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_send.py"


@pytest.mark.slow
@pytest.mark.parametrize(("in_turn", "call_reads"), [(False, 2), (True, 4)])
def test_the_send_benchmark_runs(in_turn: bool, call_reads: int) -> None:
    done = subprocess.run(
        [
            *(sys.executable, str(BENCH), "--store", "memory"),
            *("--sends", "2", "--blocks", "1", "--warm", "1"),
            *(["--in-turn"] if in_turn else []),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=BENCH.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert figures["reads_per_send"]["send_call"] == call_reads
    assert figures["reads_per_send"]["until_idle"] > call_reads
    assert figures["cpu_ms_per_send_median"] > 0
