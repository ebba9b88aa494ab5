"""An independent reference model of the contract, to check the simulator's logs by.

It shares nothing with the product but the event *names*: a log is read as ``Fact``s
(name, aggregate, time, plain fields), the inputs as the script's own config and what
the simulator did (``World``), and every rule is written from ``docs/`` and the
contract's decisions (import-linter keeps ``domain`` and ``application`` out).
"""

from sessionwire.adapters.testkit.simulator.oracle.checks import CHECKS, OracleCheck, check
from sessionwire.adapters.testkit.simulator.oracle.facts import Fact, World, read_plan
from sessionwire.adapters.testkit.simulator.oracle.model import LogModel

__all__ = ["CHECKS", "Fact", "LogModel", "OracleCheck", "World", "check", "read_plan"]
