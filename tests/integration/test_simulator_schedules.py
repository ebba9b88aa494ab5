"""The simulator and schedules (decision 36): an interval schedule in every default
workload, and the oracle's ``schedules-fire-once`` — derived from its own interval
arithmetic — passing a play with downtime over several due times and catching a gateway
that fires each missed due time instead of once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.simulator.runner import Simulation
from sessionwire.adapters.testkit.simulator.script import parse_steps
from sessionwire.adapters.testkit.simulator.workload import WorkloadOptions, generate
from sessionwire.domain.schedule import Firing, Schedule, firing_run_id
from test_simulator_yields import KeptSQLite

EVERY = 600
STEPS = [
    {"op": "advance", "seconds": 1300},  # two due times, on time
    {"op": "crash", "after_events": 0, "down_seconds": 3000, "at": "save"},  # five pass
    {"op": "advance", "seconds": 700},  # on time again
]


def _script() -> Any:
    script = generate(0, WorkloadOptions(steps=0))
    config = {**script.config, "schedules": [{"id": "t", "everySeconds": EVERY, "message": "x"}]}
    config["session"] = {**config["session"], "agentToAgent": {"maxPingPongTurns": 0}}
    return script.model_copy(update={"config": config, "steps": parse_steps(STEPS)})


async def _firings(path: Path) -> list[Any]:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=f"sqlite:///{path}", resume=False
    )
    try:
        timeline = await gateway.timeline("agent:main:cron:t")
    finally:
        await gateway.close()
    return [entry for entry in timeline.entries if entry.event == "ScheduleFired"]


def test_every_default_workload_has_a_schedule_and_its_steps_stay_those_without() -> None:
    for seed in range(5):
        with_schedules = generate(seed)
        without = generate(seed, WorkloadOptions(schedules=False))
        (schedule,) = with_schedules.config["schedules"]
        assert 60 <= schedule["everySeconds"] <= 86_400
        assert with_schedules.steps == without.steps
        assert {**with_schedules.config, "schedules": None} == {
            **without.config,
            "schedules": None,
        }


async def test_downtime_over_several_due_times_fires_once_late_and_the_oracle_agrees(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sim.db"
    result = await Simulation(KeptSQLite(path)).run(_script())
    assert result.ok, result.violations
    assert result.crashes == 1
    firings = await _firings(path)
    # 600, 1200 on time; 1800..4200 passed while down: one late firing; then 4800.
    assert len(firings) == 4
    assert ["(late)" in entry.summary for entry in firings] == [False, False, True, False]


async def test_a_gateway_that_fires_every_missed_due_time_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The planted bug: a firing after a gap stands for its first due time only, so the
    # due times missed while down fire one by one, on time as far as the firing says.
    def one_slot(self: Schedule, now: Any) -> Firing | None:
        first = self.state.next_due_ms
        if first is None or first > int(now.timestamp() * 1000):
            return None
        return Firing(first, first, False, firing_run_id(self.state.schedule_id, first))

    monkeypatch.setattr(Schedule, "firing", one_slot)
    result = await Simulation(KeptSQLite(tmp_path / "sim.db")).run(_script())
    found = [v for v in result.violations if v.invariant == "schedules-fire-once"]
    assert found, result.violations
    assert any("leaving due time" in v.detail for v in found), found
