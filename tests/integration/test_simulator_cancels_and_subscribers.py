"""The simulator's cancellations, busy policies and subscribers (issue 13 item 6): the new
steps are generated and round-trip as JSON, and each new invariant catches a planted
violation (these tests fail if the check were removed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

import pytest
from sessionwire.adapters.testkit.simulator.invariants import (
    Follower,
    LogReader,
    subscriber_problems,
)
from sessionwire.adapters.testkit.simulator.script import (
    Busy,
    Cancel,
    Subscribe,
    parse_steps,
)
from sessionwire.application.event_stream.subscription import Subscription
from sessionwire.domain.busy_decision import busy_decision_id
from sessionwire.testing import (
    INVARIANTS,
    Simulation,
    SimulationScript,
    WorkloadOptions,
    generate,
)


def test_the_new_invariants_have_names() -> None:
    assert {"subscribers", "cancel-outcome", "busy-decided", "send-delivery"} <= set(INVARIANTS)


def test_workloads_mix_in_cancels_busy_policies_and_one_late_subscriber() -> None:
    scripts = [generate(seed) for seed in range(60)]
    steps = [step for script in scripts for step in script.steps]
    cancels = [step for step in steps if isinstance(step, Cancel)]
    assert {step.pick for step in cancels} == {"nth", "in_flight", "tree"}
    assert any(step.pick == "nth" and step.index < 0 for step in cancels)
    assert {step.busy for step in steps if isinstance(step, Busy)} >= {
        "reject",
        "interrupt",
        "steer",
        None,
    }
    for script in scripts:
        assert sum(isinstance(step, Subscribe) for step in script.steps) == 1
    policies = {script.config["session"]["agentToAgent"]["busy"] for script in scripts}
    assert policies == {"enqueue", "reject", "interrupt", "steer"}
    # The old mix stays dominant.
    assert len(cancels) + sum(isinstance(step, Busy) for step in steps) < len(steps) / 5


def test_the_new_steps_can_be_left_out() -> None:
    script = generate(3, WorkloadOptions(cancels=False, busy=False, subscribers=False))
    assert not any(isinstance(step, Cancel | Busy | Subscribe) for step in script.steps)
    assert "busy" not in script.config["session"]["agentToAgent"]


def test_the_new_steps_round_trip_as_json() -> None:
    raw = [
        {"op": "cancel", "pick": "nth", "index": -2, "reason": "superseded"},
        {"op": "cancel", "pick": "in_flight", "session": "agent:main:main"},
        {"op": "busy", "session": "agent:beta:main", "busy": "interrupt"},
        {"op": "busy", "session": "agent:beta:main", "busy": None},
        {"op": "subscribe"},
    ]
    steps = parse_steps(raw)
    assert [type(step) for step in steps] == [Cancel, Cancel, Busy, Busy, Subscribe]
    script = SimulationScript(seed=1, config={}, sessions=[], steps=steps)
    assert SimulationScript.from_json(script.to_json()) == script
    with pytest.raises(ValueError, match="busy"):
        parse_steps([{"op": "busy", "session": "agent:main:main", "busy": "drop"}])


def test_a_subscriber_that_missed_an_event_is_caught() -> None:
    log = [(1, "SessionOpened"), (2, "MessageAppended"), (2, "MessageAppended"), (3, "RunStarted")]
    whole = Follower(0, seen=list(log))
    assert subscriber_problems(whole, log, head=3, complete=True) == []
    late = Follower(2, seen=[(3, "RunStarted")])
    assert subscriber_problems(late, log, head=3, complete=True) == []
    # One of a batch's two single appends (one position) is missing.
    missing = Follower(0, seen=[log[0], log[1], log[3]])
    assert subscriber_problems(missing, log, head=3, complete=True) != []
    repeated = Follower(0, seen=[log[0], log[0]])
    assert subscriber_problems(repeated, log, head=3, complete=False) != []
    behind = Follower(0, seen=log[:2])
    assert subscriber_problems(behind, log, head=3, complete=True) != []
    assert subscriber_problems(Follower(0, seen=log[:2]), log, head=3, complete=False) == []


async def test_the_simulation_catches_a_subscription_that_skips_an_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = Subscription.recorded

    async def skips_the_fifth(self: Subscription) -> AsyncIterator[dict[str, Any]]:
        async for event in recorded(self):
            if event["position"] != 5:
                yield event

    monkeypatch.setattr(Subscription, "recorded", skips_the_fifth)
    result = await Simulation().run(generate(1))
    assert result.first_invariant == "subscribers"
    assert "from position 0" in str(result.violations[0])


@dataclass
class _Event:
    originator_id: UUID
    originator_version: int = 1
    timestamp: str = "t"
    fields: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None


def _event(name: str, aggregate: UUID, **fields: Any) -> Any:
    return type(name, (_Event,), {})(aggregate, fields=fields)


class _Log:
    def __init__(self, *events: Any) -> None:
        self.recorded = list(events)

    def events(self, *, start: int = 1) -> Iterator[tuple[int, Any]]:
        yield from list(enumerate(self.recorded, 1))[start - 1 :]


def test_a_rejected_send_that_started_a_run_is_caught() -> None:
    # As the gateway records a rejection: the decision's id is the send's run id's
    # (busy_decision_id), its own run_id empty (this test once set it, and so could not
    # see that the check never fired on a real log).
    run = uuid4()
    decided = _event("BusyDecided", busy_decision_id(run), decision="rejected", run_id=None)
    reader = LogReader()
    assert reader.read(_Log(decided)) == []  # type: ignore[arg-type]
    started = _event("RunStarted", run, session_key="s", step="primary")
    problems = reader.read(_Log(decided, started))  # type: ignore[arg-type]
    assert [invariant for invariant, _ in problems] == ["busy-decided"]


def test_a_send_whose_delivery_is_not_its_recorded_decision_is_caught() -> None:
    idle, queued, refused = uuid4(), uuid4(), uuid4()
    reader = LogReader()
    log = _Log(
        _event("BusyDecided", busy_decision_id(queued), decision="enqueued", runs_ahead=2),
        _event("BusyDecided", busy_decision_id(refused), decision="rejected", runs_ahead=1),
    )
    reader.read(log)  # type: ignore[arg-type]
    started = {"status": "started", "mode": "announce"}
    assert reader.delivery_problem(str(idle), started) is None
    at_two = {"status": "queued", "position": 2, "mode": "announce"}
    assert reader.delivery_problem(str(queued), at_two) is None
    assert reader.delivery_problem(str(refused), {"status": "refused"}) is None
    # An answer the record does not back is a violation: guessed, not recorded.
    assert reader.delivery_problem(str(queued), started) is not None
    assert reader.delivery_problem(str(queued), {**at_two, "position": 1}) is not None
    assert reader.delivery_problem(str(idle), at_two) is not None
    assert reader.delivery_problem(str(refused), started) is not None


def test_an_interrupt_whose_run_did_not_end_cancelled_is_caught() -> None:
    cancelled, finished = uuid4(), uuid4()
    log = _Log(
        _event("RunStarted", cancelled, session_key="s", step="primary"),
        _event("RunStarted", finished, session_key="s", step="primary"),
        _event("RunCancelled", cancelled),
        _event("RunCompleted", finished),
    )
    reader = LogReader()
    reader.read(log)  # type: ignore[arg-type]
    good = _event(
        "BusyDecided", uuid4(), decision="interrupted", cancelled_run_ids=(str(cancelled),)
    )
    reader.read(_Log(*log.recorded, good))  # type: ignore[arg-type]
    assert reader.busy_problems() == []
    bad = _event("BusyDecided", uuid4(), decision="interrupted", cancelled_run_ids=(str(finished),))
    reader.read(_Log(*log.recorded, good, bad))  # type: ignore[arg-type]
    assert ["RunCompleted" in problem for problem in reader.busy_problems()] == [True]


def test_the_runs_a_cancelled_run_caused_are_found_through_ended_ones() -> None:
    root, middle, leaf, other = uuid4(), uuid4(), uuid4(), uuid4()
    reader = LogReader()
    reader.read(
        _Log(  # type: ignore[arg-type]
            _event("RunStarted", root, session_key="s", step="primary"),
            _event("RunStarted", middle, session_key="s", step="primary", parent_run_id=str(root)),
            _event("RunCompleted", middle),
            _event("RunStarted", leaf, session_key="s", step="primary", parent_run_id=str(middle)),
            _event("RunStarted", other, session_key="s", step="primary"),
        )
    )
    assert sorted(reader.descendants(root)) == sorted([middle, leaf])
    assert reader.descendants(other) == []
