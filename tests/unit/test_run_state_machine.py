"""The Run aggregate driven event by event (domain/run.py), with no store and no clock.

queued --dispatch--> running --complete | fail | time_out--> ok | error | timeout, and a
run ends exactly once: any command after its outcome raises RunAlreadyEnded and records
nothing. Each example checks that replaying the recorded events gives the same state.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from event_replay import event_names, replayed
from sessionwire.domain.run import Run, RunAlreadyEnded, RunOverdue
from sessionwire.domain.session import to_millis
from sessionwire.domain.transcript import Usage

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
RUN_ID = UUID(int=7)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def new_run(timeout_seconds: float = 30) -> Run:
    return Run.start(
        run_id=RUN_ID,
        session_key="agent:main:main",
        agent_id="main",
        step="primary",
        message="ping",
        timeout_seconds=timeout_seconds,
        at=T0,
        requester_key="agent:main:discord:group:dev",
        context="from dev",
    )


def recorded(run: Run, *earlier: object) -> list[object]:
    """Every event the run recorded so far (earlier collected ones first)."""
    return [*earlier, *run.collect_events()]


def assert_replays(run: Run, events: list[object]) -> None:
    assert replayed(events, Run).state == run.state


def test_a_started_run_is_queued_with_its_request() -> None:
    run = new_run()
    events = recorded(run)
    assert event_names(events) == ["RunStarted"]
    assert run.id == RUN_ID
    state = run.state
    assert (state.status, state.attempts, state.started_at, state.ended_at) == (
        "queued",
        0,
        None,
        None,
    )
    assert (state.session_key, state.agent_id, state.step, state.message) == (
        "agent:main:main",
        "main",
        "primary",
        "ping",
    )
    assert (state.requester_key, state.context, state.timeout_seconds) == (
        "agent:main:discord:group:dev",
        "from dev",
        30,
    )
    assert not state.ended
    assert_replays(run, events)


def test_dispatch_makes_it_running_from_that_moment() -> None:
    run = new_run()
    run.dispatch(at=at(1))
    events = recorded(run)
    assert event_names(events) == ["RunStarted", "RunDispatched"]
    assert (run.state.status, run.state.attempts) == ("running", 1)
    assert run.state.started_at == to_millis(at(1))
    assert_replays(run, events)


def test_a_second_dispatch_after_a_crash_is_attempt_two_and_restarts_the_clock() -> None:
    run = new_run()
    run.dispatch(at=at(1))
    run.dispatch(at=at(5))
    events = recorded(run)
    assert event_names(events) == ["RunStarted", "RunDispatched", "RunDispatched"]
    assert [event.attempt for event in events[1:]] == [1, 2]  # type: ignore[attr-defined]
    assert (run.state.status, run.state.attempts) == ("running", 2)
    assert run.state.started_at == to_millis(at(5))
    assert_replays(run, events)


def test_completing_keeps_the_reply_usage_and_model() -> None:
    run = new_run()
    run.dispatch(at=at(1))
    usage = Usage(input=10, output=4, totalTokens=14)
    run.complete(reply="pong", usage=usage, model="gpt-x", at=at(3))
    events = recorded(run)
    assert event_names(events)[-1] == "RunCompleted"
    state = run.state
    assert (state.status, state.reply, state.usage, state.model) == ("ok", "pong", usage, "gpt-x")
    assert (state.started_at, state.ended_at) == (to_millis(at(1)), to_millis(at(3)))
    assert state.ended
    assert_replays(run, events)


def test_a_completed_run_may_have_no_reply() -> None:
    run = new_run()
    run.dispatch(at=at(1))
    run.complete(reply=None, usage=None, model=None, at=at(2))
    assert (run.state.status, run.state.reply, run.state.error) == ("ok", None, None)


def test_failing_keeps_the_error() -> None:
    run = new_run()
    run.dispatch(at=at(1))
    run.fail(error="RuntimeError: model down", at=at(2))
    events = recorded(run)
    assert event_names(events)[-1] == "RunFailed"
    assert (run.state.status, run.state.error) == ("error", "RuntimeError: model down")
    assert run.state.ended_at == to_millis(at(2))
    assert run.state.reply is None
    assert_replays(run, events)


@pytest.mark.parametrize(
    ("timeout_seconds", "error"),
    [(30, "run timed out after 30s"), (0.5, "run timed out after 0.5s")],
)
def test_timing_out_says_after_how_long(timeout_seconds: float, error: str) -> None:
    run = new_run(timeout_seconds)
    # Dispatched at once: the deadline counts from acceptance (decision 16).
    run.dispatch(at=at(0))
    run.time_out(at=at(timeout_seconds))
    events = recorded(run)
    assert event_names(events)[-1] == "RunTimedOut"
    assert (run.state.status, run.state.error) == ("timeout", error)
    assert run.state.ended_at == to_millis(at(timeout_seconds))
    assert_replays(run, events)


def test_a_run_past_its_deadline_is_never_dispatched_only_timed_out() -> None:
    # Decision 16: the deadline is recorded at start; however late the gateway comes back,
    # the run is not handed to an agent.
    run = new_run(30)
    assert run.state.deadline_at == to_millis(at(30))
    assert not run.overdue(at(29))
    with pytest.raises(RunOverdue):
        run.dispatch(at=at(30))
    started = recorded(run)
    assert event_names(started) == ["RunStarted"]
    run.time_out(at=at(30 * 86_400))
    events = recorded(run, *started)
    assert event_names(events) == ["RunStarted", "RunTimedOut"]
    assert run.state.status == "timeout"
    assert_replays(run, events)


def test_a_queued_run_can_fail_without_being_dispatched() -> None:
    # The gateway records a run it cannot execute (no runtime, a crash it gave up on).
    run = new_run()
    run.fail(error="no agent runtime", at=at(1))
    events = recorded(run)
    assert event_names(events) == ["RunStarted", "RunFailed"]
    assert (run.state.status, run.state.attempts, run.state.started_at) == ("error", 0, None)
    assert_replays(run, events)


def _ok(run: Run) -> None:
    run.complete(reply="late", usage=None, model=None, at=at(9))


def _fail(run: Run) -> None:
    run.fail(error="late", at=at(9))


def _time_out(run: Run) -> None:
    run.time_out(at=at(9))


def _dispatch(run: Run) -> None:
    run.dispatch(at=at(9))


@pytest.mark.parametrize("late", [_ok, _fail, _time_out, _dispatch], ids=lambda f: f.__name__)
@pytest.mark.parametrize("first", [_ok, _fail, _time_out], ids=lambda f: f.__name__)
def test_a_run_ends_once_whatever_comes_late(first: object, late: object) -> None:
    """A timeout after completion, a second completion, a dispatch after the end: refused."""
    run = new_run()
    run.dispatch(at=at(1))
    first(run)  # type: ignore[operator]
    events = recorded(run)
    ended = run.state
    with pytest.raises(RunAlreadyEnded, match=rf"run {RUN_ID} already ended \({ended.status}\)"):
        late(run)  # type: ignore[operator]
    assert run.collect_events() == []
    assert run.state == ended
    assert_replays(run, events)


# Cancellation (ADR 0017) -----------------------------------------------------------------


@pytest.mark.parametrize("dispatched", [False, True])
def test_a_queued_or_running_run_is_cancelled_with_its_reason(dispatched: bool) -> None:
    run = new_run()
    if dispatched:
        run.dispatch(at=at(1))
    run.cancel(reason="user pressed stop", at=at(2))
    events = recorded(run)
    assert event_names(events)[-1] == "RunCancelled"
    state = run.state
    assert state.status == "cancelled"
    assert state.ended
    assert state.error == "run cancelled: user pressed stop"
    assert state.ended_at == to_millis(at(2))
    assert_replays(run, events)


def test_a_cancel_without_a_reason_says_cancelled() -> None:
    run = new_run()
    run.cancel(reason="", at=at(1))
    assert run.state.error == "run cancelled"


@pytest.mark.parametrize("end", ["complete", "fail", "time_out", "cancel"])
def test_a_run_that_ended_refuses_a_cancel_and_records_nothing(end: str) -> None:
    run = new_run()
    run.dispatch(at=at(1))
    if end == "complete":
        run.complete(reply="done", usage=None, model=None, at=at(2))
    elif end == "fail":
        run.fail(error="boom", at=at(2))
    elif end == "time_out":
        run.time_out(at=at(2))
    else:
        run.cancel(reason="first", at=at(2))
    before = run.state
    earlier = recorded(run)
    with pytest.raises(RunAlreadyEnded):
        run.cancel(reason="too late", at=at(3))
    assert run.state == before
    assert recorded(run) == []
    assert_replays(run, earlier)


def test_a_cancelled_run_refuses_its_own_late_outcome() -> None:
    # The race the other way round: the runtime's reply arrives after the cancel.
    run = new_run()
    run.dispatch(at=at(1))
    run.cancel(reason="stop", at=at(2))
    run.collect_events()
    for late in (
        lambda: run.complete(reply="late", usage=None, model=None, at=at(3)),
        lambda: run.fail(error="late", at=at(3)),
        lambda: run.time_out(at=at(3)),
        lambda: run.dispatch(at=at(3)),
    ):
        with pytest.raises(RunAlreadyEnded):
            late()
    assert run.state.status == "cancelled"
    assert recorded(run) == []
