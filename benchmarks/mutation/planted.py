"""Score the default ``sessionwire simulate`` against the planted bugs in ``planted/``.

Each ``planted/NN-name.patch`` is one realistic semantic bug in the product (its first
line says which). For each, the package is copied whole into a scratch directory, the
patch applied there (never to the worktree), and the default run played on the copy
(``simulate --seeds N --no-shrink --first-failure``, SQLite with crashes) until its first
failing seed; the scratch copy is then removed. A seed that fails the same way without
the bug (a product bug not fixed yet) is no find: that seed is played on an unpatched
copy too, and if it breaks no other invariant there the play goes on from the next
seed. Prints one JSON line per bug (found, the seed, the invariants, the CPU seconds to
the find, every seed played counted) and a summary.

    nice python benchmarks/mutation/planted.py                 # every bug, 300 seeds
    nice python benchmarks/mutation/planted.py --seeds 100 05 09
    nice python benchmarks/mutation/planted.py -- --store memory   # simulate's options

Run it from the worktree with its ``.venv`` (the editable install's link tree is what
is copied).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PLANTED = HERE / "planted"


def package_tree() -> Path:
    """The installed package's tree (the editable install's links to the worktree)."""
    trees = sorted((ROOT / "build").glob("__editable__.*/sessionwire"))
    if not trees:
        sys.exit("no editable install under build/: run ./run tests once first")
    return trees[0]


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scratch_copy(scratch: str, patch: Path | None) -> str | None:
    """The package copied into ``scratch`` with ``patch`` applied; an error, if any."""
    tree = Path(scratch) / "sessionwire"
    shutil.copytree(
        package_tree(), tree, symlinks=False, ignore=shutil.ignore_patterns("__pycache__")
    )
    if patch is None:
        return None
    applied = subprocess.run(
        ["patch", "-p1", "--quiet", "-d", str(tree), "-i", str(patch)],
        capture_output=True,
        text=True,
    )
    return None if applied.returncode == 0 else applied.stdout + applied.stderr


def simulate(scratch: str, start: int, seeds: int, extra: list[str]) -> dict[str, Any]:
    """``simulate`` on the copy in ``scratch``, to its first failing seed: its summary."""
    command = [sys.executable, "-m", "sessionwire.adapters.cli.main", "--json", "simulate"]
    command += ["--start", str(start), "--seeds", str(seeds), "--no-shrink", "--first-failure"]
    env = {"PYTHONPATH": scratch, "PATH": "/usr/bin:/bin", "HOME": scratch}
    ran = subprocess.run([*command, *extra], capture_output=True, text=True, env=env)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": ran.stderr[-2000:]}
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


class Baseline:
    """What each seed breaks without any planted bug (played when asked, kept)."""

    def __init__(self, extra: list[str]) -> None:
        self.extra = extra
        self.broken: dict[int, set[str]] = {}
        self.cpu = 0.0
        """CPU seconds its plays took (not counted to a planted bug's find)."""

    def of(self, seed: int) -> set[str]:
        if seed not in self.broken:
            before = cpu_of_children()
            with tempfile.TemporaryDirectory(prefix="baseline-") as scratch:
                scratch_copy(scratch, None)
                summary = simulate(scratch, seed, 1, self.extra)
            self.broken[seed] = set(summary.get("broken", {}))
            self.cpu += cpu_of_children() - before
        return self.broken[seed]


def play(patch: Path, seeds: int, extra: list[str], baseline: Baseline) -> dict[str, Any]:
    before, started, aside = cpu_of_children(), time.perf_counter(), baseline.cpu
    found: dict[str, Any] | None = None
    passed_over: list[int] = []
    with tempfile.TemporaryDirectory(prefix="planted-") as scratch:
        error = scratch_copy(scratch, patch)
        if error is not None:
            return {"bug": patch.stem, "error": error}
        start, end = 0, seeds
        while start < end and found is None:
            summary = simulate(scratch, start, end - start, extra)
            if "error" in summary:
                return {"bug": patch.stem, **summary}
            if not summary["failed"]:
                break
            seed = int(summary["failed"][0])
            broken = set(summary["broken"])
            cpu = cpu_of_children() - before - (baseline.cpu - aside)  # baseline plays aside
            if broken - baseline.of(seed):
                found = {"seed": seed, "invariants": sorted(broken), "cpu_seconds": round(cpu, 1)}
            else:
                passed_over.append(seed)  # fails so without the bug too
                start = seed + 1
    return {
        "bug": patch.stem,
        "found": found is not None,
        **(found or {"seed": None, "invariants": []}),
        "passed_over": passed_over,
        "wall_seconds": round(time.perf_counter() - started, 1),
        **({} if found else {"cpu_seconds": round(cpu_of_children() - before, 1)}),
        "baseline_cpu_seconds": round(baseline.cpu - aside, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("only", nargs="*", help="bug numbers or names (default: all)")
    args, extra = parser.parse_known_args()
    extra = [arg for arg in extra if arg != "--"]
    patches = sorted(PLANTED.glob("*.patch"))
    if args.only:
        patches = [p for p in patches if any(p.stem.startswith(o) for o in args.only)]
    results = []
    baseline = Baseline(extra)
    for patch in patches:
        result = play(patch, args.seeds, extra, baseline)
        results.append(result)
        print(json.dumps(result), flush=True)
    found = [r for r in results if r.get("found")]
    print(
        json.dumps(
            {
                "found": len(found),
                "of": len(results),
                "seeds": args.seeds,
                "options": extra,
                "max_cpu_to_find": max((float(r["cpu_seconds"]) for r in found), default=None),  # type: ignore[arg-type]
            }
        )
    )


if __name__ == "__main__":
    main()
