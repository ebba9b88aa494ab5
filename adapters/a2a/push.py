"""A2A push notifications through the delivery outbox (ADR 0035).

A push is an outbox delivery on the ``a2a-push`` channel: ``to`` is the client's URL and
the message a JSON envelope of the task (a ``StreamResponse``) and the client's token.
The outbox attempts it, records each attempt, and retries a failure with back-off on the
gateway clock (decision 13). ``A2APushDelivery`` wraps the gateway's own channel
delivery: other channels go to it unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from a2a.types import StreamResponse, Task
from google.protobuf.json_format import MessageToDict
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery, DeliveryRejected

PUSH_CHANNEL = "a2a-push"
TOKEN_HEADER = "X-A2A-Notification-Token"
PUSH_TIMEOUT_SECONDS = 10.0


def push_message(task: Task, token: str | None) -> str:
    """The outbox entry's message: the task as a StreamResponse, and the client's token."""
    body = MessageToDict(StreamResponse(task=task))
    return json.dumps({"body": body, "token": token or None}, separators=(",", ":"))


class A2APushDelivery(ChannelDelivery):
    """POSTs ``a2a-push`` deliveries to the client's URL; hands any other to ``inner``.

    A 2xx answer is delivered; a 4xx but 408 and 429 is permanent (the receiver will
    never take it: abandoned at once); anything else, or no answer, is retried.
    """

    def __init__(self, inner: ChannelDelivery, client: httpx.AsyncClient | None = None) -> None:
        self.inner = inner
        self._client = client

    async def deliver(self, delivery: Delivery) -> None:
        if delivery.channel != PUSH_CHANNEL:
            await self.inner.deliver(delivery)
            return
        envelope: dict[str, Any] = json.loads(delivery.message)
        headers = {"Content-Type": "application/json"}
        if envelope.get("token"):
            headers[TOKEN_HEADER] = str(envelope["token"])
        client = self._client or httpx.AsyncClient(timeout=PUSH_TIMEOUT_SECONDS)
        try:
            response = await client.post(
                delivery.to,
                content=json.dumps(envelope["body"]),
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
