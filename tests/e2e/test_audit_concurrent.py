"""The log keeps one verifiable order when several processes write to one store: on
PostgreSQL at once (stream links at write, the log sealed behind the writers, ADR 0016); on
SQLite one after the other, since a file has one writer at a time (decision 20)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from audit_rig import verify_json

ROOT = Path(__file__).resolve().parents[2]
PER_PROCESS = 40
WRITER = """
import sys
from sessionwire import SyncGateway
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SyncGateway.open(store=url) as gateway:
    for number in range(count):
        # A session both processes write to, and one of each process's own.
        gateway.record_message("main", role="user", content=f"{name} {number}")
        gateway.record_message(f"cron:{name}", role="user", content=f"tick {number}")
"""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    return str(request.getfixturevalue("postgres_url"))


def _start(url: str, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, name, str(PER_PROCESS)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(writer: subprocess.Popen[str]) -> None:
    _, stderr = writer.communicate(timeout=300)
    assert writer.returncode == 0, stderr


def test_two_processes_writing_leave_a_chain_that_verifies(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    if url.startswith("sqlite:"):
        # One writer per SQLite file: the second process writes after the first closes.
        for name in ("a", "b"):
            _finish(_start(url, name))
    else:
        writers = [_start(url, name) for name in ("a", "b")]
        for writer in writers:
            _finish(writer)

    code, report = verify_json(capsys, url)
    assert report["findings"] == []
    assert code == 0
    # main and cron:a, cron:b opened once each; then one event per message.
    assert report["checked"] == 3 + 2 * 2 * PER_PROCESS
    assert report["unchained"] == 0
