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


PEERS = BENCH.parent / "bench_peers.py"


@pytest.mark.slow
def test_peer_comparison_runs_our_adapter_at_tiny_counts(tmp_path: Path) -> None:
    """Only our own adapter (no peer venv is made): the harness copy, W1-W3, the table."""
    done = subprocess.run(
        [sys.executable, str(PEERS), "-a", "sessionwire-sqlite", "--reps", "1",
         "--scale", "0.01", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    if "harness was not found" in done.stderr:
        pytest.skip("the shared peer harness is not beside this clone")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sessionwire (SQLite, public API)" in done.stdout
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert [r.get("errors") for r in results] == [{}]


def test_peer_comparison_explains_a_missing_harness(tmp_path: Path) -> None:
    # A copy of the script in a folder with no shared folder beside it and no git clone.
    script = tmp_path / "clone" / "benchmarks" / PEERS.name
    script.parent.mkdir(parents=True)
    script.write_text(PEERS.read_text())
    done = subprocess.run(
        [sys.executable, str(script), "-a", "sessionwire-sqlite"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "harness was not found" in done.stderr
    assert "--shared PATH or set SESSIONWIRE_SHARED" in done.stderr


BULK = BENCH.parent / "bench_bulk.py"


@pytest.mark.slow
def test_bulk_benchmark_runs_every_workload_at_a_small_count(tmp_path: Path) -> None:
    """bench_bulk.py at 2,000 messages, one rep, SQLite only: every workload runs in its
    own child process and lands in the table and the JSON."""
    out = tmp_path / "bulk.json"
    done = subprocess.run(
        [sys.executable, str(BULK), "--messages", "2000", "--reps", "1", "--stores", "sqlite",
         "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    names = [
        "raw[sqlite]",
        "prefill[sqlite]",
        "audit-import-batched[sqlite]",
        "audit-import-single[sqlite]",
        "openclaw[sqlite]",
    ]
    for name in names:
        assert name in done.stdout, f"{name} missing from:\n{done.stdout}"
    written = json.loads(out.read_text())
    assert [row["figure"] for row in written["figures"]] == [
        f"messages_per_s[{name}]" for name in names
    ]
    assert all(row["value"] > 0 and row["peak_rss_mb"] > 0 for row in written["figures"])


LEAN = BENCH.parent / "bench_lean_path.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "size", "printed", "profiled"),
    [
        ("history", ["--messages", "300"], "ms CPU per sessions_history call", "sessions_history"),
        ("list", ["--sessions", "60"], "ms CPU per sessions_list call", "sessions_list"),
        # The awaited store queries alone; the profile is the loop thread's timed loop.
        ("query", [], "us CPU per awaited store query", "query_cpu"),
    ],
)
def test_lean_path_times_whole_calls(
    workload: str, size: list[str], printed: str, profiled: str, tmp_path: Path
) -> None:
    """bench_lean_path.py history/list/query at small sizes, with a profile of the timed
    calls."""
    profile = tmp_path / "calls.txt"
    done = subprocess.run(
        [sys.executable, str(LEAN), workload, *size, "--calls", "5", "--profile", str(profile)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert printed in done.stdout
    assert profiled in profile.read_text()


@pytest.mark.slow
def test_list_and_read_benchmark_runs_at_a_small_count() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH.parent / "bench_list_read.py"),
         "--messages", "300", "--sessions", "60", "--chunks", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    # The load average beside the figures: what to read them against (bench_list_read.py).
    assert set(figures) == {"read-200 µs", "list-50 µs", "list-1 µs", "load_average"}
    assert len(figures["load_average"]) == 3


@pytest.mark.slow
def test_json_benchmark_prints_every_operation() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH.parent / "bench_json.py"), "--rounds", "2", "--loops", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for operation in ("decode 200 lines", "HTTP body", "SSE event"):
        assert operation in done.stdout
