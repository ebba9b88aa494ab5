"""The simulator's ``trace-budget`` (the reference model's own count) and ``steers``
invariants read a log that breaks them (and one that keeps them): real Run events, no
gateway."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from sessionwire.adapters.testkit.simulator.invariants import INVARIANTS, LogReader
from sessionwire.adapters.testkit.simulator.oracle import CHECKS, LogModel, World
from sessionwire.domain.causality import Causality
from sessionwire.domain.run import Run
from sessionwire.domain.transcript import Usage

AT = datetime(2026, 1, 1, tzinfo=UTC)
TRACE = "trace-1"


class _Log:
    def __init__(self, events: list[Any]) -> None:
        self.recorded = events

    def events(self, *, start: int = 1) -> Iterator[tuple[int, Any]]:
        yield from list(enumerate(self.recorded, 1))[start - 1 :]


def _run(step: str = "primary", trace: str = TRACE) -> Run:
    return Run.start(
        run_id=uuid4(),
        session_key="agent:main:main",
        agent_id="main",
        step=step,  # type: ignore[arg-type]
        message="m",
        timeout_seconds=60,
        at=AT,
        causality=Causality.root(trace),
    )


def _events(*runs: Run) -> list[Any]:
    return [event for run in runs for event in run.collect_events()]


def _budget_problems(budget: dict[str, Any] | None, events: list[Any]) -> list[str]:
    """The reference model's trace-budget check over real product events, read as the
    simulator reads them (``LogReader.facts``): the config is the script's dict."""
    reader = LogReader()
    reader.read(_Log(events))  # type: ignore[arg-type]
    config = {"session": {"agentToAgent": {"budget": budget}}} if budget else {}
    check = CHECKS["trace-budget"].check
    return list(check(LogModel.of(reader.facts), World(config=config)))


def test_the_invariants_are_listed() -> None:
    assert {"trace-budget", "steers"} <= set(INVARIANTS)


def test_a_run_started_past_max_runs_is_caught() -> None:
    first, second, third, elsewhere = _run(), _run(), _run(), _run(trace="other")
    within = _events(first, second, elsewhere)
    assert _budget_problems({"maxRuns": 2}, within) == []
    (problem,) = _budget_problems({"maxRuns": 2}, within + _events(third))
    assert str(third.id) in problem
    assert "maxRuns 2 reached (2 runs)" in problem


def test_a_spawn_past_max_spawns_is_caught_and_a_send_is_not() -> None:
    spawned, send, again = _run("subagent_task"), _run(), _run("subagent_task")
    (problem,) = _budget_problems({"maxSpawns": 1}, _events(spawned, send, again))
    assert str(again.id) in problem
    assert "maxSpawns 1 reached" in problem


def test_a_run_started_after_the_traces_runs_spent_max_tokens_is_caught() -> None:
    spender, before, after = _run(), _run(), _run()
    spender.dispatch(at=AT)
    log = _events(spender, before)
    spender.complete(reply="r", usage=Usage(input=80, output=30), model=None, at=AT)
    log += _events(spender) + _events(after)
    (problem,) = _budget_problems({"maxTokens": 100}, log)
    assert str(after.id) in problem
    assert "maxTokens 100 reached (110 tokens)" in problem


def test_without_a_budget_nothing_is_caught() -> None:
    assert _budget_problems(None, _events(*[_run() for _ in range(30)])) == []


def test_a_steer_recorded_after_the_runs_outcome_is_caught() -> None:
    reader = LogReader()
    steered, late = _run(), _run()
    for run in (steered, late):
        run.dispatch(at=AT)
    steered.steer(message="hi", steered_by="agent:main:main", at=AT)
    log = _events(steered, late)
    late.complete(reply="r", usage=None, model=None, at=AT)
    log += _events(late)
    # A RunSteered after the outcome: what the domain refuses, written into the log.
    after = _run()
    after.dispatch(at=AT)
    after.steer(message="too late", steered_by="agent:main:main", at=AT + timedelta(seconds=1))
    steer_event = after.collect_events()[-1]
    log.append(steer_event.model_copy(update={"originator_id": late.id}))
    reader.read(_Log(log))  # type: ignore[arg-type]
    assert steered.id in reader.steered
    (problem,) = reader.steer_problems
    assert str(late.id) in problem
    assert "after its outcome RunCompleted" in problem
