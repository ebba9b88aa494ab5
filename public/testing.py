"""Test kit (contract §2): a virtual clock, scripted agents, captured deliveries, and
given/when/then scenarios for the process managers. The pytest fixtures (``gateway``,
``clock``, ``scripted``) come with the package's pytest plugin
(sessionwire.adapters.testkit.pytest_plugin).
"""

from sessionwire.adapters.runtimes.scripted import ScriptedRuntime, ScriptError
from sessionwire.adapters.testkit.deliveries import CapturingDelivery
from sessionwire.adapters.testkit.given_when_then import EventsDiffer, Expected, Scenario, expect
from sessionwire.adapters.testkit.simulator import (
    INVARIANTS,
    FreshStores,
    Simulation,
    SimulationResult,
    SimulationScript,
    SimulationScriptError,
    Violation,
    WorkloadOptions,
    fresh_stores,
    generate,
    shrink,
)
from sessionwire.adapters.testkit.virtual_clock import VirtualClock

__all__ = [
    "INVARIANTS",
    "CapturingDelivery",
    "EventsDiffer",
    "Expected",
    "FreshStores",
    "Scenario",
    "ScriptError",
    "ScriptedRuntime",
    "Simulation",
    "SimulationResult",
    "SimulationScript",
    "SimulationScriptError",
    "Violation",
    "VirtualClock",
    "WorkloadOptions",
    "expect",
    "fresh_stores",
    "generate",
    "shrink",
]
