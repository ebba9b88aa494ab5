"""What one run's recorded usage spends against its trace's budget (found by mutation
testing, docs/testing.md "What mutation testing left": the simulator plays no budgets)."""

from __future__ import annotations

from sessionwire import GatewayConfig
from sessionwire.application.orchestration.trace_budgets import run_spending


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
