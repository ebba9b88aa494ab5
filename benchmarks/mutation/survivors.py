"""A session whose only pending work is another session's survivors (docs/benchmarks.md):
run again after new checks, with any mutant whose run broke (ABNORMAL: the worker
failed, no verdict). Everything else keeps its verdict, or is SKIPPED when it
was not run (a sample's mutants not run yet stay for the sample's own session).

    python3 benchmarks/mutation/survivors.py SESSION.sqlite RERUN.sqlite
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session")
    parser.add_argument("rerun")
    args = parser.parse_args()
    shutil.copyfile(args.session, args.rerun)
    db = sqlite3.connect(args.rerun)
    with db:
        pending = db.execute(
            "SELECT w.job_id FROM work_items w LEFT JOIN work_results r ON r.job_id = w.job_id "
            "WHERE r.job_id IS NULL"
        ).fetchall()
        db.executemany(
            "INSERT INTO work_results (worker_outcome, output, job_id) "
            "VALUES ('SKIPPED', 'not run in the session', ?)",
            pending,
        )
        gone = db.execute(
            "DELETE FROM work_results "
            "WHERE test_outcome = 'SURVIVED' OR worker_outcome = 'ABNORMAL'"
        ).rowcount
    print(f"{gone} survivors (or broken runs) pending")


if __name__ == "__main__":
    main()
