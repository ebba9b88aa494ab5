"""Issue 38's benchmarks still run: the exchange against raw commits, serve's start-up and
failover after ``kill -9``, each at a tiny size in a subprocess.

No timing assertions: only that each script works and reports every figure it measures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_server import POSTGRES_URL

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench(script: str, *arguments: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_exchange_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "exchange.json"
    _bench("bench_exchange.py", "--rounds", "1", "--exchanges", "2", "--out", str(out))
    result = json.loads(out.read_text())
    ours, raw = result["medians"]["ours"], result["medians"]["raw"]
    # An exchange is at least its send's run and its announce run, each saved and committed.
    assert ours["saves"] >= 2
    assert 1 <= ours["commits"] <= ours["saves"]
    assert ours["events"] >= ours["saves"]
    assert ours["cpu_ms"] > 0
    assert raw["cpu_ms"] > 0
    assert result["raw_settings"] == {"journal_mode": "wal", "synchronous": "2"}
    # A spawn: its child's run and its announce run, each started and ended, the report.
    spawn = result["medians"]["spawn_ours"]
    assert spawn["saves"] >= 5
    assert 1 <= spawn["commits"] <= spawn["saves"]
    assert result["medians"]["spawn_raw"]["cpu_ms"] > 0


@pytest.mark.slow
def test_the_serve_startup_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    _bench("bench_serve_startup.py", "--rounds", "1", "--json", str(out))
    result = json.loads(out.read_text())
    assert result["modules"] > 100  # serve imports the HTTP stack
    medians = result["medians"]
    assert medians["serve_cpu_s"] > 0
    assert medians["cpu_after_imports_s"] < medians["serve_cpu_s"]


@pytest.mark.slow
def test_the_takeover_benchmark_runs(postgres_url: str, tmp_path: Path) -> None:
    out = tmp_path / "takeover.json"
    _bench(
        "bench_takeover.py",
        *("--rounds", "1", "--work", "0", "--url", POSTGRES_URL, "--out", str(out)),
    )
    result = json.loads(out.read_text())
    (figures,) = result["rounds"]
    assert 0 < figures["dispatched_s"] <= figures["completed_s"]
