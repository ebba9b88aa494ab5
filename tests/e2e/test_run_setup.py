"""``./run``'s first setup says what it is doing (issue 37 §F: a minute and a half of
silence after one line). Run on a stand-in environment whose python and sessionwire
only record that they were called, so no package is installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_setup_step_is_announced_before_the_demo_starts(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    calls = tmp_path / "calls"
    for name in ("python", "sessionwire"):
        stub = venv / "bin" / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\n')
        stub.chmod(0o755)
    done = subprocess.run(
        [str(ROOT / "run"), "demo", "--pace", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SESSIONWIRE_VENV": str(venv)},
    )
    assert done.returncode == 0, done.stderr
    said = done.stderr.splitlines()
    assert any("installing sessionwire and its dependencies" in line for line in said)
    assert any("compiling" in line for line in said)
    assert said[-1].endswith("done")
    # The stand-ins ran: the install first, the demo last.
    steps = calls.read_text().splitlines()
    assert steps[0].startswith("python -m pip install --quiet -e .[dev]")
    assert steps[-1] == "sessionwire demo --pace 0"
