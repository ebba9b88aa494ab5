"""Test kit (contract §2): a virtual clock, scripted agents, captured deliveries, and
given/when/then scenarios for the process managers. The pytest fixtures (``gateway``,
``clock``, ``scripted``) come with the package's pytest plugin
(sessionwire.adapters.testkit.pytest_plugin).

``Scenario.given`` takes recorded history as aggregates, so the aggregates a scenario
starts from (``Session``, ``Spawn``) and ``to_millis`` are exported here too: tests need
only this module and ``sessionwire`` (contract §6 decision 19).
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
from sessionwire.domain.session import Session, to_millis
from sessionwire.domain.spawn import Spawn

__all__ = [
    "INVARIANTS",
    "CapturingDelivery",
    "EventsDiffer",
    "Expected",
    "FreshStores",
    "Scenario",
    "ScriptError",
    "ScriptedRuntime",
    "Session",
    "Simulation",
    "SimulationResult",
    "SimulationScript",
    "SimulationScriptError",
    "Spawn",
    "Violation",
    "VirtualClock",
    "WorkloadOptions",
    "expect",
    "fresh_stores",
    "generate",
    "shrink",
    "to_millis",
]
