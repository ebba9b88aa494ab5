"""The process manager of the delivery outbox: retries failed deliveries on the clock.

Each outbox entry says when its next attempt is due; the driver waits on the gateway
clock until then, attempts the delivery with the entry's idempotency key, and records the
attempt (delivered, failed with the next due time, or abandoned). Everything it knows is
in the store, so a gateway restarted before a due time waits for the rest, and one
restarted after it attempts at once (contract §6 decision 13).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.process_managers import ProcessManager
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery, DeliveryRejected
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.outbox import (
    AttemptAt,
    DeliverySource,
    OutboundDelivery,
    OutboxState,
)
from sessionwire.domain.retry_policy import RetryPolicy
from sessionwire.domain.session import to_millis


def describe_failure(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class DeliveryOutbox(ProcessManager[OutboundDelivery]):
    kind = "delivery"
    pending_statuses = ("pending",)
    aggregate_class = OutboundDelivery
    state_class = OutboxState

    def __init__(
        self,
        *,
        store: AsyncStore,
        in_flight: InFlight,
        clock: Clock,
        delivery: ChannelDelivery,
        policy: RetryPolicy,
    ) -> None:
        super().__init__(store, in_flight)
        self.clock = clock
        self.delivery = delivery
        self.policy = policy
        # Attempts made whose outcome is not recorded yet (the save failed): a retry of
        # the step records that outcome instead of posting again (once per process).
        self._attempted: dict[tuple[UUID, int], BaseException | None] = {}

    def log_context(self, aggregate: OutboundDelivery) -> dict[str, Any]:
        return {"session_key": aggregate.state.session_key}

    def entry_after_failure(
        self,
        delivery: Delivery,
        error: BaseException,
        *,
        source: DeliverySource,
        source_id: str,
    ) -> OutboundDelivery:
        """The outbox entry for ``delivery``, whose first attempt just raised ``error``.

        The caller saves it with its own record of the failure, then ``start``s it.
        """
        self.store.telemetry.delivery_attempted("failed")
        return OutboundDelivery.after_failure(
            source=source,
            source_id=source_id,
            session_key=delivery.session_key,
            channel=delivery.channel,
            to=delivery.to,
            account_id=delivery.account_id,
            thread_id=delivery.thread_id,
            message=delivery.message,
            idempotency_key=delivery.idempotency_key,
            error=describe_failure(error),
            permanent=isinstance(error, DeliveryRejected),
            policy=self.policy,
            at=self.clock.now(),
        )

    async def take(self, entry: OutboundDelivery, step: AttemptAt) -> None:
        delay_ms = step.due_ms - to_millis(self.clock.now())
        if delay_ms > 0:
            # Parked on the clock: a real clock's wait_idle does not wait for a retry.
            await self.in_flight.sleep(delay_ms / 1000, parked=True)
        attempt = (entry.id, step.attempt)
        if attempt in self._attempted:
            failure = self._attempted[attempt]
        else:
            failure = await self._attempt(entry)
            self._attempted[attempt] = failure
        recorded = "failed"
        async for uow in retrying(self.store, f"delivery {entry.id}"):
            with uow:
                fresh = await uow.work(entry.id, OutboundDelivery, OutboxState)
                if fresh is None or fresh.state.attempts + 1 != step.attempt:
                    self._attempted.pop(attempt, None)
                    return  # recorded meanwhile (another gateway)
                now = self.clock.now()
                if failure is None:
                    fresh.succeeded(at=now)
                else:
                    fresh.attempt_failed(
                        error=describe_failure(failure),
                        permanent=isinstance(failure, DeliveryRejected),
                        policy=self.policy,
                        at=now,
                    )
                await uow.commit()
                recorded = fresh.state.status
        del self._attempted[attempt]
        # delivered, failed (to be retried) or abandoned
        self.store.telemetry.delivery_attempted("failed" if recorded == "pending" else recorded)
        self.log.info(
            "delivery retried",
            delivery_id=str(entry.id),
            attempt=step.attempt,
            outcome="delivered" if failure is None else describe_failure(failure),
        )

    async def _attempt(self, entry: OutboundDelivery) -> BaseException | None:
        """Post the entry's message: None, or how the channel failed."""
        state = entry.state
        try:
            await self.delivery.deliver(
                Delivery(
                    channel=state.channel,
                    to=state.to,
                    account_id=state.account_id,
                    thread_id=state.thread_id,
                    message=state.message,
                    session_key=state.session_key,
                    idempotency_key=state.idempotency_key,
                )
            )
        except Exception as error:  # a channel failing is recorded, never raised
            return error
        return None
