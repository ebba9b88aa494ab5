"""The agent-to-agent exchange: the state machine behind one ``sessions_send``.

After the primary run, the requester and the target take turns (requester first) for up
to ``max_turns`` reply-back runs; then the target runs one announce step, whose reply is
delivered to the target's chat unless it is ``ANNOUNCE_SKIP``. Every step is an event,
so a gateway restarted at any point carries on from the last one recorded. The runs an
exchange starts have ids derived from the exchange, so a step is never started twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict, Field
from sessionwire.domain.agent_to_agent import (
    ANNOUNCE_MESSAGE,
    announce_step_context,
    is_announce_skip,
    is_reply_skip,
    reply_step_context,
)
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality

EXCHANGE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/exchanges")


def exchange_id_for(primary_run_id: UUID) -> UUID:
    return uuid5(EXCHANGE_NAMESPACE, str(primary_run_id))


class Turn(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    turn: int
    speaker: Literal["requester", "target"]
    session_key: str
    run_id: str
    reply: str | None


class ExchangeState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    exchange_id: str
    requester_key: str
    requester_display: str
    requester_channel: str | None = None
    target_key: str
    target_display: str
    target_channel: str | None = None
    original_message: str
    primary_run_id: str
    max_turns: int
    trace_id: str | None = None
    hops: int = 0
    status: Literal["open", "closed"] = "open"
    round_one_done: bool = False
    round_one_reply: str | None = None
    # Written only when set (a row stored before the field equals a rebuild).
    round_one_failure: str | None = Field(default=None, exclude_if=lambda failure: failure is None)
    """How the target's run ended when it failed (``error: …``, ``timeout``,
    ``cancelled``): why there is no reply, said as what it was."""
    turns: list[Turn] = Field(default_factory=list)
    loop_done: bool = False
    loop_end: str | None = None
    announce_run_id: str | None = None
    announce_done: bool = False
    announce_reply: str | None = None
    announce_outcome: Literal["skipped", "delivered", "failed", "suppressed"] | None = None
    close_reason: str | None = None

    @property
    def latest_reply(self) -> str | None:
        for turn in reversed(self.turns):
            if turn.reply:
                return turn.reply
        return self.round_one_reply


# What the process manager does next --------------------------------------------------


@dataclass(frozen=True)
class AwaitPrimary:
    run_id: str


@dataclass(frozen=True)
class StartRun:
    """Start (or, if it exists, await) the run with this id, then record its outcome."""

    run_id: UUID
    session_key: str
    message: str
    context: str
    step: Literal["reply_back", "announce"]
    turn: int | None
    causality: Causality | None = None


@dataclass(frozen=True)
class EndLoop:
    reason: str


@dataclass(frozen=True)
class SkipAnnounce:
    reason: str


@dataclass(frozen=True)
class Deliver:
    reply: str


@dataclass(frozen=True)
class Close:
    reason: str


NextStep = AwaitPrimary | StartRun | EndLoop | SkipAnnounce | Deliver | Close | None


class Exchange(Aggregate):
    state: ExchangeState

    class ExchangeOpened(Aggregate.Created):
        requester_key: str
        requester_display: str
        requester_channel: str | None = None
        target_key: str
        target_display: str
        target_channel: str | None = None
        original_message: str
        primary_run_id: str
        max_turns: int
        # The primary run's chain (decision 17); absent from exchanges recorded before it.
        trace_id: str | None = None
        hops: int = 0

    class RoundOneReplied(Aggregate.Event):
        reply: str | None
        failure: str | None = None
        """Set when the target's run failed; absent from exchanges recorded before."""

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(
                round_one_done=True, round_one_reply=self.reply, round_one_failure=self.failure
            )

    class PingPongTurn(Aggregate.Event):
        turn: int
        speaker: Literal["requester", "target"]
        session_key: str
        run_id: str
        reply: str

        def apply(self, aggregate: Exchange) -> None:
            turn = Turn(
                turn=self.turn,
                speaker=self.speaker,
                session_key=self.session_key,
                run_id=self.run_id,
                reply=self.reply,
            )
            aggregate._update(turns=[*aggregate.state.turns, turn])

    class ReplySkipped(Aggregate.Event):
        """The loop ended at this turn: the agent said REPLY_SKIP, said nothing or failed."""

        turn: int
        speaker: Literal["requester", "target"]
        run_id: str
        reason: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(loop_done=True, loop_end=self.reason)

    class LoopEnded(Aggregate.Event):
        reason: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(loop_done=True, loop_end=self.reason)

    class TurnBlocked(Aggregate.Event):
        """The loop ended before this turn: the speaker's session takes no sends."""

        turn: int
        speaker: Literal["requester", "target"]
        session_key: str
        rule: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(
                loop_done=True, loop_end=f"send blocked by session policy ({self.rule})"
            )

    class AnnounceSuppressed(Aggregate.Event):
        """The target's send policy denies: no announce run (``stage="run"``) or no
        delivery of its reply (``stage="delivery"``)."""

        session_key: str
        stage: Literal["run", "delivery"]
        rule: str
        message: str | None = None

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(announce_done=True, announce_outcome="suppressed")

    class AnnounceRequested(Aggregate.Event):
        run_id: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(announce_run_id=self.run_id)

    class AnnounceReplied(Aggregate.Event):
        reply: str | None

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(announce_done=True, announce_reply=self.reply)

    class AnnounceSkipped(Aggregate.Event):
        reason: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(announce_outcome="skipped")

    class AnnounceDelivered(Aggregate.Event):
        channel: str
        to: str
        account_id: str | None = None
        thread_id: str | None = None
        message: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(announce_outcome="delivered")

    class AnnounceFailed(Aggregate.Event):
        """The first attempt failed; the outbox entry ``retry_delivery_id`` retries it."""

        error: str
        retry_delivery_id: str | None = None

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(announce_outcome="failed")

    class ExchangeClosed(Aggregate.Event):
        reason: str

        def apply(self, aggregate: Exchange) -> None:
            aggregate._update(status="closed", close_reason=self.reason)

    def __init__(
        self,
        requester_key: str,
        requester_display: str,
        target_key: str,
        target_display: str,
        original_message: str,
        primary_run_id: str,
        max_turns: int,
        requester_channel: str | None = None,
        target_channel: str | None = None,
        trace_id: str | None = None,
        hops: int = 0,
    ) -> None:
        self.state = ExchangeState(
            exchange_id=str(self.id),
            requester_key=requester_key,
            requester_display=requester_display,
            requester_channel=requester_channel,
            target_key=target_key,
            target_display=target_display,
            target_channel=target_channel,
            original_message=original_message,
            primary_run_id=primary_run_id,
            max_turns=max_turns,
            trace_id=trace_id,
            hops=hops,
        )

    def _update(self, **changes: object) -> None:
        self.state = self.state.model_copy(update=changes)

    @classmethod
    def open(
        cls,
        *,
        primary_run_id: UUID,
        requester_key: str,
        requester_display: str,
        requester_channel: str | None,
        target_key: str,
        target_display: str,
        target_channel: str | None,
        original_message: str,
        max_turns: int,
        at: datetime,
        causality: Causality | None = None,
    ) -> Exchange:
        return cls._create(
            cls.ExchangeOpened,
            id=exchange_id_for(primary_run_id),
            timestamp=at,
            requester_key=requester_key,
            requester_display=requester_display,
            requester_channel=requester_channel,
            target_key=target_key,
            target_display=target_display,
            target_channel=target_channel,
            original_message=original_message,
            primary_run_id=str(primary_run_id),
            max_turns=max_turns,
            trace_id=causality.trace_id if causality else None,
            hops=causality.hops if causality else 0,
        )

    # Decisions ------------------------------------------------------------------------

    def run_id_for(self, step: str) -> UUID:
        return uuid5(self.id, step)

    def _step_causality(self, parent_run_id: str) -> Causality | None:
        """Turns and the announce stay on the primary run's hop (decision 17)."""
        state = self.state
        if state.trace_id is None:
            return None
        return Causality(trace_id=state.trace_id, parent_run_id=parent_run_id, hops=state.hops)

    def next_step(self) -> NextStep:
        """The one thing to do next, from the recorded state alone."""
        state = self.state
        if state.status == "closed":
            return None
        if not state.round_one_done:
            return AwaitPrimary(run_id=state.primary_run_id)
        if not state.round_one_reply:
            if state.round_one_failure:
                return Close(reason=f"the target's run failed ({state.round_one_failure})")
            return Close(reason="the target gave no reply")
        if not state.loop_done:
            reason = self._loop_end_reason()
            if reason:
                return EndLoop(reason=reason)
            return self._turn_step(len(state.turns) + 1)
        if not state.announce_done:
            return self._announce_step()
        if state.announce_outcome is None:
            reply = (state.announce_reply or "").strip()
            if not reply:
                return SkipAnnounce(reason="empty announce reply")
            if is_announce_skip(reply):
                return SkipAnnounce(reason="ANNOUNCE_SKIP")
            return Deliver(reply=reply)
        return Close(reason=f"announce {state.announce_outcome}")

    def _loop_end_reason(self) -> str | None:
        state = self.state
        if state.max_turns <= 0:
            return "maxPingPongTurns is 0"
        if state.requester_key == state.target_key:
            return "requester and target are the same session"
        if len(state.turns) >= state.max_turns:
            return f"reached maxPingPongTurns ({state.max_turns})"
        return None

    def _turn_step(self, turn: int) -> StartRun:
        state = self.state
        speaker_is_requester = turn % 2 == 1
        return StartRun(
            run_id=self.run_id_for(f"turn-{turn}"),
            session_key=state.requester_key if speaker_is_requester else state.target_key,
            message=state.latest_reply or "",
            context=reply_step_context(
                speaker_is_requester=speaker_is_requester,
                turn=turn,
                max_turns=state.max_turns,
                requester_key=state.requester_display,
                requester_channel=state.requester_channel,
                target_display=state.target_display,
                target_channel=state.target_channel,
            ),
            step="reply_back",
            turn=turn,
            # Each turn answers the one before it; the first answers the primary run.
            causality=self._step_causality(
                str(self.run_id_for(f"turn-{turn - 1}")) if turn > 1 else state.primary_run_id
            ),
        )

    def _announce_step(self) -> StartRun:
        state = self.state
        return StartRun(
            run_id=self.run_id_for("announce"),
            session_key=state.target_key,
            message=ANNOUNCE_MESSAGE,
            context=announce_step_context(
                requester_key=state.requester_display,
                requester_channel=state.requester_channel,
                target_display=state.target_display,
                target_channel=state.target_channel,
                original_message=state.original_message,
                round_one_reply=state.round_one_reply,
                latest_reply=state.latest_reply,
            ),
            step="announce",
            turn=None,
            causality=self._step_causality(state.primary_run_id),
        )

    # Commands -------------------------------------------------------------------------

    def record_round_one(
        self, reply: str | None, *, at: datetime, failure: str | None = None
    ) -> None:
        if not self.state.round_one_done:
            self.trigger_event(self.RoundOneReplied, timestamp=at, reply=reply, failure=failure)

    def end_loop(self, reason: str, *, at: datetime) -> None:
        if not self.state.loop_done:
            self.trigger_event(self.LoopEnded, timestamp=at, reason=reason)

    def record_turn(
        self, step: StartRun, *, reply: str | None, failed: str | None, at: datetime
    ) -> None:
        """The outcome of a reply-back run: a turn, or the reason the loop stops here."""
        assert step.turn is not None
        speaker: Literal["requester", "target"] = "requester" if step.turn % 2 == 1 else "target"
        if failed or not reply or is_reply_skip(reply):
            reason = failed or ("REPLY_SKIP" if is_reply_skip(reply) else "empty reply")
            self.trigger_event(
                self.ReplySkipped,
                timestamp=at,
                turn=step.turn,
                speaker=speaker,
                run_id=str(step.run_id),
                reason=reason,
            )
            return
        self.trigger_event(
            self.PingPongTurn,
            timestamp=at,
            turn=step.turn,
            speaker=speaker,
            session_key=step.session_key,
            run_id=str(step.run_id),
            reply=reply,
        )

    def block_turn(self, step: StartRun, *, rule: str, at: datetime) -> None:
        assert step.turn is not None
        speaker: Literal["requester", "target"] = "requester" if step.turn % 2 == 1 else "target"
        self.trigger_event(
            self.TurnBlocked,
            timestamp=at,
            turn=step.turn,
            speaker=speaker,
            session_key=step.session_key,
            rule=rule,
        )

    def suppress_announce(
        self, *, stage: Literal["run", "delivery"], rule: str, message: str | None, at: datetime
    ) -> None:
        self.trigger_event(
            self.AnnounceSuppressed,
            timestamp=at,
            session_key=self.state.target_key,
            stage=stage,
            rule=rule,
            message=message,
        )

    def request_announce(self, run_id: UUID, *, at: datetime) -> None:
        if self.state.announce_run_id is None:
            self.trigger_event(self.AnnounceRequested, timestamp=at, run_id=str(run_id))

    def record_announce_reply(self, reply: str | None, *, at: datetime) -> None:
        self.trigger_event(self.AnnounceReplied, timestamp=at, reply=reply)

    def skip_announce(self, reason: str, *, at: datetime) -> None:
        self.trigger_event(self.AnnounceSkipped, timestamp=at, reason=reason)

    def delivered(
        self,
        *,
        channel: str,
        to: str,
        account_id: str | None,
        message: str,
        at: datetime,
        thread_id: str | None = None,
    ) -> None:
        self.trigger_event(
            self.AnnounceDelivered,
            timestamp=at,
            channel=channel,
            to=to,
            account_id=account_id,
            thread_id=thread_id,
            message=message,
        )

    def delivery_failed(
        self, error: str, *, at: datetime, retry_delivery_id: str | None = None
    ) -> None:
        self.trigger_event(
            self.AnnounceFailed, timestamp=at, error=error, retry_delivery_id=retry_delivery_id
        )

    def close(self, reason: str, *, at: datetime) -> None:
        if self.state.status != "closed":
            self.trigger_event(self.ExchangeClosed, timestamp=at, reason=reason)
