"""Process managers that start runs of their own when their time comes (a yield's wake,
a schedule's firing): built on the run engine, the config's run timeout and the trace
budgets that admit each run first (ADR 0034)."""

from __future__ import annotations

from typing import TypeVar

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.process_managers import ProcessManager
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.application.orchestration.trace_budgets import TraceBudgets
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.domain.base import Aggregate

A = TypeVar("A", bound=Aggregate)


class BudgetedProcessManager(ProcessManager[A]):
    def __init__(
        self,
        *,
        store: AsyncStore,
        in_flight: InFlight,
        clock: Clock,
        runs: RunEngine,
        config: GatewayConfig,
        budgets: TraceBudgets,
    ) -> None:
        super().__init__(store, in_flight)
        self.clock = clock
        self.runs = runs
        self.config = config
        self.budgets = budgets
        self.setup()

    def setup(self) -> None:
        """A subclass's own state, made once the parts are in place."""


__all__ = ["BudgetedProcessManager"]
