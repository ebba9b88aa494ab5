"""Test kit (contract §2): a virtual clock, scripted agents, captured deliveries."""

from sessionwire.adapters.deliveries import CapturingDelivery
from sessionwire.adapters.scripted_runtime import ScriptedRuntime, ScriptError
from sessionwire.adapters.virtual_clock import VirtualClock

__all__ = ["CapturingDelivery", "ScriptError", "ScriptedRuntime", "VirtualClock"]
