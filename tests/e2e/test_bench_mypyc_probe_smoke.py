"""The mypyc probe (ADR 0065) still runs: a copy of the package measured at a tiny size.

No timing assertions and no build (a compiled copy takes minutes of C compiling): only
that the copy imports from where it was put and the measurement reports every figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "probe_mypyc.py"


def _probe(*arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, str(PROBE), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_the_probe_measures_a_copy_of_the_package(tmp_path: Path) -> None:
    copy = tmp_path / "pure"
    _probe("copy", str(copy))
    assert (copy / "sessionwire" / "application" / "gateway.py").is_file()
    assert not list(copy.rglob("*.so"))
    out = _probe("measure", str(copy), "--rounds", "1", "--appends", "5", "--reads", "2")
    rounds = [line for line in out.splitlines() if line.startswith("round 1 ")]
    assert len(rounds) == 1
    figures = json.loads(rounds[0].split(": ", 1)[1])
    # The child imported the copy, not the checkout's install.
    assert figures["package"] == str(copy / "sessionwire")
    assert figures["compiled"] is False
    for name in ("append", "append_loop", "append_writer", "read_200"):
        assert figures[name] > 0, name
    (median,) = [line for line in out.splitlines() if line.startswith("median ")]
    assert set(json.loads(median.split(": ", 1)[1])) == {
        "append",
        "append_loop",
        "append_writer",
        "read_200",
    }
