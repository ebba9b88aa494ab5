"""A request to notify a URL when a run ends (an A2A push-notification config, ADR 0035).

Recorded when the caller sets it, so it outlives the gateway that took it: whichever
gateway is up when the run ends queues the notification as an outbox delivery (once:
the entry's id is derived from the request), and from then on the outbox owns it
(attempts recorded, failures retried). Withdrawn before the run ends, nothing is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict
from sessionwire.domain.base import Aggregate

PUSH_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/push")
PushStatus = Literal["waiting", "queued", "withdrawn"]


def push_request_id(run_id: str, config_id: str) -> UUID:
    """One request per run and config id: setting the same config again finds it."""
    return uuid5(PUSH_NAMESPACE, f"{run_id}\n{config_id}")


class PushRequestState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    session_key: str
    config_id: str
    channel: str
    url: str
    token: str | None = None
    status: PushStatus = "waiting"
    delivery_id: str | None = None


@dataclass(frozen=True)
class AwaitRunEnd:
    """Wait for the run to end, then queue the notification."""

    run_id: str


class PushRequest(Aggregate):
    state: PushRequestState

    class PushRequested(Aggregate.Created):
        run_id: str
        session_key: str
        config_id: str
        channel: str
        url: str
        token: str | None = None

    class PushQueued(Aggregate.Event):
        delivery_id: str

        def apply(self, aggregate: PushRequest) -> None:
            aggregate._update(status="queued", delivery_id=self.delivery_id)

    class PushWithdrawn(Aggregate.Event):
        def apply(self, aggregate: PushRequest) -> None:
            aggregate._update(status="withdrawn")

    def __init__(
        self,
        run_id: str,
        session_key: str,
        config_id: str,
        channel: str,
        url: str,
        token: str | None = None,
    ) -> None:
        self.state = PushRequestState(
            run_id=run_id,
            session_key=session_key,
            config_id=config_id,
            channel=channel,
            url=url,
            token=token,
        )

    def _update(self, **changes: object) -> None:
        self.state = self.state.model_copy(update=changes)

    @classmethod
    def request(
        cls,
        *,
        run_id: str,
        session_key: str,
        config_id: str,
        channel: str,
        url: str,
        token: str | None,
        at: datetime,
    ) -> PushRequest:
        return cls._create(
            cls.PushRequested,
            id=push_request_id(run_id, config_id),
            timestamp=at,
            run_id=run_id,
            session_key=session_key,
            config_id=config_id,
            channel=channel,
            url=url,
            token=token,
        )

    def next_step(self) -> AwaitRunEnd | None:
        return AwaitRunEnd(self.state.run_id) if self.state.status == "waiting" else None

    def queued(self, delivery_id: UUID, *, at: datetime) -> None:
        if self.state.status == "waiting":
            self.trigger_event(self.PushQueued, timestamp=at, delivery_id=str(delivery_id))

    def withdraw(self, *, at: datetime) -> None:
        if self.state.status == "waiting":
            self.trigger_event(self.PushWithdrawn, timestamp=at)
