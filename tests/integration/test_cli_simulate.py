"""``sessionwire simulate``: seeds, a summary, exit 1 on a broken invariant with a
shrunk reproduction that ``--replay`` plays again; exit 2 on bad usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sessionwire.adapters.cli.main import main

PENDING = ["--skip", "slots-free", "--skip", "deadlines", "--skip", "deliveries-settle"]
PENDING += ["--skip", "hop-limit"]


def test_seeds_that_hold_every_checked_invariant_exit_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Seed 2 plays no nested send and no cycle (whose known bugs the skips leave aside).
    code = main(["simulate", "--seeds", "1", "--start", "2", *PENDING])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "1 seeds (2..2) on memory: 16 steps" in out
    assert "0 failed" in out


def test_a_failing_seed_exits_1_with_a_replayable_minimal_script(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Seed 0 nests a spawn inside a turn: a lane slot leaks (issue 12 item 1).
    code = main(["simulate", "--seeds", "1", "--save", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "seed 0: FAILED (slots-free" in out
    assert "minimal reproduction of [slots-free] (seed 0, 1 steps" in out
    saved = tmp_path / "seed-0.json"
    assert f"replay: sessionwire simulate --replay {saved}" in out
    assert main(["--json", "simulate", "--replay", str(saved)]) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["steps"] == 1
    assert "slots-free" in replayed["counts"]


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["simulate", "--store", "oracle"]) == 2
    assert "unknown store 'oracle'" in capsys.readouterr().err
    assert main(["simulate", "--skip", "nonsense"]) == 2
    assert "unknown invariant(s) nonsense" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("{}")
    assert main(["simulate", "--replay", str(tmp_path / "x.json")]) == 2
    assert "invalid script" in capsys.readouterr().err


def test_the_invariants_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--list-invariants"]) == 0
    out = capsys.readouterr().out
    assert "deliveries-settle: a delivery that failed is retried" in out
