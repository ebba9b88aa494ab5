"""The yield driven event by event (domain/run_yield.py), with no store and no clock:
when it wakes (all, any, timeout), that it wakes once, and what the woken turn is told.
Each example checks that replaying the recorded events gives the same state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from event_replay import event_names, replayed
from sessionwire.domain.causality import Causality
from sessionwire.domain.run_yield import (
    AwaitChildren,
    ChildPending,
    ChildReport,
    RunYield,
    YieldAlreadyWoken,
    YieldChild,
    child_report,
    wake_message,
    wake_run_id_for,
    yield_id_for,
)
from sessionwire.domain.session import to_millis

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
RUN = "00000000-0000-0000-0000-000000000007"
A = YieldChild(spawn_id="a", child_key="agent:main:subagent:a", run_id="ra", label="alpha")
B = YieldChild(spawn_id="b", child_key="agent:main:subagent:b", run_id="rb")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ms(seconds: float) -> int:
    return to_millis(at(seconds))


def recorded(
    wait_for: str = "all", due: float | None = 600, message: str | None = None
) -> RunYield:
    return RunYield.record(
        yield_id=yield_id_for(RUN),
        session_key="agent:main:main",
        agent_id="main",
        run_id=RUN,
        wait_for=wait_for,  # type: ignore[arg-type]
        due_at=None if due is None else ms(due),
        message=message,
        children=[A, B],
        causality=Causality(trace_id="trace-1", parent_run_id=None, hops=2),
        at=T0,
    )


@pytest.mark.parametrize(
    ("wait_for", "finished", "now", "reason"),
    [
        ("all", set(), 10, None),
        ("all", {"a"}, 10, None),
        ("all", {"a", "b"}, 10, "all"),
        ("any", set(), 10, None),
        ("any", {"b"}, 10, "any"),
        ("any", {"a", "b"}, 10, "any"),
        ("all", {"a"}, 600, "timeout"),
        ("any", set(), 600, "timeout"),
        # Every report in: "all" even when the deadline has passed too.
        ("all", {"a", "b"}, 900, "all"),
        ("all", {"a", "c"}, 10, None),  # a spawn that is not a child counts for nothing
    ],
)
def test_wake_reason(wait_for: str, finished: set[str], now: float, reason: str | None) -> None:
    assert recorded(wait_for).wake_reason(finished, ms(now)) == reason


def test_no_deadline_waits_for_the_children_only() -> None:
    yielded = recorded(due=None)
    assert yielded.wake_reason(set(), ms(10**9)) is None
    assert yielded.next_step() == AwaitChildren(due_ms=None)


def test_waits_until_woken_then_wakes_never_again() -> None:
    yielded = recorded(message="sum up")
    assert yielded.next_step() == AwaitChildren(due_ms=ms(600))
    report = ChildReport(
        spawn_id="a",
        child_key=A.child_key,
        label="alpha",
        status="ok",
        report=child_report("ok", "Result: 3 sheep\nNotes: none", None),
    )
    pending = ChildPending(spawn_id="b", child_key=B.child_key, status="running")
    wake_id = yielded.wake(reason="any", reports=[report], still_running=[pending], at=at(5))
    assert wake_id == wake_run_id_for(yield_id_for(RUN))
    assert yielded.next_step() is None
    assert yielded.wake_reason({"a", "b"}, ms(5)) is None
    with pytest.raises(YieldAlreadyWoken):
        yielded.wake(reason="all", reports=[], still_running=[], at=at(6))
    events = yielded.collect_events()
    assert event_names(events) == ["RunYielded", "YieldWoken"]
    assert replayed(events, RunYield).state == yielded.state


def test_the_woken_turn_answers_the_yielding_run_on_its_hop() -> None:
    chain = recorded().wake_causality()
    assert chain == Causality(trace_id="trace-1", parent_run_id=RUN, hops=2)


def test_a_yield_with_no_child_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one child"):
        RunYield.record(
            yield_id=UUID(int=1),
            session_key="agent:main:main",
            agent_id="main",
            run_id=None,
            wait_for="all",
            due_at=None,
            message=None,
            children=[],
            causality=None,
            at=T0,
        )


def test_wake_message_names_reason_reports_note_and_the_rest() -> None:
    yielded = recorded(message="sum up")
    yielded.wake(
        reason="timeout",
        reports=[
            ChildReport(
                spawn_id="a",
                child_key=A.child_key,
                label="alpha",
                status="error",
                report=child_report("error", None, "tool crashed"),
            )
        ],
        still_running=[
            ChildPending(spawn_id="b", child_key=B.child_key, status="reporting", outcome="timeout")
        ],
        at=at(600),
    )
    text = wake_message(yielded.state)
    assert text.startswith("[sessions_yield] You were woken: the wait timed out")
    assert "Your note when you yielded:\nsum up" in text
    assert f"Sub-agent {A.child_key} (alpha) finished:\nStatus: error" in text
    assert "- Error: tool crashed" in text
    assert f"- {B.child_key}: reporting (its run ended: timeout)" in text
