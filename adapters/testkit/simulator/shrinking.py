"""Shrinking a failing script to a minimal one that fails the same way (delta debugging).

Zeller's ddmin over the step list: try removing chunks of steps, halving the chunk size
when nothing can go, until no single step can be removed. "Fails the same way" means
the same invariant is broken; the world (config, sessions) stays as it is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sessionwire.adapters.testkit.simulator.runner import Simulation, SimulationResult
from sessionwire.adapters.testkit.simulator.script import SimulationScript, Step
from sessionwire.domain.errors import SessionwireError

MAX_TRIES = 400


@dataclass
class Shrunk:
    script: SimulationScript
    result: SimulationResult
    """The shrunk script's own run (it breaks ``invariant``)."""
    invariant: str
    tries: int
    seconds: float


class NotReproduced(SessionwireError, ValueError):
    """The script broke no invariant when played again (for a seed that failed once: a
    failure that depends on timing, e.g. a writer thread's, not on the script alone)."""


async def shrink(
    simulation: Simulation,
    script: SimulationScript,
    invariant: str | None = None,
    *,
    max_tries: int = MAX_TRIES,
) -> Shrunk:
    """The smallest script found (within ``max_tries`` runs) that still breaks
    ``invariant`` (by default the first one ``script`` breaks)."""
    started = time.perf_counter()
    result = await simulation.run(script)
    if invariant is None:
        invariant = result.first_invariant
    if invariant is None or not _breaks(result, invariant):
        raise NotReproduced("the script breaks no invariant: nothing to shrink")
    steps = list(script.steps)
    best = result
    tries = 1
    chunks = 2
    while len(steps) >= 2 and tries < max_tries:
        size = max(1, len(steps) // chunks)
        removed_any = False
        start = 0
        while start < len(steps) and tries < max_tries:
            candidate: list[Step] = steps[:start] + steps[start + size :]
            tries += 1
            outcome = await simulation.run(script.with_steps(candidate))
            if _breaks(outcome, invariant):
                steps = candidate
                best = outcome
                removed_any = True
                chunks = max(chunks - 1, 2)
            else:
                start += size
        if not removed_any:
            if size == 1:
                break
            chunks = min(len(steps), chunks * 2)
    if len(steps) == 1 and tries < max_tries:
        # Even the world alone may break it (a bug at opening time).
        tries += 1
        outcome = await simulation.run(script.with_steps([]))
        if _breaks(outcome, invariant):
            steps, best = [], outcome
    return Shrunk(
        script=script.with_steps(steps),
        result=best,
        invariant=invariant,
        tries=tries,
        seconds=time.perf_counter() - started,
    )


def _breaks(result: SimulationResult, invariant: str) -> bool:
    return any(violation.invariant == invariant for violation in result.violations)


__all__ = ["Shrunk", "shrink"]
