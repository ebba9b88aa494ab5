"""`audit verify FILE` keeps memory by what the file holds, not by the versions it
claims (issue 27 finding 6: a 101 KB file whose events jumped a million versions each
took 1.6 GB and 55 s)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from sessionwire.application.audit.verify_file import MAX_JUMP, verify_file

EXPORT = Path(__file__).parents[1] / "fixtures" / "storage_v2" / "export.jsonl"
JUMPS = 200


def forged_jumps(folder: Path) -> Path:
    """One stream's first event again and again, each claiming a version MAX_JUMP past
    the one before (the largest jump verify reads on rather than refuses)."""
    header, first = EXPORT.read_text().splitlines()[:2]
    event = json.loads(first)
    lines = [header]
    for index in range(JUMPS):
        forged = {
            **event,
            "originator_version": 1 + index * MAX_JUMP,
            "notification_id": index + 1,
            "log_seq": index + 1,
        }
        lines.append(json.dumps(forged))
    path = folder / "forged.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_versions_claimed_far_apart_cost_no_memory_for_the_gaps(tmp_path: Path) -> None:
    forged = forged_jumps(tmp_path)
    assert forged.stat().st_size < 150_000
    tracemalloc.start()
    try:
        with forged.open() as lines:  # streamed, as the command reads it
            report = verify_file(lines)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not report.clean  # forged: findings, not a clean report
    # A dense table would hold 8 bytes for every claimed version: 1.6 GB here.
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.1f} MiB"
