"""The Run aggregate waiting for input (decision 33), event by event, no store, no clock.

running --request_input--> input_required --provide_input--> queued --dispatch-->
running: the answer is the next turn's message, that turn's first dispatch is told apart
from one after a crash, a second answer (or one not among the options) raises and records
nothing, a waiting run is never dispatched, and usage adds up over the turns. Replaying
the recorded events gives the same state; the new fields are written only when set.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from event_replay import event_names, replayed
from sessionwire.domain.run import (
    AnswerNotAnOption,
    InputRequest,
    Run,
    RunNotWaiting,
    RunState,
)
from sessionwire.domain.transcript import Usage

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ASK = InputRequest(prompt="Deploy?", options=["yes", "no"])


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def asking() -> Run:
    run = Run.start(
        run_id=UUID(int=9),
        session_key="agent:main:ops",
        agent_id="main",
        step="primary",
        message="deploy",
        timeout_seconds=60,
        at=T0,
    )
    run.dispatch(at=at(1))
    run.request_input(request=ASK, usage=Usage(input=10, output=2), model="m-1", at=at(2))
    return run


def test_a_run_that_asks_waits_and_its_answer_is_the_next_turns_message() -> None:
    run = asking()
    assert run.state.status == "input_required"
    assert run.state.input_request == ASK
    assert not run.state.ended
    with pytest.raises(RunNotWaiting):
        run.dispatch(at=at(3))
    run.provide_input(text="yes", by="agent:main:main", at=at(4))
    assert (run.state.status, run.state.message, run.state.input_request) == (
        "queued",
        "yes",
        None,
    )
    run.dispatch(at=at(5))
    assert run.state.first_dispatch_of_turn
    run.dispatch(at=at(6))  # again, after a crash: not the turn's first
    assert not run.state.first_dispatch_of_turn
    run.complete(reply="done", usage=Usage(input=5, output=1), model=None, at=at(7))
    assert run.state.usage == Usage(input=15, output=3)
    assert run.state.model == "m-1"
    events = run.collect_events()
    assert event_names(events) == [
        "RunStarted",
        "RunDispatched",
        "RunInputRequested",
        "RunInputProvided",
        "RunDispatched",
        "RunDispatched",
        "RunCompleted",
    ]
    assert replayed(events, Run).state == run.state


def test_refused_answers_record_nothing() -> None:
    run = asking()
    before = event_names(run.collect_events())
    with pytest.raises(AnswerNotAnOption, match="'yes', 'no'"):
        run.provide_input(text="maybe", by=None, at=at(3))
    run.provide_input(text="no", by=None, at=at(3))
    with pytest.raises(RunNotWaiting, match="it is queued"):
        run.provide_input(text="yes", by=None, at=at(4))
    assert before[-1] == "RunInputRequested"
    assert event_names(run.collect_events()) == ["RunInputProvided"]


def test_a_waiting_run_times_out_and_is_cancelled_like_any() -> None:
    run = asking()
    run.time_out(at=at(61))
    assert run.state.status == "timeout"
    with pytest.raises(RunNotWaiting):
        run.provide_input(text="yes", by=None, at=at(62))
    cancelled = asking()
    cancelled.cancel(reason="not needed", at=at(3))
    assert cancelled.state.status == "cancelled"


def test_the_new_fields_are_written_only_when_set() -> None:
    plain = RunState(
        run_id="r",
        session_key="k",
        agent_id="main",
        step="primary",
        message="m",
        timeout_seconds=1,
    )
    written = plain.model_dump_json()
    for name in ("input_request", "answers", "answered_by", "turn_dispatches"):
        assert name not in written
    assert "input_request" in asking().state.model_dump_json()


def test_an_answer_past_the_deadline_is_refused_before_the_timeout_is_recorded() -> None:
    # The timeout's save may fail and be made again later (the simulator found the
    # answer in between accepted): the deadline alone refuses it.
    run = asking()
    before = event_names(run.collect_events())
    with pytest.raises(RunNotWaiting, match="deadline has passed"):
        run.provide_input(text="yes", by=None, at=at(60))
    assert run.state.status == "input_required"
    assert before[-1] == "RunInputRequested"
    assert run.collect_events() == []
