"""docs/audit.md: every bash block runs as written (``sessionwire`` is the real CLI), and
the audit bench script still runs at a small size."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "audit.md"
BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


MARK = "=== next block ==="


def run_page(blocks: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    """Every block in ONE shell, in order, as a reader following the page runs them: a
    variable set or unset, a directory changed, carries over to the blocks after it."""
    script = (
        "set -euo pipefail\n"
        f'sessionwire() {{ "{sys.executable}" -m sessionwire.adapters.cli.main "$@"; }}\n'
        f'python() {{ "{sys.executable}" "$@"; }}\n'
        # Whatever the test's own environment says, the page starts with no store set.
        "unset SESSIONWIRE_STORE SESSIONWIRE_CHECKPOINT_KEY\n" + f"\necho '{MARK}'\n".join(blocks)
    )
    return subprocess.run(
        ["bash", "-c", script],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        # A default store of its own: a block that forgot its store reads an empty one.
        env={**os.environ, "COLUMNS": "160", "XDG_DATA_HOME": str(workdir / "data-home")},
        check=False,
    )


def test_every_example_on_the_audit_page_runs(tmp_path: Path) -> None:
    blocks = BLOCK.findall(PAGE.read_text())
    assert len(blocks) == 10
    done = run_page(blocks, tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    outputs = done.stdout.split(MARK + "\n")
    assert len(outputs) == len(blocks)

    assert json.loads((tmp_path / "report.json").read_text())["clean"] is True
    tampered = outputs[1]
    assert "altered" in tampered
    assert "agent:main:main" in tampered
    assert "verify exited with 1" in tampered
    assert "clean: 2 event(s) checked" in outputs[2]
    assert "line 3: the stream hash does not match" in outputs[3]
    assert "import exited with 1" in outputs[3]
    with sqlite3.connect(tmp_path / "fresh.db") as fresh:
        assert fresh.execute("SELECT COUNT(*) FROM stored_events").fetchone() == (0,)
    assert "the live read models equal the log's" in outputs[4]

    # The auditor's walkthrough: a bundle verified alone against a published checkpoint.
    key = tmp_path / "keys" / "checkpoint.key"
    assert (key.stat().st_mode & 0o777, key.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert (tmp_path / "operator.pub").read_text().startswith("ed25519:")
    assert "clean: a session bundle (agent:main:main): 3 event(s), 3 anchored" in outputs[6]
    assert "signature holds, trusted key" in outputs[6]
    tampered = outputs[7]
    assert "altered" in tampered
    assert "verify exited with 1" in tampered
    row = next(line for line in tampered.splitlines() if "altered" in line)
    cells = [cell.strip() for cell in row.split("│")]
    assert cells[1:6] == ["altered", "2", "3", "agent:main:main", "2"]  # event 2, line 3, v2
    cut = outputs[8]
    assert "truncated" in cut
    assert "ends it at version 2" in " ".join(cut.split())
    assert "verify exited with 1" in cut
    # The operator's team.db (its three events), not the default store the auditor's
    # unset left: that one holds nothing the published head could match.
    assert outputs[9].startswith("clean: 3 event(s) checked")


@pytest.mark.slow
def test_the_audit_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_audit.py"),
            "--events",
            "3000",
            "--per-session",
            "500",
            "--workdir",
            str(tmp_path),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads(out.read_text())
    assert written["events"] == 3000
    for command in ("verify", "rebuild"):
        assert written[command]["exit"] == 0
        assert written[command]["events_per_second"] > 0
        assert written[command]["peak_rss_mb"] > 0


@pytest.mark.slow
def test_the_bundle_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    out = tmp_path / "bundles.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_audit.py"),
            "--events",
            "3000",
            "--per-session",
            "500",
            "--bundles",
            "--workdir",
            str(tmp_path),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads(out.read_text())
    for command in ("checkpoint", "export_session", "verify_session_file", "export_all"):
        assert written[command]["exit"] == 0, written[command]
    verified = written["verify_all_file"]["result"]
    assert (verified["clean"], verified["anchored"], verified["unanchored"]) == (True, 3000, 0)
