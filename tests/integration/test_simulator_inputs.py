"""The simulator and runs that wait for input (decision 33): asks and answers in the
default workload (late, early, twice, around crashes, after the deadline), the oracle's
``input-waits`` passing a play of every kind on SQLite with crashes, and catching a
gateway that takes a second answer, resumes a turn twice, resumes a waiting run with no
answer, or never times a waiting run out."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from sessionwire import Gateway
from sessionwire.adapters.testkit.simulator.runner import Simulation
from sessionwire.adapters.testkit.simulator.script import (
    Advance,
    Answer,
    Crash,
    Send,
    SimulationScript,
    parse_steps,
    plan_text,
)
from sessionwire.adapters.testkit.simulator.stores import MemoryStores
from sessionwire.adapters.testkit.simulator.workload import WorkloadOptions, generate
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.domain.run import Run
from test_simulator_yields import KeptSQLite

TIMEOUT = 30
SOURCE, TARGET, OTHER = "agent:main:main", "agent:beta:main", "agent:main:discord:group:ops"


def _asking(plan_id: int, **more: Any) -> dict[str, Any]:
    plan = {"id": plan_id, "kind": "ok", "depth": 1, "pp": 0, "ann": "skip"}
    return plan | {"ask": {"prompt": f"go on with plan {plan_id}?", "options": None}} | more


def _answer(plan_id: int) -> str:
    return plan_text({"id": plan_id, "kind": "ok", "depth": 1, "pp": 0, "ann": "skip"})


STEPS: list[dict[str, Any]] = [
    # Asks at once (the waited send answers input_required); killed while it waits.
    {"op": "send", "source": SOURCE, "target": TARGET, "wait": 30, "plan": _asking(1)},
    {"op": "crash", "after_events": 0, "down_seconds": 5, "at": "save"},
    # Armed before the answer: the process dies once the answer is recorded.
    {"op": "crash", "after_events": 1, "down_seconds": 5, "at": "save"},
    {"op": "answer", "plan": 1, "text": _answer(2)},
    {"op": "answer", "plan": 1, "text": _answer(2), "copies": 2},  # both refused: answered
    # Slow before it asks: the early answer is refused (it is running), then it asks.
    {"op": "send", "source": SOURCE, "target": OTHER, "wait": 0, "plan": _asking(3, delay=5)},
    {"op": "answer", "plan": 3, "text": _answer(4)},
    {"op": "advance", "seconds": TIMEOUT + 60},  # its deadline passes while it waits
    {"op": "answer", "plan": 3, "text": _answer(4)},  # refused: it timed out
]


def _script(steps: list[dict[str, Any]] = STEPS) -> SimulationScript:
    script = generate(0, WorkloadOptions(steps=0))
    config = {key: value for key, value in script.config.items() if key != "schedules"}
    config["session"] = {"agentToAgent": {"maxPingPongTurns": 0}}
    config["agents"]["defaults"]["timeoutSeconds"] = TIMEOUT
    return script.model_copy(update={"config": config, "steps": parse_steps(steps)})


async def _runs(path: Path) -> dict[str, list[str]]:
    """Each session's runs' statuses, oldest first."""
    gateway = await Gateway.open(store=f"sqlite:///{path}", resume=False)
    try:
        found: dict[str, list[str]] = {}
        for key in (TARGET, OTHER):
            listed = await gateway.runs(session_key=key, limit=10)
            found[key] = [
                run["status"] for run in reversed(listed["runs"]) if run["step"] == "primary"
            ]
        return found
    finally:
        await gateway.close()


def test_the_default_workload_asks_and_answers_and_its_other_steps_stay() -> None:
    played = 0
    for seed in range(12):
        with_inputs = generate(seed)
        without = generate(seed, WorkloadOptions(inputs=False))
        assert with_inputs.config == without.config
        assert len(with_inputs.steps) == len(without.steps)
        for step, before in zip(with_inputs.steps, without.steps, strict=True):
            if step == before:
                continue
            # An ask in a send's plan, or an answer (and what it needs) in place of a step.
            assert isinstance(step, Answer | Advance | Crash | Send), step
            if isinstance(step, Send):
                assert isinstance(before, Send)
                assert "ask" in step.plan
                assert step.model_copy(update={"plan": before.plan}) == before
        played += any(isinstance(step, Answer) for step in with_inputs.steps)
    assert played >= 6


async def test_every_kind_of_answer_on_sqlite_with_crashes_passes_the_oracle(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sim.db"
    result = await Simulation(KeptSQLite(path)).run(_script())
    assert result.ok, result.violations
    assert result.crashes == 2
    statuses = await _runs(path)
    assert statuses[TARGET] == ["ok"]  # one turn after the one answer accepted
    assert statuses[OTHER] == ["timeout"]


async def test_a_second_answer_accepted_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The planted bug: an answer is taken whatever the run's status.
    def taking_any(self: Run, *, text: str, by: str | None, at: datetime) -> None:
        self.trigger_event(self.RunInputProvided, timestamp=at, text=text, by=by)

    monkeypatch.setattr(Run, "provide_input", taking_any)
    result = await Simulation(MemoryStores()).run(_script(STEPS[:1] + STEPS[3:5]))
    found = [v for v in result.violations if v.invariant == "input-waits"]
    assert any("after its outcome" in v.detail for v in found), result.violations


async def test_a_turn_resumed_twice_for_one_answer_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The planted bug: the first dispatch after an answer is recorded twice.
    dispatch = Run.dispatch

    def twice(self: Run, *, at: datetime) -> None:
        dispatch(self, at=at)
        if self.state.answers and self.state.attempts == self.state.turn_dispatches + 1:
            dispatch(self, at=at)

    monkeypatch.setattr(Run, "dispatch", twice)
    result = await Simulation(MemoryStores()).run(_script(STEPS[:1] + STEPS[3:4]))
    found = [v for v in result.violations if v.invariant == "input-waits"]
    assert any("2 times in one gateway process" in v.detail for v in found), result.violations


async def test_a_waiting_run_resumed_without_an_answer_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The planted bug: a run that asked is stored as queued, not waiting: a reopened
    # gateway resumes it with the pending runs, no answer given.
    asked = Run.RunInputRequested.apply

    def still_queued(self: Any, aggregate: Run) -> None:
        asked(self, aggregate)
        aggregate.state = aggregate.state.model_copy(update={"status": "queued"})

    monkeypatch.setattr(Run.RunInputRequested, "apply", still_queued)
    result = await Simulation(KeptSQLite(tmp_path / "sim.db")).run(_script(STEPS[:2]))
    found = [v for v in result.violations if v.invariant == "input-waits"]
    assert any("with no answer" in v.detail for v in found), result.violations


async def test_a_waiting_run_never_timed_out_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The planted bug: the deadline of a waiting run is never watched (the answer after
    # it is refused: the domain knows the deadline too).
    async def never(self: RunEngine, run_id: UUID, seconds: float) -> None:
        return None

    monkeypatch.setattr(RunEngine, "_time_out_waiting", never)
    late = [STEPS[0], {"op": "advance", "seconds": TIMEOUT + 60}, STEPS[3]]
    result = await Simulation(MemoryStores()).run(_script(late))
    found = [v for v in result.violations if v.invariant == "input-waits"]
    assert any("still waits for input past its deadline" in v.detail for v in found), found


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_finding_a_waiting_runs_timeout_whose_save_failed_is_made_again(
    kind: str, tmp_path: Path
) -> None:
    # Seed 200145 on memory, shrunk: the deadline timer's save met the store fault and
    # the timer died; the run waited on past its deadline (and took a late answer).
    steps = [STEPS[0], {"op": "store_fault"}, {"op": "advance", "seconds": TIMEOUT + 60}]
    stores = MemoryStores() if kind == "memory" else KeptSQLite(tmp_path / "sim.db")
    result = await Simulation(stores).run(_script(steps))
    assert result.ok, result.violations
