"""A seeded, deterministic simulator of gateway workloads, with invariants and shrinking.

``generate(seed)`` makes a script; ``Simulation(stores).run(script)`` plays it against a
real gateway on a VirtualClock and checks the invariants after every step;
``shrink(...)`` cuts a failing script down to a minimal one that still fails.
"""

from sessionwire.adapters.testkit.simulator.invariants import INVARIANTS, Invariant, Violation
from sessionwire.adapters.testkit.simulator.runner import SeededIds, Simulation, SimulationResult
from sessionwire.adapters.testkit.simulator.script import SimulationScript, SimulationScriptError
from sessionwire.adapters.testkit.simulator.shrinking import Shrunk, shrink
from sessionwire.adapters.testkit.simulator.stores import FreshStores, StoreSpecError, fresh_stores
from sessionwire.adapters.testkit.simulator.workload import WorkloadOptions, generate

__all__ = [
    "INVARIANTS",
    "FreshStores",
    "Invariant",
    "SeededIds",
    "Shrunk",
    "Simulation",
    "SimulationResult",
    "SimulationScript",
    "SimulationScriptError",
    "StoreSpecError",
    "Violation",
    "WorkloadOptions",
    "fresh_stores",
    "generate",
    "shrink",
]
