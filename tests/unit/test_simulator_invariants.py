"""Every invariant the simulator reads off the log fires on a hand-made log that breaks it
(issue 28 item 2: no invariant that cannot fire), and stays quiet on the same log kept.

The logs are made by hand, event by event, as the log reader sees them: an event's
type name, its aggregate, version and time, and the fields the invariants read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid5

from sessionwire.adapters.testkit.simulator.invariants import (
    ANNOUNCE_NAMESPACE,
    INVARIANTS,
    Follower,
    LogReader,
    subscriber_problems,
)
from sessionwire.adapters.testkit.simulator.script import plan_text
from sessionwire.domain.busy_decision import busy_decision_id
from sessionwire.domain.causality import Provenance
from sessionwire.domain.transcript import TranscriptMessage

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SESSION = "agent:main:main"
OTHER = "agent:beta:main"


@dataclass
class Event:
    originator_id: UUID
    originator_version: int
    timestamp: datetime


def event(name: str, aggregate: UUID, version: int, seconds: float, **fields: Any) -> Any:
    """A hand-made event called ``name`` (what the log reader goes by)."""
    made: Any = type(name, (Event,), {})(aggregate, version, T0 + timedelta(seconds=seconds))
    for key, value in fields.items():
        setattr(made, key, value)
    return made


class Log:
    """A hand-made log fed to a LogReader; the problems it reported, by invariant."""

    def __init__(self, **limits: Any) -> None:
        self.reader = LogReader(**limits)
        self.problems: list[tuple[str, str]] = []
        self.versions: dict[UUID, int] = {}

    def add(self, name: str, aggregate: UUID, seconds: float = 0, **fields: Any) -> None:
        version = self.versions.get(aggregate, 0) + 1
        self.versions[aggregate] = version
        made = event(name, aggregate, version, seconds, **fields)
        self.problems += self.reader.take(self.reader.events + 1, made)

    def fired(self) -> set[str]:
        return {invariant for invariant, _ in self.problems}

    def start(
        self,
        run: UUID,
        *,
        seconds: float = 0,
        session: str = SESSION,
        step: str = "primary",
        plan: dict[str, Any] | None = None,
        timeout: float = 30,
        **fields: Any,
    ) -> None:
        message = plan_text(plan if plan is not None else {"id": 1, "kind": "ok"})
        fields = {
            "session_key": session,
            "step": step,
            "message": message,
            "context": None,
            "timeout_seconds": timeout,
            "turn": None,
            "exchange_id": None,
            "hops": 1,
            "parent_run_id": None,
            **fields,
        }
        self.add("RunStarted", run, seconds, **fields)

    def line(self, run: UUID, role: str, kind: str, seconds: float = 0) -> None:
        text = TranscriptMessage(role=role, content=[{"type": "text", "text": "x"}], timestamp=0)
        provenance = Provenance(kind=kind, run_id=str(run))  # type: ignore[arg-type]
        self.add("MessageAppended", session_uuid(), seconds, message=text, provenance=provenance)

    def dispatch_and_complete(self, run: UUID, at: float = 0, end: float = 0) -> None:
        self.add("RunDispatched", run, at, attempt=1)
        self.line(run, "user", "a2a", at)
        self.add("RunCompleted", run, end, reply="done")
        self.line(run, "assistant", "agent", end)


_SESSION_ID = UUID(int=999)


def session_uuid() -> UUID:
    return _SESSION_ID


def run_id(n: int) -> UUID:
    return UUID(int=n)


def test_every_invariant_has_a_test_here_or_in_the_simulator_tests() -> None:
    # The log's invariants are fed hand-made logs here; the others are planted bugs
    # the simulator tests (tests/integration/test_simulator*.py) see fire.
    assert set(INVARIANTS) >= {
        "liveness",
        "turn-limit",
        "transcript-lines",
        "report-route",
        "busy-decided",
        "hop-limit",
        "exactly-once",
        "runs-end",
        "subscribers",
    }


# runs-end -------------------------------------------------------------------------------


def test_a_run_that_ends_twice_breaks_runs_end() -> None:
    log = Log()
    log.start(run_id(1))
    log.dispatch_and_complete(run_id(1))
    assert log.fired() == set()
    log.add("RunFailed", run_id(1), 1, error="late")
    assert log.fired() == {"runs-end"}
    assert log.reader.runs_without_one_outcome() == [run_id(1)]


# exactly-once ---------------------------------------------------------------------------


def test_a_turn_recorded_twice_breaks_exactly_once() -> None:
    log = Log()
    exchange = run_id(50)
    log.add("PingPongTurn", exchange, turn=1)
    assert log.fired() == set()
    log.add("PingPongTurn", exchange, turn=1)
    assert log.fired() == {"exactly-once"}


def test_an_announce_or_report_recorded_twice_breaks_exactly_once() -> None:
    log = Log()
    log.add("AnnounceDelivered", run_id(50))
    log.add("SubagentAnnounced", run_id(60), channel=None, to=None)
    assert log.fired() == set()
    log.add("AnnounceDelivered", run_id(50))
    log.add("SubagentAnnounced", run_id(60), channel=None, to=None)
    assert [invariant for invariant, _ in log.problems] == ["exactly-once", "exactly-once"]


# turn-limit -----------------------------------------------------------------------------


def test_a_reply_back_turn_beyond_max_ping_pong_turns_breaks_turn_limit() -> None:
    log = Log(max_turns=1)
    exchange = str(run_id(50))
    log.start(run_id(1), step="reply_back", exchange_id=exchange, turn=1)
    log.add("PingPongTurn", run_id(50), turn=1)
    assert log.fired() == set()
    log.start(run_id(2), step="reply_back", exchange_id=exchange, turn=2)
    log.add("PingPongTurn", run_id(50), turn=2)
    assert [invariant for invariant, _ in log.problems] == ["turn-limit", "turn-limit"]


def test_no_reply_back_turn_at_all_when_max_ping_pong_turns_is_zero() -> None:
    log = Log(max_turns=0)
    log.start(run_id(1), step="reply_back", exchange_id=str(run_id(50)), turn=1)
    assert log.fired() == {"turn-limit"}


# transcript-lines ----------------------------------------------------------------------


def test_a_user_line_appended_again_at_a_second_dispatch_breaks_transcript_lines() -> None:
    log = Log()
    log.start(run_id(1))
    log.add("RunDispatched", run_id(1), attempt=1)
    log.line(run_id(1), "user", "a2a")
    # The gateway died; the run is dispatched again, and appends its message again.
    log.add("RunDispatched", run_id(1), 5, attempt=2)
    assert log.fired() == set()
    log.line(run_id(1), "user", "a2a", 5)
    assert log.fired() == {"transcript-lines"}


def test_a_reply_line_appended_twice_breaks_transcript_lines() -> None:
    log = Log()
    log.start(run_id(1))
    log.dispatch_and_complete(run_id(1))
    assert log.fired() == set()
    log.line(run_id(1), "assistant", "agent")
    assert log.fired() == {"transcript-lines"}


def test_a_dispatched_run_without_its_user_line_breaks_transcript_lines_at_idle() -> None:
    log = Log()
    log.start(run_id(1))
    log.add("RunDispatched", run_id(1), attempt=1)
    log.add("RunCompleted", run_id(1), reply="done")
    assert log.reader.line_problems() != []
    kept = Log()
    kept.start(run_id(1))
    kept.dispatch_and_complete(run_id(1))
    assert kept.reader.line_problems() == []


def test_a_run_never_dispatched_appends_no_line() -> None:
    log = Log()
    log.start(run_id(1))
    log.line(run_id(1), "user", "system")
    log.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    assert log.reader.line_problems() != []


def test_a_reply_line_of_a_run_that_did_not_complete_breaks_transcript_lines() -> None:
    log = Log()
    log.start(run_id(1))
    log.add("RunDispatched", run_id(1), attempt=1)
    log.line(run_id(1), "user", "a2a")
    log.line(run_id(1), "assistant", "agent")
    log.add("RunFailed", run_id(1), error="boom")
    assert log.reader.line_problems() != []


# report-route ---------------------------------------------------------------------------


def test_a_report_to_another_route_than_the_one_captured_breaks_report_route() -> None:
    log = Log()
    spawn = run_id(60)
    fields = {"child_key": "agent:main:subagent:x", "route_captured": True}
    log.add("SubagentSpawned", spawn, report_channel="whatsapp", report_to="+1555", **fields)
    log.add("SubagentAnnounced", spawn, channel="whatsapp", to="+1555")
    assert log.fired() == set()
    other = run_id(61)
    log.add("SubagentSpawned", other, report_channel="whatsapp", report_to="+1555", **fields)
    # The requester moved to telegram after the spawn; the report followed it.
    log.add("SubagentAnnounced", other, channel="telegram", to="@new")
    assert log.fired() == {"report-route"}
    assert log.reader.delivery_owner[str(uuid5(ANNOUNCE_NAMESPACE, str(other)))] == other


# busy-decided ---------------------------------------------------------------------------


def test_a_rejected_send_whose_run_starts_breaks_busy_decided_in_either_order() -> None:
    send = run_id(7)
    decision = busy_decision_id(send)
    for decided_first in (True, False):
        log = Log()
        log.start(run_id(1))
        if decided_first:
            log.add("BusyDecided", decision, decision="rejected", run_id=None)
        log.start(send)
        if not decided_first:
            log.add("BusyDecided", decision, decision="rejected", run_id=None)
        assert log.fired() == {"busy-decided"}, decided_first


def test_a_rejected_send_that_starts_nothing_keeps_busy_decided() -> None:
    log = Log()
    log.start(run_id(1))
    log.add("BusyDecided", busy_decision_id(run_id(7)), decision="rejected", run_id=None)
    log.start(run_id(8))
    assert log.fired() == set()


def test_an_interrupt_whose_run_is_not_cancelled_breaks_busy_decided() -> None:
    log = Log()
    log.start(run_id(1))
    log.add("BusyDecided", run_id(90), decision="interrupted", cancelled_run_ids=(str(run_id(1)),))
    log.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    assert log.reader.busy_problems() != []


# hop-limit ------------------------------------------------------------------------------


def test_a_run_one_send_past_max_hops_breaks_hop_limit_exactly() -> None:
    log = Log(max_hops=3)
    log.start(run_id(1), plan={"id": 1, "kind": "ok", "depth": 3}, hops=3)
    assert log.fired() == set()
    # One more than the limit, by the script's plan (the run's own count says less).
    log.start(run_id(2), plan={"id": 1, "kind": "ok", "depth": 4}, hops=3)
    assert log.fired() == {"hop-limit"}
    counted = Log(max_hops=3)
    counted.start(run_id(3), plan={"id": 1, "kind": "ok", "depth": 1}, hops=4)
    assert counted.fired() == {"hop-limit"}


# liveness -------------------------------------------------------------------------------


def test_a_run_whose_plan_answers_in_time_but_timed_out_breaks_liveness() -> None:
    log = Log()
    log.start(run_id(1), plan={"id": 1, "kind": "slow", "delay": 5}, timeout=30)
    log.add("RunDispatched", run_id(1), 1, attempt=1)
    log.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    assert log.reader.liveness_problems(lane=1, down=[]) != []
    # A plan that answers after its deadline may time out.
    late = Log()
    late.start(run_id(1), plan={"id": 1, "kind": "slow", "delay": 40}, timeout=30)
    late.add("RunDispatched", run_id(1), 1, attempt=1)
    late.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    assert late.reader.liveness_problems(lane=1, down=[]) == []


def test_a_run_never_dispatched_with_nothing_ahead_of_it_breaks_liveness() -> None:
    log = Log()
    log.start(run_id(1), plan={"id": 1, "kind": "ok"}, timeout=30)
    log.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    assert log.reader.liveness_problems(lane=4, down=[]) != []
    # A crash while it waited excuses it.
    down = [(T0 + timedelta(seconds=1), T0 + timedelta(seconds=40))]
    assert log.reader.liveness_problems(lane=4, down=down) == []


def test_a_run_queued_behind_a_hanging_run_of_its_session_may_time_out() -> None:
    log = Log()
    log.start(run_id(1), plan={"id": 1, "kind": "hang"}, timeout=30)
    log.add("RunDispatched", run_id(1), attempt=1)
    log.start(run_id(2), plan={"id": 2, "kind": "ok"}, timeout=30)
    log.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    log.add("RunTimedOut", run_id(2), 30, timeout_seconds=30)
    assert log.reader.liveness_problems(lane=4, down=[]) == []


def test_a_run_queued_behind_a_full_lane_may_time_out() -> None:
    log = Log()
    log.start(run_id(1), session=OTHER, plan={"id": 1, "kind": "hang"}, timeout=30)
    log.add("RunDispatched", run_id(1), attempt=1)
    log.start(run_id(2), plan={"id": 2, "kind": "ok"}, timeout=30)
    log.add("RunTimedOut", run_id(1), 30, timeout_seconds=30)
    log.add("RunTimedOut", run_id(2), 30, timeout_seconds=30)
    assert log.reader.liveness_problems(lane=1, down=[]) == []
    assert log.reader.liveness_problems(lane=2, down=[]) != []


def test_a_cancelled_run_is_not_held_to_its_plan() -> None:
    log = Log()
    log.start(run_id(1), plan={"id": 1, "kind": "ok"})
    log.add("RunCancelled", run_id(1), reason="")
    assert log.reader.liveness_problems(lane=1, down=[]) == []


# subscribers ----------------------------------------------------------------------------


def test_a_subscriber_that_misses_or_repeats_an_event_breaks_subscribers() -> None:
    log = [(1, "RunStarted"), (2, "RunDispatched"), (3, "RunCompleted")]
    kept = Follower(1)
    kept.seen = [(2, "RunDispatched"), (3, "RunCompleted")]
    assert subscriber_problems(kept, log, 3, complete=True) == []
    repeated = Follower(1)
    repeated.seen = [(2, "RunDispatched"), (2, "RunDispatched")]
    assert subscriber_problems(repeated, log, 3, complete=True) != []
    missed = Follower(0)
    missed.seen = [(1, "RunStarted")]
    assert subscriber_problems(missed, log, 3, complete=True) != []


def test_a_run_whose_session_closed_before_it_could_run_is_not_held_to_its_plan() -> None:
    log = Log()
    session = run_id(80)
    log.add("SessionOpened", session, key=SESSION)
    log.start(run_id(1), step="announce", plan={"id": 1, "kind": "ok"})
    log.add("SessionArchived", session, 10)
    log.add("RunFailed", run_id(1), 10, error=f"session {SESSION} is archived")
    assert log.reader.liveness_problems(lane=4, down=[]) == []
    still_open = Log()
    still_open.start(run_id(1), step="announce", plan={"id": 1, "kind": "ok"})
    still_open.add("RunFailed", run_id(1), 10, error="no reason")
    assert still_open.reader.liveness_problems(lane=4, down=[]) != []


def test_a_run_a_cancelled_run_caused_that_runs_on_to_its_end_breaks_cancel_outcome() -> None:
    log = Log()
    log.start(run_id(1))
    log.add("RunDispatched", run_id(1), attempt=1)
    log.start(run_id(2), parent_run_id=str(run_id(1)), plan={"id": 2, "kind": "slow"})
    log.add("RunDispatched", run_id(2), attempt=1)
    log.add("RunCancelled", run_id(1), 1, reason="stop")
    # The gateway died before the cascade; the child ran on to its end a minute later.
    log.add("RunCompleted", run_id(2), 60, reply="done")
    assert log.reader.cascade_problems() != []
    cascaded = Log()
    cascaded.start(run_id(1))
    cascaded.start(run_id(2), parent_run_id=str(run_id(1)))
    cascaded.add("RunCancelled", run_id(1), 1, reason="stop")
    cascaded.add("RunCancelled", run_id(2), 1, reason="caused by cancelled run")
    assert cascaded.reader.cascade_problems() == []


def test_a_dispatch_at_the_deadline_breaks_deadlines() -> None:
    log = Log()
    log.start(run_id(1), timeout=30)
    log.add("RunDispatched", run_id(1), 29.999, attempt=1)
    assert log.fired() == set()
    late = Log()
    late.start(run_id(1), timeout=30)
    late.add("RunDispatched", run_id(1), 30, attempt=1)
    assert late.fired() == {"deadlines"}


def test_a_decision_that_names_the_wrong_run_breaks_busy_decided() -> None:
    send = run_id(7)
    kept = Log()
    kept.add("BusyDecided", busy_decision_id(send), decision="enqueued", run_id=str(send))
    kept.add("BusyDecided", busy_decision_id(run_id(8)), decision="rejected", run_id=None)
    assert kept.fired() == set()
    for decision, named in (
        ("enqueued", None),
        ("interrupted", str(run_id(9))),
        ("rejected", str(send)),
    ):
        log = Log()
        log.add("BusyDecided", busy_decision_id(send), decision=decision, run_id=named)
        assert log.fired() == {"busy-decided"}, decision


# steers: a send answered 'steered' (busy policy steer) ------------------------------------


def steered_send(log: Log, send: UUID, joined: UUID, seconds: float = 0) -> None:
    """What a steered send records, in its one transaction: the run's RunSteered, the
    steer's line in the session (the joined run's provenance), then the decision."""
    log.add("RunSteered", joined, seconds, message="m", steered_by=OTHER)
    log.line(joined, "user", "a2a", seconds)
    log.add(
        "BusyDecided",
        busy_decision_id(send),
        seconds,
        decision="steered",
        run_id=None,
        steered_run_id=str(joined),
    )


def test_a_send_steered_into_a_running_run_keeps_every_invariant() -> None:
    log = Log()
    joined, send = run_id(1), run_id(7)
    log.start(joined)
    log.add("RunDispatched", joined, 0, attempt=1)
    log.line(joined, "user", "a2a")
    steered_send(log, send, joined, 1)
    log.add("RunCompleted", joined, 2, reply="done")
    log.line(joined, "assistant", "agent", 2)
    assert log.fired() == set()
    assert log.reader.steer_problems == []
    assert log.reader.line_problems() == []
    delivery = {"status": "steered", "runId": str(joined)}
    assert log.reader.delivery_problem(str(joined), delivery) is None


def test_a_send_steered_into_an_ended_run_breaks_steers() -> None:
    log = Log()
    joined, send = run_id(1), run_id(7)
    log.start(joined)
    log.dispatch_and_complete(joined)
    # What the domain refuses (a steer into an ended run), written into the log.
    steered_send(log, send, joined, 5)
    # Both the steer after the outcome and the send that joined an ended run.
    steer, send_problem = log.reader.steer_problems
    assert "after its outcome RunCompleted" in steer
    assert f"steered a send into run {joined}, which had ended (RunCompleted" in send_problem


def test_a_steered_decision_without_its_runs_steer_breaks_steers() -> None:
    log = Log()
    joined = run_id(1)
    log.start(joined)
    log.add(
        "BusyDecided",
        busy_decision_id(run_id(7)),
        decision="steered",
        run_id=None,
        steered_run_id=str(joined),
    )
    (problem,) = log.reader.steer_problems
    assert "has no RunSteered recorded for it" in problem


def test_a_steered_send_whose_run_starts_or_that_names_a_run_breaks_busy_decided() -> None:
    joined, send = run_id(1), run_id(7)
    started = Log()
    started.start(joined)
    steered_send(started, send, joined)
    started.start(send)
    assert started.fired() == {"busy-decided"}
    naming = Log()
    naming.start(joined)
    naming.add("RunSteered", joined, message="m", steered_by=OTHER)
    naming.add(
        "BusyDecided",
        busy_decision_id(send),
        decision="steered",
        run_id=str(send),
        steered_run_id=str(joined),
    )
    assert naming.fired() == {"busy-decided"}


def test_a_steered_answer_no_decision_recorded_breaks_send_delivery() -> None:
    log = Log()
    joined, other = run_id(1), run_id(2)
    log.start(joined)
    log.start(other)
    steered_send(log, run_id(7), joined)
    # Answered 'steered' into a run no decision names, or under another run's id.
    assert log.reader.delivery_problem(str(other), {"status": "steered", "runId": str(other)})
    assert log.reader.delivery_problem(str(other), {"status": "steered", "runId": str(joined)})
    # And a send whose decision says 'steered' answered otherwise.
    log.add("BusyDecided", busy_decision_id(run_id(8)), decision="enqueued", run_id=str(run_id(8)))
    assert log.reader.delivery_problem(str(run_id(8)), {"status": "steered"}) is not None


def test_a_second_user_line_of_a_run_not_steered_still_breaks_transcript_lines() -> None:
    log = Log()
    joined = run_id(1)
    log.start(joined)
    log.add("RunDispatched", joined, 0, attempt=1)
    log.line(joined, "user", "a2a")
    log.line(joined, "user", "a2a")  # no RunSteered owes it
    assert log.fired() == {"transcript-lines"}
