"""The console benchmark still runs: a few sessions on SQLite, in a subprocess.

No timing assertions: only that the script works and reports each page's figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_console.py"


@pytest.mark.slow
def test_the_console_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "console.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sessions", "300", "--repeats", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["sessions"] == 300
    pages = result["pages"]
    assert set(pages) == {"first", "deep", "kind", "search", "transcript"}
    assert pages["first"]["rows_linked"] == 50
    assert pages["deep"]["rows_linked"] == 30  # the rows after 90% of 300
    assert pages["kind"]["rows_linked"] == 30
    assert all(page["p50_ms"] >= 0 for page in pages.values())
