"""Score the default ``sessionwire simulate`` against the planted bugs in ``planted/``.

Each ``planted/NN-name.patch`` is one realistic semantic bug in the product (its first
line says which). For each, the package is copied whole into a scratch directory, the
patch applied there (never to the worktree), and the default run played on the copy
(``simulate --seeds N --no-shrink --first-failure``, SQLite with crashes) until its first
failing seed; the scratch copy is then removed. Prints one JSON line per bug (found, the
seed, the invariants, the CPU seconds to the find) and a summary.

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


def play(patch: Path, seeds: int, extra: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="planted-") as scratch:
        tree = Path(scratch) / "sessionwire"
        shutil.copytree(
            package_tree(), tree, symlinks=False, ignore=shutil.ignore_patterns("__pycache__")
        )
        applied = subprocess.run(
            ["patch", "-p1", "--quiet", "-d", str(tree), "-i", str(patch)],
            capture_output=True,
            text=True,
        )
        if applied.returncode != 0:
            return {"bug": patch.stem, "error": applied.stdout + applied.stderr}
        command = [
            sys.executable,
            "-m",
            "sessionwire.adapters.cli.main",
            "--json",
            "simulate",
            "--seeds",
            str(seeds),
            "--no-shrink",
            "--first-failure",
            *extra,
        ]
        before, started = cpu_of_children(), time.perf_counter()
        ran = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": scratch, "PATH": "/usr/bin:/bin", "HOME": scratch},
        )
        cpu, wall = cpu_of_children() - before, time.perf_counter() - started
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    summary = json.loads(lines[-1]) if lines else {}
    failed = summary.get("failed", [])
    return {
        "bug": patch.stem,
        "found": bool(failed),
        "seed": failed[0] if failed else None,
        "seeds_played": summary.get("seeds"),
        "invariants": sorted(summary.get("broken", {})),
        "cpu_seconds": round(cpu, 1),
        "wall_seconds": round(wall, 1),
        **({} if summary else {"error": ran.stderr[-2000:]}),
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
    for patch in patches:
        result = play(patch, args.seeds, extra)
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
