"""The run aggregate: one agent turn in one session, from request to outcome.

A run is started (accepted, queued in its session), dispatched to the agent runtime
(possibly again after a crash), and ends exactly once: completed, failed, timed out or
cancelled. A turn may instead stop to ask a person (decision 33): the run then waits,
``input_required``, holding nothing but its deadline, until an answer queues its next
turn.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal, get_args
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality, Provenance, ProvenanceKind
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.session import to_millis
from sessionwire.domain.transcript import Usage

RunStep = Literal[
    "primary",
    "reply_back",
    "announce",
    "subagent_task",
    "subagent_announce",
    "yield_wake",
    "scheduled",
]
RUN_STEPS: tuple[RunStep, ...] = get_args(RunStep)
RunStatus = Literal["queued", "running", "input_required", "ok", "error", "timeout", "cancelled"]
# Steps whose message is the gateway's prompt, not another agent's words.
PROMPT_STEPS: frozenset[str] = frozenset({"announce", "subagent_announce"})
# Steps whose message the gateway writes but whose reply is the agent's own (a woken
# turn after sessions_yield: its message carries the children's reports).
# A schedule's turn (decision 36) too: the gateway sends the schedule's message.
GATEWAY_MESSAGE_STEPS: frozenset[str] = PROMPT_STEPS | {"yield_wake", "scheduled"}
ENDED: frozenset[str] = frozenset({"ok", "error", "timeout", "cancelled"})


class RunAlreadyEnded(SessionwireError):
    """A run reached its outcome already; it never ends twice."""


class RunOverdue(SessionwireError):
    """A run past its deadline is never dispatched; it is timed out instead."""


class RunNotWaiting(SessionwireError):
    """Input for a run that is not waiting for any (never asked, answered already, or
    ended): refused, nothing recorded."""


class AnswerNotAnOption(SessionwireError):
    """An answer that is not one of the options the run asked with."""


MAX_INPUT_OPTIONS = 50
MAX_OPTION_CHARS = 200
MAX_PROMPT_CHARS = 4000


class InputRequest(BaseModel):
    """What a turn asks a person (decision 33): a prompt, and the answers it takes when
    it names them (None: any text)."""

    model_config = ConfigDict(frozen=True)

    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    options: list[str] | None = Field(default=None, min_length=1, max_length=MAX_INPUT_OPTIONS)

    def refusal(self, answer: str) -> str | None:
        """Why ``answer`` is not taken (None: it is)."""
        if self.options is not None and answer not in self.options:
            listed = ", ".join(repr(option) for option in self.options)
            return f"the answer must be one of the options the run asked with: {listed}"
        return None

    def to_json(self) -> dict[str, object]:
        """``{"prompt", "options"}`` as ``gw.run`` shows it (options null for free text)."""
        return {"prompt": self.prompt, "options": self.options}


class RunState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    session_key: str
    agent_id: str
    step: RunStep
    requester_key: str | None = None
    message: str
    context: str | None = None
    timeout_seconds: float
    deadline_at: int | None = None
    """When the run must have ended (ms since the epoch): recorded when it starts, so a
    gateway reopened after it never dispatches the run (decision 16)."""
    exchange_id: str | None = None
    turn: int | None = None
    trace_id: str | None = None
    parent_run_id: str | None = None
    hops: int = 0
    sender_key: str | None = None
    remote_caller: str | None = None
    """Who asked over a remote protocol (A2A, ADR 0035): the caller's token scope
    (``operator`` or its bound session), when the run is a remote agent's task."""
    status: RunStatus = "queued"
    attempts: int = 0
    started_at: int | None = None
    ended_at: int | None = None
    reply: str | None = None
    error: str | None = None
    usage: Usage | None = None
    model: str | None = None
    steers: int = 0
    """Messages steered into the run while it was queued or running (``subagents``)."""
    # Fields added after storage v2 are written only when set: a work row stored before
    # them still equals a rebuild (``audit rebuild --check``), and means the same state.
    steers_sent: int = Field(default=0, exclude_if=lambda sent: sent == 0)
    """Steers the run sent into other runs in flight: counted in its trace (maxSteers)."""
    steer_hops: int = Field(default=0, exclude_if=lambda hops: hops == 0)
    """The deepest hop of a steer the run took in: it goes on at the deeper of that and
    ``hops`` (its hop when it started, which the runs read model keeps)."""
    input_request: InputRequest | None = Field(default=None, exclude_if=lambda asked: asked is None)
    """What the run waits for while ``input_required`` (decision 33); None otherwise."""
    answers: int = Field(default=0, exclude_if=lambda answers: answers == 0)
    """Answers the run took: each queued one more turn, whose message is the answer."""
    answered_by: str | None = Field(default=None, exclude_if=lambda by: by is None)
    """Who gave the last answer (a session key; None: an operator, or no answer yet)."""
    turn_dispatches: int = Field(default=0, exclude_if=lambda base: base == 0)
    """``attempts`` when the run's last answer came: the dispatch after it is that
    turn's first, which appends the answer to the transcript (once, however many
    attempts a crash costs)."""

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def first_dispatch_of_turn(self) -> bool:
        """The dispatch just recorded is its turn's first (not one after a crash)."""
        return self.attempts == self.turn_dispatches + 1

    @property
    def causality(self) -> Causality:
        """The run's place in its chain; a run recorded before causality starts its own."""
        if self.trace_id is None:
            return Causality.root(self.run_id)
        hops = max(self.hops, self.steer_hops)
        return Causality(trace_id=self.trace_id, parent_run_id=self.parent_run_id, hops=hops)

    def _provenance(self, kind: ProvenanceKind, session_key: str | None) -> Provenance:
        chain = self.causality
        return Provenance(
            kind=kind,
            session_key=session_key,
            run_id=self.run_id,
            trace_id=chain.trace_id,
            parent_run_id=chain.parent_run_id,
            hops=chain.hops,
        )

    def message_provenance(self) -> Provenance:
        """The line the run's first dispatch appends: another agent's words, or a prompt;
        after an answer, the answer (a person's, or the answering session's)."""
        if self.answers:
            return self._provenance("user", self.answered_by)
        if self.step in GATEWAY_MESSAGE_STEPS:
            return self._provenance("system", None)
        if self.remote_caller is not None:
            # A remote agent's words (A2A): no session of this gateway wrote them.
            return self._provenance("a2a-remote", None)
        return self._provenance("a2a", self.sender_key or self.requester_key)

    def reply_provenance(self) -> Provenance:
        """The agent's reply; an announce step's reply is what is posted to the channel."""
        return self._provenance(
            "announce" if self.step in PROMPT_STEPS else "agent", self.session_key
        )

    def seconds_left(self, now: datetime) -> float:
        """Seconds until the deadline (zero or less: it has passed)."""
        if self.deadline_at is None:
            return self.timeout_seconds
        return (self.deadline_at - to_millis(now)) / 1000


