"""A2A push notifications through the delivery outbox (ADR 0035).

A push is an outbox delivery on the ``a2a-push`` channel, queued by the push requests'
process manager (application/orchestration/pushes.py) when the task's run ends: ``to`` is
the client's URL, the message the run's final state and the client's token, rendered here
as the task (a ``StreamResponse``). The outbox attempts it, records each attempt, and
retries a failure with back-off on the gateway clock (decision 13). ``A2APushDelivery``
wraps the gateway's own channel delivery: other channels go to it unchanged.
"""

from __future__ import annotations

import json

import httpx
from a2a.types import StreamResponse
from google.protobuf.json_format import MessageToDict
from sessionwire.adapters.a2a.task_view import task_of
from sessionwire.application.orchestration.pushes import run_of_push
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery, DeliveryRejected

PUSH_CHANNEL = "a2a-push"
TOKEN_HEADER = "X-A2A-Notification-Token"
PUSH_TIMEOUT_SECONDS = 10.0


class A2APushDelivery(ChannelDelivery):
    """POSTs ``a2a-push`` deliveries to the client's URL; hands any other to ``inner``.

    A 2xx answer is delivered; a 4xx but 408 and 429 is permanent (the receiver will
    never take it: abandoned at once); anything else, or no answer, is retried.
    """

    def __init__(self, inner: ChannelDelivery, client: httpx.AsyncClient | None = None) -> None:
        self.inner = inner
        self._client = client

    async def close(self) -> None:
        """Close the HTTP client it was given (one it makes per push closes itself)."""
        if self._client is not None:
            await self._client.aclose()

    async def deliver(self, delivery: Delivery) -> None:
        if delivery.channel != PUSH_CHANNEL:
            await self.inner.deliver(delivery)
            return
        state, token = run_of_push(delivery.message)
        body = MessageToDict(StreamResponse(task=task_of(state)))
        headers = {"Content-Type": "application/json"}
        if token:
            headers[TOKEN_HEADER] = token
        client = self._client or httpx.AsyncClient(timeout=PUSH_TIMEOUT_SECONDS)
        try:
            response = await client.post(
                delivery.to,
                content=json.dumps(body),
                headers={**headers, "Idempotency-Key": delivery.idempotency_key},
            )
        finally:
            if self._client is None:
                await client.aclose()
        status = response.status_code
        if 200 <= status < 300:
            return
        if 400 <= status < 500 and status not in (408, 429):
            raise DeliveryRejected(f"the push receiver answered {status}")
        raise RuntimeError(f"the push receiver answered {status}")
