"""What one run's recorded usage spends against its trace's budget (found by mutation
testing, docs/testing.md "What mutation testing left": the simulator plays no budgets)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from sessionwire import GatewayConfig
from sessionwire.application.orchestration.trace_budgets import _pending_in_trace, run_spending
from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.store import Store


def test_a_runs_usage_spends_its_tokens_and_its_reported_cost() -> None:
    config = GatewayConfig.load({})
    assert run_spending({"input": 3, "output": 2, "cost": 0.5}, None, config) == (5, 0.5)
    assert run_spending({"input": 3, "output": 2, "totalTokens": 9}, None, config) == (9, 0.0)


def test_no_usage_spends_nothing() -> None:
    config = GatewayConfig.load({})
    assert run_spending(None, None, config) == (0, 0.0)
    assert run_spending({}, None, config) == (0, 0.0)


def test_a_usage_that_does_not_validate_spends_nothing() -> None:
    config = GatewayConfig.load({})
    assert run_spending({"input": "many", "output": 2}, None, config) == (0, 0.0)


def test_a_negative_reported_cost_spends_nothing() -> None:
    config = GatewayConfig.load({})
    assert run_spending({"input": 1, "output": 1, "cost": -0.5}, None, config) == (2, 0.0)
    assert run_spending({"input": 1, "output": 1, "cost": {"total": -1}}, None, config) == (2, 0.0)


class Dispatching:
    """A run read model in which the trace's one run is dispatched (queued to running)
    right after the first read: as a writer commits beside a reader thread."""

    def __init__(self) -> None:
        self.run = StoredRun(
            run_id="r1", status="queued", session_key="agent:main:subagent:x", agent_id="main",
            step="subagent_task", requester_key=None, trace_id="t", parent_run_id="r0", hop=1,
            created_at=1, started_at=None, ended_at=None, attempt=1, usage=None, model=None,
            error=None, exchange_id=None, spawn_id=None,
        )  # fmt: skip

    def list_runs(self, query: RunQuery) -> list[StoredRun]:
        found = [self.run] if query.status in (None, self.run.status) else []
        self.run = replace(self.run, status="running")
        return found


def test_a_run_dispatched_while_the_budget_lists_the_trace_is_listed_once() -> None:
    # Listed by status, running then queued, the run was in neither list: the budget's
    # cancel missed it, and only its parent's cascade stopped it (with the cascade's reason).
    pending = _pending_in_trace(cast(Store, Dispatching()), "t")
    assert [run.run_id for run in pending] == ["r1"]
