"""A live gateway in another process: one of ``tests/processes``, or one holding an SQLite
store (decision 20's writer)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_gateway(module: str, *arguments: str) -> subprocess.Popen[str]:
    """``python -m tests.processes.MODULE ARGUMENTS…`` from the repository's root, its
    stdin, stdout and stderr piped (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.processes.{module}", *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextmanager
def holding(store: str) -> Iterator[subprocess.Popen[str]]:
    """``tests/processes/holder_child.py`` on ``store``, once it holds it; killed after."""
    process = child_gateway("holder_child", store)
    try:
        assert process.stdout is not None
        # Until the holder has the store (its log lines may come first); "" if it died.
        line = "-"
        while line and line.strip() != "ready":
            line = process.stdout.readline()
        assert line.strip() == "ready", f"the holder exited with {process.wait(timeout=60)}"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)
