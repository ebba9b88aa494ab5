"""The test suite's wall time, before and after a change, measured interleaved.

Each side is a checkout with its own ``.venv`` set up (``./run sessionwire --help`` once).
Rounds alternate old, new, old, new… so both see the same (shared, loaded) machine;
each run is that checkout's own test command, ``./run tests`` (the old one runs pytest in
one process; the new one with one worker per core). The report gives, per side, every
run's wall time and CPU time (user + system of pytest and everything it waited for), the
medians, and the new/old ratio of the medians.

    python benchmarks/bench_test_suite.py --old ../sessionwire-7c2df5b --new . --rounds 2
    python benchmarks/bench_test_suite.py --old OLD --new NEW --rounds 3 \\
        --files test_cli.py test_docs_cli.py   # a subset: these files, wherever they live

The benchmark asserts nothing and exits 0 unless a run fails (any test failing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def test_files(checkout: Path, names: list[str]) -> list[str]:
    """Each named test file, found under ``tests/`` whatever tier folder holds it."""
    found = []
    for name in names:
        matches = sorted((checkout / "tests").rglob(name))
        if len(matches) != 1:
            raise SystemExit(f"{checkout}: expected one tests/**/{name}, found {len(matches)}")
        found.append(str(matches[0].relative_to(checkout)))
    return found


def run_suite(checkout: Path, files: list[str], log: Path) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(
            ["./run", "tests", "-p", "no:cacheprovider", *files],
            cwd=checkout,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            check=False,
        )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = log.read_text().strip().splitlines()[-1] if log.exists() else ""
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "exit": done.returncode,
        "summary": summary,
        "log": str(log),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout before the change")
    parser.add_argument("--new", type=Path, required=True, help="checkout after the change")
    parser.add_argument("--rounds", type=int, default=2, help="old+new pairs (default 2)")
    parser.add_argument("--files", nargs="*", default=[], help="test file names (a subset)")
    parser.add_argument("--out", type=Path, help="write the report as JSON here too")
    parser.add_argument("--logs", type=Path, default=Path("/tmp"), help="where run logs go")
    args = parser.parse_args()
    sides = {"old": args.old.resolve(), "new": args.new.resolve()}
    files = {side: test_files(path, args.files) for side, path in sides.items()}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for round_ in range(1, args.rounds + 1):
        for side, path in sides.items():
            log = args.logs / f"suite-{side}-{round_}.log"
            result = run_suite(path, files[side], log)
            result["started_round"] = round_
            runs[side].append(result)
            print(
                f"round {round_} {side}: {result['wall_s']} s wall, {result['cpu_s']} s CPU, "
                f"exit {result['exit']}: {result['summary']}",
                flush=True,
            )
    report: dict[str, Any] = {
        "date": datetime.now(tz=UTC).isoformat(timespec="seconds"),
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "files": args.files or "whole suite",
        "runs": runs,
    }
    for measure in ("wall_s", "cpu_s"):
        old = statistics.median(run[measure] for run in runs["old"])
        new = statistics.median(run[measure] for run in runs["new"])
        report[f"median_{measure}"] = {"old": old, "new": new, "ratio": round(new / old, 3)}
        print(f"median {measure}: old {old}, new {new}, new/old {new / old:.2f}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    failed = [run for side in runs.values() for run in side if run["exit"] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
