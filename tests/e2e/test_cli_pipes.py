"""The command line off a terminal: what a pipe or a log file gets.

``audit export | head -1`` is a reader that stops early, not a failure (it exited 1 with
click's broken-pipe handling); ``audit verify`` into a log writes its verdict and no
empty line a progress bar left behind. Real processes, real pipes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sessionwire import SyncGateway

CLI = [sys.executable, "-m", "sessionwire.adapters.cli.main"]


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/pipes.db"
    gateway = SyncGateway.open(store=url)
    try:
        # Three export lines of ~150 KB each: more than a pipe holds, so the writer is
        # still writing when the reader has gone.
        for batch in range(3):
            gateway.record_many(
                f"cron:batch-{batch}",
                [{"role": "user", "content": f"{n:06d} " + "x" * 140} for n in range(1000)],
            )
    finally:
        gateway.close()
    return url


def test_an_export_read_by_a_reader_that_stops_early_exits_0(store: str) -> None:
    with subprocess.Popen(
        [*CLI, "--store", store, "audit", "export"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # what `head -1` does once it has its line
        error = process.stderr.read()
        code = process.wait(timeout=120)
    assert first.startswith("{")
    assert (code, error) == (0, "")


def test_verify_off_a_terminal_writes_its_verdict_and_nothing_else(store: str) -> None:
    done = subprocess.run(
        [*CLI, "--store", store, "audit", "verify"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("clean: ")
    assert done.stderr == ""
