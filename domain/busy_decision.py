"""What a ``sessions_send`` into a busy session did, kept as a record (ADR 0022).

A session is busy while one of its runs is in flight (queued or running). A send into it
is then queued behind that run, refused, let in by cancelling it, or injected into it (a
steer: the send starts no run of its own), as the busy policy says
(``session.agentToAgent.busy``, overridable per session). Each such decision is its own
short stream, like a refusal: recording it never contends with the session it names, and
a refused send, which starts no run, still leaves its trace.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality
from sessionwire.domain.policy import BusyAction, BusyChoice

BusyOutcome = Literal["enqueued", "rejected", "interrupted", "steered"]
OUTCOMES: dict[BusyAction, BusyOutcome] = {
    "enqueue": "enqueued",
    "reject": "rejected",
    "interrupt": "interrupted",
    "steer": "steered",
}

BUSY_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/busy-decisions")


def busy_decision_id(run_id: UUID) -> UUID:
    """One decision per send: a turn dispatched again after a crash that repeats the send
    (the same run id) finds the decision already recorded."""
    return uuid5(BUSY_NAMESPACE, str(run_id))


class BusyDecisionState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    session_key: str
    requester_key: str
    policy: BusyAction
    rule: str
    decision: BusyOutcome
    in_flight_run_id: str
    run_id: str | None
    """The run the send started; None when it was rejected or steered (it started
    nothing)."""
    cancelled_run_ids: tuple[str, ...] = ()
    trace_id: str | None = None
    parent_run_id: str | None = None
    hops: int | None = None
    runs_ahead: int | None = None
    """Runs of the session still in flight ahead of the send once it was decided (those
    it cancelled not counted); None on decisions recorded before it was."""
    steered_run_id: str | None = None
    """The run a ``steered`` send was injected into (its RunSteered is saved with this
    decision, in one transaction); None for every other outcome."""


class BusyDecision(Aggregate):
    state: BusyDecisionState

    class BusyDecided(Aggregate.Created):
        session_key: str
        requester_key: str
        policy: BusyAction
        rule: str
        decision: BusyOutcome
        in_flight_run_id: str
        run_id: str | None = None
        cancelled_run_ids: tuple[str, ...] = ()
        # The chain of the send (the new run's, or the one it would have had).
        trace_id: str | None = None
        parent_run_id: str | None = None
        hops: int | None = None
        runs_ahead: int | None = None
        steered_run_id: str | None = None

    def __init__(
        self,
        session_key: str,
        requester_key: str,
        policy: BusyAction,
        rule: str,
        decision: BusyOutcome,
        in_flight_run_id: str,
        run_id: str | None = None,
        cancelled_run_ids: tuple[str, ...] = (),
        trace_id: str | None = None,
        parent_run_id: str | None = None,
        hops: int | None = None,
        runs_ahead: int | None = None,
        steered_run_id: str | None = None,
    ) -> None:
        self.state = BusyDecisionState(
            session_key=session_key,
            requester_key=requester_key,
            policy=policy,
            rule=rule,
            decision=decision,
            in_flight_run_id=in_flight_run_id,
            run_id=run_id,
            cancelled_run_ids=cancelled_run_ids,
            trace_id=trace_id,
            parent_run_id=parent_run_id,
            hops=hops,
            runs_ahead=runs_ahead,
            steered_run_id=steered_run_id,
        )

    @classmethod
    def record(
        cls,
        *,
        send_run_id: UUID,
        session_key: str,
        requester_key: str,
        choice: BusyChoice,
        in_flight_run_id: str,
        chain: Causality,
        at: datetime,
        decision: BusyOutcome | None = None,
        cancelled_run_ids: tuple[str, ...] = (),
        runs_ahead: int | None = None,
        steered_run_id: str | None = None,
    ) -> BusyDecision:
        """The decision on the send whose run id is ``send_run_id`` (a rejected or steered
        send's run is never started, so the decision names no run then). ``decision`` is
        the policy's own outcome unless given: an interrupt with nothing it may cancel is
        enqueued, and so is a steer with no run it may join."""
        decision = decision or OUTCOMES[choice.action]
        if (decision == "steered") != (steered_run_id is not None):
            raise ValueError("a steered decision names the run it joined, and only it does")
        return cls._create(
            cls.BusyDecided,
            id=busy_decision_id(send_run_id),
            timestamp=at,
            session_key=session_key,
            requester_key=requester_key,
            policy=choice.action,
            rule=choice.rule,
            decision=decision,
            in_flight_run_id=in_flight_run_id,
            run_id=None if decision in ("rejected", "steered") else str(send_run_id),
            cancelled_run_ids=cancelled_run_ids,
            trace_id=chain.trace_id,
            parent_run_id=chain.parent_run_id,
            hops=chain.hops,
            runs_ahead=runs_ahead,
            steered_run_id=steered_run_id,
        )
