"""The fixed simulator budget of a mutation run (docs/benchmarks.md): a forwarding cycle
to the hop limit, 12 memory seeds and 4 SQLite seeds with crashes; store faults left out
(docs/testing.md finding 11 would fail every mutant alike). Exit 1 at the first seed that
breaks an invariant."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from typing import Any

from sessionwire.adapters.testkit.simulator.script import parse_steps
from sessionwire.testing import Simulation, WorkloadOptions, fresh_stores, generate

CYCLE = ["agent:main:discord:group:ops", "agent:main:discord:group:dev"]
CYCLE_STEP: dict[str, Any] = {
    "op": "send",
    "source": CYCLE[1],
    "target": CYCLE[0],
    "wait": 0,
    "plan": {"id": 1, "kind": "ok", "ann": "skip", "cycle": CYCLE, "at": 0, "wait": 0},
}
STALL_SECONDS = 20


async def main() -> int:
    # The seeds reach the hop limit too rarely: one cycle that does, first.
    world = generate(0, WorkloadOptions(steps=0, crashes=False))
    cycle = world.with_steps(parse_steps([CYCLE_STEP]))
    if not (await Simulation(fresh_stores("memory"), stall_seconds=STALL_SECONDS).run(cycle)).ok:
        return 1
    memory = Simulation(fresh_stores("memory"), stall_seconds=STALL_SECONDS)
    for seed in range(12):
        options = WorkloadOptions(crashes=False, store_faults=False)
        if not (await memory.run(generate(seed, options))).ok:
            return 1
    with tempfile.TemporaryDirectory() as directory:
        sqlite = Simulation(fresh_stores(f"sqlite:///{directory}"), stall_seconds=STALL_SECONDS)
        for seed in range(4):
            if not (await sqlite.run(generate(seed, WorkloadOptions(store_faults=False)))).ok:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