class Run(Aggregate):
    state: RunState

    class RunStarted(Aggregate.Created):
        """Accepted: the run is queued in its session's mailbox."""

        session_key: str
        agent_id: str
        step: RunStep
        requester_key: str | None = None
        message: str
        context: str | None = None
        timeout_seconds: float
        deadline_at: int | None = None
        exchange_id: str | None = None
        turn: int | None = None
        # Causality (decision 17); absent from runs recorded before it.
        trace_id: str | None = None
        parent_run_id: str | None = None
        hops: int = 0
        sender_key: str | None = None
        """The session whose words ``message`` is (decision 18), when another agent's."""
        remote_caller: str | None = None
        """A remote (A2A) caller's scope, when a remote agent asked for the run."""

    class RunDispatched(Aggregate.Event):
        """Handed to the agent runtime; a second attempt follows a crash."""

        attempt: int

        def apply(self, aggregate: Run) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={
                    "status": "running",
                    "attempts": self.attempt,
                    "started_at": to_millis(self.timestamp),
                }
            )

    class RunCompleted(Aggregate.Event):
        reply: str | None
        usage: Usage | None = None
        model: str | None = None

        def apply(self, aggregate: Run) -> None:
            state = aggregate.state
            aggregate.state = state.model_copy(
                update={
                    "status": "ok",
                    "reply": self.reply,
                    # A run that asked for input counts every turn's tokens (the asking
                    # turns' are in its state already); any other run has none before.
                    "usage": added_usage(state.usage, self.usage),
                    "model": self.model if state.answers == 0 else self.model or state.model,
                    "ended_at": to_millis(self.timestamp),
                }
            )

    class RunFailed(Aggregate.Event):
        error: str

        def apply(self, aggregate: Run) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={
                    "status": "error",
                    "error": self.error,
                    "ended_at": to_millis(self.timestamp),
                }
            )

    class RunTimedOut(Aggregate.Event):
        timeout_seconds: float

        def apply(self, aggregate: Run) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={
                    "status": "timeout",
                    "error": f"run timed out after {self.timeout_seconds:g}s",
                    "ended_at": to_millis(self.timestamp),
                }
            )

    class RunCancelled(Aggregate.Event):
        """Stopped on request (``gw.cancel_run``), queued or running: its outcome."""

        reason: str = ""

        def apply(self, aggregate: Run) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={
                    "status": "cancelled",
                    "error": cancelled_error(self.reason),
                    "ended_at": to_millis(self.timestamp),
                }
            )

    class RunInputRequested(Aggregate.Event):
        """The turn ended asking a person (decision 33): the run waits, holding no lane
        slot, lease or connection, until an answer or its deadline."""

        prompt: str
        options: list[str] | None = None
        usage: Usage | None = None
        model: str | None = None

        def apply(self, aggregate: Run) -> None:
            state = aggregate.state
            aggregate.state = state.model_copy(
                update={
                    "status": "input_required",
                    "input_request": InputRequest(prompt=self.prompt, options=self.options),
                    "usage": added_usage(state.usage, self.usage),
                    "model": self.model or state.model,
                }
            )

    class RunInputProvided(Aggregate.Event):
        """The answer came: the run is queued for its next turn, whose message it is."""

        text: str
        by: str | None = None
        """Who answered: the session key it answered as, None for an operator."""

        def apply(self, aggregate: Run) -> None:
            state = aggregate.state
            aggregate.state = state.model_copy(
                update={
                    "status": "queued",
                    "message": self.text,
                    "input_request": None,
                    "answers": state.answers + 1,
                    "answered_by": self.by,
                    "turn_dispatches": state.attempts,
                }
            )

    class RunSteered(Aggregate.Event):
        """A message for the run from the session that spawned it (the ``subagents``
        tool's steer): appended to the run's session, where its agent reads it at its
        next step; the run itself goes on."""

        message: str
        steered_by: str
        # The steer's place on its sender's chain (ADR 0034): a steer is a hop, and the
        # run goes on at the deeper of its own hop and the steer's. Absent on steers
        # recorded before steers counted.
        trace_id: str | None = None
        parent_run_id: str | None = None
        hops: int | None = None

        def apply(self, aggregate: Run) -> None:
            state = aggregate.state
            hops = state.steer_hops if self.hops is None else max(state.steer_hops, self.hops)
            aggregate.state = state.model_copy(
                update={"steers": state.steers + 1, "steer_hops": hops}
            )

    class RunSteerSent(Aggregate.Event):
        """The run steered another run in flight (recorded with that run's RunSteered):
        its trace counts the steer (``maxSteers``)."""

        steered_run_id: str
        hops: int

        def apply(self, aggregate: Run) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={"steers_sent": aggregate.state.steers_sent + 1}
            )

    def __init__(
        self,
        session_key: str,
        agent_id: str,
        step: RunStep,
        message: str,
        timeout_seconds: float,
        requester_key: str | None = None,
        context: str | None = None,
        exchange_id: str | None = None,
        turn: int | None = None,
        trace_id: str | None = None,
        parent_run_id: str | None = None,
        hops: int = 0,
        sender_key: str | None = None,
        deadline_at: int | None = None,
        timestamp: datetime | None = None,
        remote_caller: str | None = None,
    ) -> None:
        if deadline_at is None and timestamp is not None:
            # Recorded before deadlines were: the deadline its start implied.
            deadline_at = _deadline(timestamp, timeout_seconds)
        self.state = RunState(
            run_id=str(self.id),
            session_key=session_key,
            agent_id=agent_id,
            step=step,
            requester_key=requester_key,
            message=message,
            context=context,
            timeout_seconds=timeout_seconds,
            deadline_at=deadline_at,
            exchange_id=exchange_id,
            turn=turn,
            trace_id=trace_id,
            parent_run_id=parent_run_id,
            hops=hops,
            sender_key=sender_key,
            remote_caller=remote_caller,
        )

    @classmethod
    def start(
        cls,
        *,
        run_id: UUID,
        session_key: str,
        agent_id: str,
        step: RunStep,
        message: str,
        timeout_seconds: float,
        at: datetime,
        requester_key: str | None = None,
        context: str | None = None,
        exchange_id: str | None = None,
        turn: int | None = None,
        causality: Causality | None = None,
        sender_key: str | None = None,
        remote_caller: str | None = None,
    ) -> Run:
        return cls._create(
            cls.RunStarted,
            id=run_id,
            timestamp=at,
            session_key=session_key,
            agent_id=agent_id,
            step=step,
            message=message,
            timeout_seconds=timeout_seconds,
            deadline_at=_deadline(at, timeout_seconds),
            requester_key=requester_key,
            context=context,
            exchange_id=exchange_id,
            turn=turn,
            trace_id=causality.trace_id if causality else None,
            parent_run_id=causality.parent_run_id if causality else None,
            hops=causality.hops if causality else 0,
            sender_key=sender_key,
            remote_caller=remote_caller,
        )

    def _require_open(self) -> None:
        if self.state.ended:
            raise RunAlreadyEnded(f"run {self.state.run_id} already ended ({self.state.status})")

    def overdue(self, now: datetime) -> bool:
        """Its deadline has passed: it may not be handed to an agent any more."""
        return self.state.seconds_left(now) <= 0

    def dispatch(self, *, at: datetime) -> None:
        self._require_open()
        if self.state.status == "input_required":
            raise RunNotWaiting(f"run {self.state.run_id} waits for input: no turn to dispatch")
        if self.overdue(at):
            raise RunOverdue(f"run {self.state.run_id} is past its deadline")
        self.trigger_event(self.RunDispatched, timestamp=at, attempt=self.state.attempts + 1)

    def complete(
        self, *, reply: str | None, usage: Usage | None, model: str | None, at: datetime
    ) -> None:
        self._require_open()
        self.trigger_event(self.RunCompleted, timestamp=at, reply=reply, usage=usage, model=model)

    def request_input(
        self, *, request: InputRequest, usage: Usage | None, model: str | None, at: datetime
    ) -> None:
        """End the turn waiting for ``request``'s answer (its tokens counted)."""
        self._require_open()
        self.trigger_event(
            self.RunInputRequested,
            timestamp=at,
            prompt=request.prompt,
            options=request.options,
            usage=usage,
            model=model,
        )

    def provide_input(self, *, text: str, by: str | None, at: datetime) -> None:
        """Take the answer: RunNotWaiting unless the run waits for one (a second answer,
        or one after the deadline ended it), AnswerNotAnOption for one it does not take."""
        asked = self.state.input_request
        if self.state.status != "input_required" or asked is None:
            raise RunNotWaiting(
                f"run {self.state.run_id} is not waiting for input (it is {self.state.status})"
            )
        if self.overdue(at):
            # Its deadline has passed, its timeout not recorded yet: the answer is too late.
            raise RunNotWaiting(
                f"run {self.state.run_id} is not waiting for input (its deadline has passed)"
            )
        refusal = asked.refusal(text)
        if refusal is not None:
            raise AnswerNotAnOption(refusal)
        self.trigger_event(self.RunInputProvided, timestamp=at, text=text, by=by)

    def fail(self, *, error: str, at: datetime) -> None:
        self._require_open()
        self.trigger_event(self.RunFailed, timestamp=at, error=error)

    def cancel(self, *, reason: str, at: datetime) -> None:
        """End the run as cancelled; RunAlreadyEnded when it has its outcome already
        (a cancel racing the run's own end: exactly one of them is recorded)."""
        self._require_open()
        self.trigger_event(self.RunCancelled, timestamp=at, reason=reason)

    def steer(
        self,
        *,
        message: str,
        steered_by: str,
        at: datetime,
        causality: Causality | None = None,
    ) -> None:
        """Record a steer, made on the sender's chain ``causality`` (its trace, the
        sending run, the steer's hop); RunAlreadyEnded for a run that has its outcome (a
        steer reaches only a queued or running run)."""
        self._require_open()
        self.trigger_event(
            self.RunSteered,
            timestamp=at,
            message=message,
            steered_by=steered_by,
            trace_id=causality.trace_id if causality else None,
            parent_run_id=causality.parent_run_id if causality else None,
            hops=causality.hops if causality else None,
        )

    def steer_sent(self, *, steered_run_id: str, hops: int, at: datetime) -> None:
        """Record that this run steered ``steered_run_id`` (the steer's hop ``hops``)."""
        self.trigger_event(
            self.RunSteerSent, timestamp=at, steered_run_id=steered_run_id, hops=hops
        )

    def steer_provenance(self, steered_by: str, causality: Causality | None = None) -> Provenance:
        """The steer's transcript line: another agent's words, on the sender's chain
        (the steer's hop) when it has one, else on the run's."""
        if causality is None:
            return self._provenance_of("a2a", steered_by)
        return Provenance(
            kind="a2a",
            session_key=steered_by,
            run_id=self.state.run_id,
            trace_id=causality.trace_id,
            parent_run_id=causality.parent_run_id,
            hops=causality.hops,
        )

    def _provenance_of(self, kind: ProvenanceKind, session_key: str) -> Provenance:
        chain = self.state.causality
        return Provenance(
            kind=kind,
            session_key=session_key,
            run_id=self.state.run_id,
            trace_id=chain.trace_id,
            parent_run_id=chain.parent_run_id,
            hops=chain.hops,
        )

    def time_out(self, *, at: datetime) -> None:
        self._require_open()
        self.trigger_event(
            self.RunTimedOut, timestamp=at, timeout_seconds=self.state.timeout_seconds
        )


def added_usage(before: Usage | None, turn: Usage | None) -> Usage | None:
    """The tokens of a run's turns so far: ``turn``'s added to those ``before`` it."""
    if before is None or turn is None:
        return turn if before is None else before

    def total(field: str) -> int | None:
        ours, theirs = getattr(before, field), getattr(turn, field)
        return None if ours is None and theirs is None else (ours or 0) + (theirs or 0)

    return Usage(
        input=before.input + turn.input,
        output=before.output + turn.output,
        cacheRead=total("cacheRead"),
        cacheWrite=total("cacheWrite"),
        totalTokens=total("totalTokens"),
    )


def cancelled_error(reason: str) -> str:
    """What a cancelled run's ``error`` says: that it was cancelled, and why if told."""
    return f"run cancelled: {reason}" if reason else "run cancelled"


def _deadline(start: datetime, timeout_seconds: float) -> int | None:
    """``start`` plus the timeout, in ms since the epoch; None for a timeout without end."""
    if not math.isfinite(timeout_seconds):
        return None
    return to_millis(start) + round(timeout_seconds * 1000)
