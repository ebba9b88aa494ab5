"""The delivery outbox: a channel delivery that failed, retried until delivered or abandoned.

A delivery (the agent-to-agent announce, a sub-agent's report) is first attempted by the
process manager that owns it; its state machine makes that attempt durable (a restart
takes the step again). When the attempt raises, the delivery enters the outbox with that
failed attempt recorded, and is retried with back-off on the gateway clock: the first
retry ``first_retry_seconds`` after the failure, each wait doubling up to
``max_retry_seconds``, until it is delivered or ``abandon_after_seconds`` have passed
since the first attempt (contract §6 decision 13). Every attempt is an event; the
idempotency key is the same for every attempt. A permanent failure abandons at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict
from sessionwire.domain.base import Aggregate
from sessionwire.domain.retry_policy import RetryPolicy
from sessionwire.domain.session import to_millis

OUTBOX_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/outbox")

DeliverySource = Literal["a2a_announce", "subagent_report", "a2a_push"]
OutboxStatus = Literal["pending", "delivered", "abandoned"]


def outbox_id_for(idempotency_key: str) -> UUID:
    """One outbox stream per delivery: the same key never queues twice."""
    return uuid5(OUTBOX_NAMESPACE, idempotency_key)


class OutboxState(BaseModel):
    model_config = ConfigDict(frozen=True)

    delivery_id: str
    source: DeliverySource
    source_id: str
    session_key: str
    channel: str
    to: str
    account_id: str | None = None
    thread_id: str | None = None
    message: str
    idempotency_key: str
    first_attempt_at: int
    status: OutboxStatus = "pending"
    attempts: int = 0
    next_attempt_at: int | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class AttemptAt:
    """Attempt the delivery once the clock reaches ``due_ms`` (at once if it has)."""

    due_ms: int
    attempt: int


class OutboundDelivery(Aggregate):
    state: OutboxState

    class DeliveryQueued(Aggregate.Created):
        source: DeliverySource
        source_id: str
        session_key: str
        channel: str
        to: str
        account_id: str | None = None
        thread_id: str | None = None
        message: str
        idempotency_key: str
        first_attempt_at: int
        next_attempt_at: int | None = None
        """Set when the outbox makes the first attempt too (``queued``)."""

    class DeliveryAttemptFailed(Aggregate.Event):
        attempt: int
        error: str
        next_attempt_at: int

        def apply(self, aggregate: OutboundDelivery) -> None:
            aggregate._update(
                attempts=self.attempt, last_error=self.error, next_attempt_at=self.next_attempt_at
            )

    class DeliverySucceeded(Aggregate.Event):
        attempt: int

        def apply(self, aggregate: OutboundDelivery) -> None:
            aggregate._update(attempts=self.attempt, status="delivered", next_attempt_at=None)

    class DeliveryAbandoned(Aggregate.Event):
        attempt: int
        error: str
        reason: str

        def apply(self, aggregate: OutboundDelivery) -> None:
            aggregate._update(
                attempts=self.attempt,
                status="abandoned",
                last_error=self.error,
                next_attempt_at=None,
            )

    def __init__(
        self,
        source: DeliverySource,
        source_id: str,
        session_key: str,
        channel: str,
        to: str,
        message: str,
        idempotency_key: str,
        first_attempt_at: int,
        account_id: str | None = None,
        thread_id: str | None = None,
        next_attempt_at: int | None = None,
    ) -> None:
        self.state = OutboxState(
            delivery_id=str(self.id),
            source=source,
            source_id=source_id,
            session_key=session_key,
            channel=channel,
            to=to,
            account_id=account_id,
            thread_id=thread_id,
            message=message,
            idempotency_key=idempotency_key,
            first_attempt_at=first_attempt_at,
            next_attempt_at=next_attempt_at,
        )

    def _update(self, **changes: object) -> None:
        self.state = self.state.model_copy(update=changes)

    @classmethod
    def after_failure(
        cls,
        *,
        source: DeliverySource,
        source_id: str,
        session_key: str,
        channel: str,
        to: str,
        account_id: str | None,
        thread_id: str | None,
        message: str,
        idempotency_key: str,
        error: str,
        permanent: bool,
        policy: RetryPolicy,
        at: datetime,
    ) -> OutboundDelivery:
        """The outbox entry of a delivery whose first attempt (at ``at``) just failed."""
        entry = cls._create(
            cls.DeliveryQueued,
            id=outbox_id_for(idempotency_key),
            timestamp=at,
            source=source,
            source_id=source_id,
            session_key=session_key,
            channel=channel,
            to=to,
            account_id=account_id,
            thread_id=thread_id,
            message=message,
            idempotency_key=idempotency_key,
            first_attempt_at=to_millis(at),
        )
        entry.attempt_failed(error=error, permanent=permanent, policy=policy, at=at)
        return entry

    @classmethod
    def queued(
        cls,
        *,
        source: DeliverySource,
        source_id: str,
        session_key: str,
        channel: str,
        to: str,
        message: str,
        idempotency_key: str,
        at: datetime,
    ) -> OutboundDelivery:
        """An entry whose first attempt is due now: a delivery made by the outbox alone
        (an A2A push notification), so every attempt, the first too, is recorded."""
        return cls._create(
            cls.DeliveryQueued,
            id=outbox_id_for(idempotency_key),
            timestamp=at,
            source=source,
            source_id=source_id,
            session_key=session_key,
            channel=channel,
            to=to,
            account_id=None,
            thread_id=None,
            message=message,
            idempotency_key=idempotency_key,
            first_attempt_at=to_millis(at),
            next_attempt_at=to_millis(at),
        )

    # Decisions ------------------------------------------------------------------------

    def next_step(self) -> AttemptAt | None:
        state = self.state
        if state.status != "pending" or state.next_attempt_at is None:
            return None
        return AttemptAt(due_ms=state.next_attempt_at, attempt=state.attempts + 1)

    # Commands -------------------------------------------------------------------------

    def attempt_failed(
        self, *, error: str, permanent: bool, policy: RetryPolicy, at: datetime
    ) -> None:
        """Record a failed attempt, and the next one, or abandonment if none is left."""
        if self.state.status != "pending":
            return
        attempt = self.state.attempts + 1
        now = to_millis(at)
        next_at = now + int(policy.wait_after(attempt) * 1000)
        deadline = self.state.first_attempt_at + int(policy.abandon_after_seconds * 1000)
        if permanent or next_at > deadline:
            reason = (
                "the channel rejected the delivery as permanent"
                if permanent
                else f"no delivery within {policy.abandon_after_seconds:g}s of the first attempt"
            )
            self.trigger_event(
                self.DeliveryAbandoned, timestamp=at, attempt=attempt, error=error, reason=reason
            )
            return
        self.trigger_event(
            self.DeliveryAttemptFailed,
            timestamp=at,
            attempt=attempt,
            error=error,
            next_attempt_at=next_at,
        )

    def succeeded(self, *, at: datetime) -> None:
        if self.state.status == "pending":
            self.trigger_event(
                self.DeliverySucceeded, timestamp=at, attempt=self.state.attempts + 1
            )
