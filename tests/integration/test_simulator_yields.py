"""The simulator and sessions_yield: yields in its workloads, and the invariant "every
yield wakes exactly once" (``yields-wake-once``), shown to catch a log that breaks it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.simulator.invariants import INVARIANTS, LogReader
from sessionwire.adapters.testkit.simulator.runner import Simulation
from sessionwire.adapters.testkit.simulator.script import parse_steps
from sessionwire.adapters.testkit.simulator.stores import FreshStores
from sessionwire.adapters.testkit.simulator.workload import WorkloadOptions, generate
from sessionwire.domain.base import DomainEvent
from sessionwire.domain.causality import Causality
from sessionwire.domain.run import Run
from sessionwire.domain.run_yield import RunYield, YieldChild, wake_run_id_for

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
CHILD = YieldChild(spawn_id="s", child_key="agent:main:subagent:x", run_id="r")


class ListLog:
    """An event log that is a list: what LogReader reads, with no store."""

    def __init__(self, events: list[DomainEvent]) -> None:
        self.items = events

    def events(self, start: int = 1) -> Iterator[tuple[int, DomainEvent]]:
        for position, event in enumerate(self.items, start=1):
            if position >= start:
                yield position, event


def a_yield(number: int) -> RunYield:
    return RunYield.record(
        yield_id=UUID(int=number),
        session_key="agent:main:main",
        agent_id="main",
        run_id=None,
        wait_for="all",
        due_at=None,
        message=None,
        children=[CHILD],
        causality=None,
        at=T0,
    )


def wake_turn(yielded: RunYield) -> Run:
    return Run.start(
        run_id=wake_run_id_for(yielded.id),
        session_key="agent:main:main",
        agent_id="main",
        step="yield_wake",
        message="woken",
        timeout_seconds=600,
        at=T0,
        causality=Causality.root("t"),
    )


def test_the_invariant_is_listed() -> None:
    assert "yields-wake-once" in INVARIANTS


def test_a_log_where_a_yield_wakes_twice_never_or_without_its_turn_is_caught() -> None:
    twice, never, turnless, fine = (a_yield(n) for n in (1, 2, 3, 4))
    for yielded in (twice, turnless, fine):
        yielded.wake(reason="all", reports=[], still_running=[], at=T0)
    events: list[DomainEvent] = []
    for yielded in (twice, never, turnless, fine):
        events += yielded.collect_events()
    events += wake_turn(twice).collect_events() + wake_turn(fine).collect_events()
    woken = next(e for e in events if isinstance(e, RunYield.YieldWoken))
    # The planted bug: the same yield's wake recorded a second time.
    events.append(woken.model_copy(update={"originator_version": 3}))

    reader = LogReader()
    problems = reader.read(ListLog(events))  # type: ignore[arg-type]
    assert problems == [
        ("yields-wake-once", f"yield {twice.id} woke twice (log position {len(events)})")
    ]
    assert sorted(reader.yield_problems()) == sorted(
        [
            f"yield {twice.id} woke 2 times",
            f"yield {never.id} woke 0 times",
            f"yield {turnless.id} woke, but its turn never started",
        ]
    )


def test_a_clean_log_has_no_yield_problem() -> None:
    yielded = a_yield(5)
    yielded.wake(reason="timeout", reports=[], still_running=[], at=T0)
    reader = LogReader()
    log = ListLog(yielded.collect_events() + wake_turn(yielded).collect_events())
    assert reader.read(log) == []  # type: ignore[arg-type]
    assert reader.yield_problems() == []


def test_workloads_have_yields_and_a_seed_is_as_before_plus_them() -> None:
    yielding = [seed for seed in range(40) if '"yield"' in json.dumps(_plans(seed))]
    assert len(yielding) >= 5
    # Drawn from a generator of their own: without yields a seed's script is the same
    # but for the yield keys.
    for seed in yielding[:3]:
        with_yields = _plans(seed)
        without = _plans(seed, yields=False)
        assert _strip_yields(with_yields) == without


class KeptSQLite(FreshStores):
    """One SQLite file, kept after the run so the test can read its events."""

    name = "sqlite"
    can_reopen = True

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def fresh(self) -> Iterator[str]:
        yield f"sqlite:///{self.path}"


async def test_a_turn_that_spawns_and_yields_wakes_once_in_the_simulator(tmp_path: Path) -> None:
    script = generate(0, WorkloadOptions(steps=0, crashes=False))
    child = {"tool": "spawn", "cleanup": "keep", "plan": {"id": 2, "kind": "slow", "delay": 30}}
    hang = {"tool": "spawn", "cleanup": "keep", "plan": {"id": 3, "kind": "hang"}}
    steps = [
        {
            "op": "send",
            "source": "agent:main:discord:group:ops",
            "target": "agent:main:main",
            "wait": 0,
            "plan": {"id": 1, "kind": "ok", "calls": [child, hang], "yield": "any", "ann": "skip"},
        }
    ]
    script = script.model_copy(update={"steps": parse_steps(steps)})
    path = tmp_path / "sim.db"
    result = await Simulation(KeptSQLite(path)).run(script)
    assert result.ok, result.violations
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=f"sqlite:///{path}", resume=False
    )
    try:
        timeline = await gateway.timeline("agent:main:main")
    finally:
        await gateway.close()
    names = [entry.event for entry in timeline.entries]
    assert names.count("RunYielded") == 1
    assert names.count("YieldWoken") == 1


def _plans(seed: int, *, yields: bool = True) -> list[Any]:
    # Without input waits: an ask is never put on a yielding plan, so where the asks go
    # depends on the yields (the asks' own draws are checked in test_simulator_inputs).
    script = generate(seed, WorkloadOptions(yields=yields, inputs=False))
    return [step.model_dump(mode="json") for step in script.steps]


def _strip_yields(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _strip_yields(item) for key, item in value.items() if key != "yield"}
    if isinstance(value, list):
        return [_strip_yields(item) for item in value]
    return value
