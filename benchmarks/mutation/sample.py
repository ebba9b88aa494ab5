"""Keep a seeded random sample of a cosmic-ray session pending (docs/benchmarks.md).

Every mutant the operators filter left (no result yet) is a candidate. Each module's
candidates are put in a random order by `random.Random(f"{seed}:{module}")`, and a
module gets its share of `size` (proportional to its candidates, largest remainder
first), taken from the front of that order: so a larger size with the same seed keeps
every mutant of a smaller one, and a sample can be extended between runs. The others are
marked SKIPPED with the output "not in the sample"; running it again with another size
re-marks them (results already run are kept). `--report` marks nothing: it counts the
sample's verdicts per module, with the score's 95 % Wilson interval.

    python3 benchmarks/mutation/sample.py SESSION.sqlite --seed 28 --size 100
    python3 benchmarks/mutation/sample.py SESSION.sqlite --seed 28 --size 100 --report
"""

from __future__ import annotations

import argparse
import math
import random
import sqlite3
from collections import defaultdict

NOT_SAMPLED = "not in the sample"


def allocate(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Each module's share of `total`, proportional to its size (largest remainder)."""
    population = sum(sizes.values())
    exact = {module: total * size / population for module, size in sizes.items()}
    shares = {module: int(value) for module, value in exact.items()}
    by_remainder = sorted(sizes, key=lambda module: (shares[module] - exact[module], module))
    for module in by_remainder[: total - sum(shares.values())]:
        shares[module] += 1
    return shares


def wilson(killed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion killed/total."""
    if total == 0:
        return (0.0, 1.0)
    p = killed / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (centre - half, centre + half)


def report(db: sqlite3.Connection, sampled: set[str]) -> None:
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows = db.execute(
        "SELECT s.module_path, s.job_id, r.worker_outcome, r.test_outcome FROM mutation_specs s "
        "LEFT JOIN work_results r ON r.job_id = s.job_id"
    ).fetchall()
    for module, job_id, worker, test in rows:
        if job_id in sampled:
            verdict = test if worker == "NORMAL" else (worker or "PENDING")
            outcomes[module][verdict] += 1
            if verdict == "SURVIVED":
                print("survived:", job_id, module)
    totals: dict[str, int] = defaultdict(int)
    for module, counts in sorted(outcomes.items()):
        print(module, dict(counts))
        for verdict, count in counts.items():
            totals[verdict] += count
    killed, survived = totals["KILLED"], totals["SURVIVED"]
    low, high = wilson(killed, killed + survived)
    print(f"all {dict(totals)}: {killed}/{killed + survived} killed, 95 % {low:.3f}-{high:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    db = sqlite3.connect(args.session)
    with db:
        # Candidates: no result, or marked out of a previous sample.
        rows = db.execute(
            "SELECT s.module_path, s.job_id FROM mutation_specs s "
            "LEFT JOIN work_results r ON r.job_id = s.job_id "
            "WHERE r.job_id IS NULL OR r.output = ? ORDER BY s.module_path, s.job_id",
            (NOT_SAMPLED,),
        ).fetchall()
        done = db.execute(
            "SELECT s.module_path, s.job_id FROM mutation_specs s "
            "JOIN work_results r ON r.job_id = s.job_id "
            "WHERE r.worker_outcome != 'SKIPPED' ORDER BY s.module_path, s.job_id"
        ).fetchall()
        candidates: dict[str, list[str]] = defaultdict(list)
        for module, job_id in [*rows, *done]:
            candidates[module].append(job_id)
        shares = allocate({module: len(jobs) for module, jobs in candidates.items()}, args.size)
        sampled: set[str] = set()
        for module, jobs in sorted(candidates.items()):
            order = sorted(jobs)
            random.Random(f"{args.seed}:{module}").shuffle(order)
            sampled.update(order[: shares[module]])
            if not args.report:
                print(f"{module}: {shares[module]} of {len(jobs)}")
        if args.report:
            report(db, sampled)
            return
        db.execute("DELETE FROM work_results WHERE output = ?", (NOT_SAMPLED,))
        out = [(job_id,) for _, job_id in rows if job_id not in sampled]
        db.executemany(
            "INSERT INTO work_results (worker_outcome, output, job_id) VALUES ('SKIPPED', ?, ?)",
            [(NOT_SAMPLED, job_id) for (job_id,) in out],
        )
    print(f"sampled {len(sampled)} of {sum(map(len, candidates.values()))}")


if __name__ == "__main__":
    main()
