"""Faults where bugs hide (issue 28 item 4): a transient store error on a save of the
gateway's own work, crashes just after a side effect (posted or answered, not yet
recorded), concurrent cancels, busy policy and route changes mid-run."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from sessionwire import ChannelDelivery, Delivery
from sessionwire.adapters.testkit.simulator.script import parse_steps
from sessionwire.application.orchestration.runs import LaneSlot, RunEngine, _current_slot
from sessionwire.testing import (
    Simulation,
    SimulationScript,
    WorkloadOptions,
    fresh_stores,
    generate,
)


def _script(steps: list[dict[str, Any]], **defaults: Any) -> SimulationScript:
    script = generate(0, WorkloadOptions(steps=0, crashes=False))
    agents = dict(
        script.config["agents"], defaults=dict(script.config["agents"]["defaults"], **defaults)
    )
    return script.model_copy(
        update={"config": dict(script.config, agents=agents), "steps": parse_steps(steps)}
    )


def _send(plan_id: int, target: str = "agent:beta:main", **plan: Any) -> dict[str, Any]:
    return {
        "op": "send",
        "source": "agent:main:main",
        "target": target,
        "wait": 0,
        "plan": {"id": plan_id, "kind": "ok", "ann": "skip", **plan},
    }


async def test_a_lane_slot_leaked_on_a_store_error_is_reported_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue's planted bug: the slot is released on the normal path only (not in
    ``finally``); after one store hiccup with maxConcurrent 1 the gateway runs nothing."""

    async def leaky(self: RunEngine, session_key: str, run_id: UUID) -> None:
        slot = LaneSlot(self._lane, run_id)
        token = _current_slot.set(slot)
        await slot.acquire()
        async with self.in_flight.session_lock(self.store, self.store.location, session_key):
            await self._execute(run_id)
        _current_slot.reset(token)
        slot.close()

    script = _script(
        [{"op": "store_fault"}, _send(1), {"op": "advance", "seconds": 5}, _send(2)],
        maxConcurrent=1,
    )
    assert (await Simulation(fresh_stores("memory"), stall_seconds=5).run(script)).ok
    monkeypatch.setattr(RunEngine, "_execute_in_lane", leaky)
    result = await Simulation(fresh_stores("memory"), stall_seconds=5).run(script)
    assert result.stuck is None
    assert {"slots-free", "runs-end"} <= set(result.counts), result.violations


async def test_a_store_error_in_a_runs_save_is_got_over() -> None:
    # One fault per save the run's actor makes on its way (dispatch, outcome).
    for faults in (1, 2):
        steps = [{"op": "store_fault"}] * faults + [_send(1), {"op": "advance", "seconds": 5}]
        result = await Simulation(fresh_stores("memory")).run(_script(steps))
        assert result.ok, result.violations


class KeyPerAttempt(ChannelDelivery):
    """A planted bug: each post carries a fresh idempotency key (the attempt's own)."""

    attempts = itertools.count(1)  # across gateway processes

    def __init__(self, inner: ChannelDelivery) -> None:
        self.inner = inner

    async def deliver(self, delivery: Delivery) -> None:
        key = f"attempt-{next(self.attempts)}"
        await self.inner.deliver(Delivery(**{**delivery.__dict__, "idempotency_key": key}))


async def test_a_crash_just_after_a_post_with_a_key_per_attempt_posts_twice(
    tmp_path: Path,
) -> None:
    """A crash just after the channel accepted the announce, before it was recorded: the
    new gateway posts it again. With a stable key the channel drops the repeat; with a key
    per attempt the owner (the exchange) has posted twice: exactly-once, per owner."""
    script = _script(
        [
            {"op": "crash", "after_events": 0, "down_seconds": 5, "at": "delivery"},
            _send(1, target="agent:main:discord:group:ops", ann="say"),
            {"op": "advance", "seconds": 5},
        ]
    )
    stores = fresh_stores(f"sqlite:///{tmp_path}")
    try:
        honest = await Simulation(stores).run(script)
        assert honest.crashes == 1
        assert honest.ok, honest.violations
        planted = await Simulation(stores, wrap_delivery=KeyPerAttempt).run(script)
    finally:
        stores.close()
    assert planted.first_invariant == "exactly-once", planted.violations
    assert "posted 2 times" in planted.violations[0].detail


async def test_a_crash_just_after_an_answer_dispatches_the_run_again_with_one_user_line(
    tmp_path: Path,
) -> None:
    script = _script(
        [
            {"op": "crash", "after_events": 0, "down_seconds": 1, "at": "reply"},
            _send(1, target="agent:main:discord:group:ops", ann="say"),
            {"op": "advance", "seconds": 5},
        ]
    )
    stores = fresh_stores(f"sqlite:///{tmp_path}")
    try:
        result = await Simulation(stores).run(script)
    finally:
        stores.close()
    assert result.crashes == 1
    assert result.ok, result.violations


async def test_concurrent_cancels_record_one_cancellation() -> None:
    script = _script(
        [
            _send(1, kind="slow", delay=60),
            {"op": "cancel", "pick": "in_flight", "session": "agent:beta:main", "copies": 3},
            {"op": "advance", "seconds": 120},
        ]
    )
    result = await Simulation(fresh_stores("memory")).run(script)
    assert result.ok, result.violations


def test_the_workload_has_the_new_faults() -> None:
    ops: dict[str, int] = {}
    ats: dict[str, int] = {}
    copies = 0
    for seed in range(60):
        for step in generate(seed).steps:
            ops[step.op] = ops.get(step.op, 0) + 1
            if step.op == "crash":
                ats[step.at] = ats.get(step.at, 0) + 1  # type: ignore[union-attr]
            if step.op == "cancel" and step.copies > 1:  # type: ignore[union-attr]
                copies += 1
    assert ops.get("store_fault", 0) > 10
    assert ops.get("route", 0) > 10
    assert ops.get("busy", 0) > 10
    assert {"save", "delivery", "reply"} <= set(ats)
    assert copies > 5
