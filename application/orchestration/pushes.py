"""The process manager of push requests (ADR 0035): waits for each requested run to end,
then queues its notification in the delivery outbox, once, on whichever gateway is up.

The outbox entry's message is protocol-neutral: the run's final state and the caller's
token, as JSON; the channel's delivery (adapters/a2a/push.py for ``a2a-push``) renders it
in its protocol's shape when it sends it.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from sessionwire.application.orchestration.in_flight import InFlight
from sessionwire.application.orchestration.outbox import DeliveryOutbox
from sessionwire.application.orchestration.process_managers import ProcessManager
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.outbox import OutboundDelivery
from sessionwire.domain.push_request import AwaitRunEnd, PushRequest, PushRequestState
from sessionwire.domain.run import RunState


def push_message(state: RunState, token: str | None) -> str:
    """What the outbox sends: the run as it ended, and the token the receiver checks."""
    return json.dumps({"run": state.model_dump(mode="json"), "token": token}, separators=(",", ":"))


def run_of_push(message: str) -> tuple[RunState, str | None]:
    """``push_message`` read back (by the channel's delivery)."""
    envelope: dict[str, Any] = json.loads(message)
    return RunState.model_validate(envelope["run"]), envelope.get("token")


class RunPushes(ProcessManager[PushRequest]):
    kind = "push"
    pending_statuses = ("waiting",)
    aggregate_class = PushRequest
    state_class = PushRequestState

    def __init__(
        self,
        *,
        store: AsyncStore,
        in_flight: InFlight,
        clock: Clock,
        runs: RunEngine,
        outbox: DeliveryOutbox,
    ) -> None:
        super().__init__(store, in_flight)
        self.clock = clock
        self.runs = runs
        self.outbox = outbox

    def log_context(self, aggregate: PushRequest) -> dict[str, Any]:
        return {"session_key": aggregate.state.session_key, "run_id": aggregate.state.run_id}

    async def take(self, push: PushRequest, step: AwaitRunEnd) -> None:
        ended = await self.runs.wait(UUID(step.run_id))
        if ended is None:
            return
        request = push.state
        key = f"push:{push.id}"
        async for uow in retrying(self.store, f"push {push.id}"):
            with uow:
                fresh = await uow.work(push.id, PushRequest, PushRequestState)
                if fresh is None or fresh.next_step() != step:
                    return  # withdrawn, or queued by another gateway meanwhile
                now = self.clock.now()
                entry = uow.add(
                    OutboundDelivery.queued(
                        source="a2a_push",
                        source_id=request.run_id,
                        session_key=request.session_key,
                        channel=request.channel,
                        to=request.url,
                        message=push_message(ended, request.token),
                        idempotency_key=key,
                        at=now,
                    )
                )
                fresh.queued(entry.id, at=now)
                await uow.commit()
        self.outbox.start(entry.id)
        self.log.info("push queued", push_id=str(push.id), delivery_id=str(entry.id))
