"""A2A push notifications through the delivery outbox (ADR 0035), fenced (ADR 0040).

A push is an outbox delivery on the ``a2a-push`` channel, queued by the push requests'
process manager (application/orchestration/pushes.py) when the task's run ends: ``to`` is
the client's URL, the message the run's final state and the client's token, rendered here
as the task: a 1.0 ``StreamResponse``, or the bare 0.3 task on ``a2a-push-0.3`` (a push
set by a 0.3 call). The outbox attempts it, records each attempt, and
retries a failure with back-off on the gateway clock (decision 13). ``A2APushDelivery``
wraps the gateway's own channel delivery: other channels go to it unchanged.

Every push goes through the egress client (``http.egress``): the URL's address is checked
after resolution, and connected to as checked, so the notification token goes only to an
allowed address; no redirect is followed (the token would go along); the answer's status
is all that is read, its body discarded unread.
"""

from __future__ import annotations

import json

import httpx
from a2a.compat.v0_3.conversions import to_compat_task
from a2a.types import StreamResponse
from google.protobuf.json_format import MessageToDict
from sessionwire.adapters.a2a.task_view import task_of
from sessionwire.adapters.egress.client import egress_client
from sessionwire.adapters.egress.fence import (
    EgressFailed,
    NameNotResolved,
    Resolver,
    checked_address,
    system_resolver,
)
from sessionwire.application.config.gateway_config import EgressConfig
from sessionwire.application.orchestration.pushes import run_of_push
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery, DeliveryRejected
from sessionwire.domain.egress import EgressRefused, Origin

PUSH_CHANNEL = "a2a-push"
# A push set by a 0.3 call: its body is the 0.3 task, as a 0.3 receiver reads it.
PUSH_CHANNEL_V03 = "a2a-push-0.3"
TOKEN_HEADER = "X-A2A-Notification-Token"
PUSH_TIMEOUT_SECONDS = 10.0


class A2APushDelivery(ChannelDelivery):
    """POSTs ``a2a-push`` deliveries to the client's URL; hands any other to ``inner``.

    A 2xx answer is delivered; a 4xx but 408 and 429 is permanent (the receiver will
    never take it: abandoned at once), and so is an address the policy refuses; anything
    else, or no answer, is retried. ``egress`` is the config's ``http.egress`` (None: its
    defaults, public addresses only); ``transport`` is for tests (an in-process receiver,
    fenced all the same)."""

    def __init__(
        self,
        inner: ChannelDelivery,
        egress: EgressConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.inner = inner
        self.egress = egress or EgressConfig()
        self._resolver = resolver
        self._transport = transport

    async def check_url(self, url: str) -> None:
        """Refuse a push URL now (set time) that the send would refuse: not http(s), or
        on an address the policy refuses once resolved. EgressRefused says why."""
        try:
            origin = Origin.of(url)
        except ValueError as error:
            raise EgressRefused(f"the push URL must be http(s) with a host: {error}") from None
        try:
            await checked_address(self.egress.policy, origin, self._resolver)
        except (EgressFailed, NameNotResolved) as failed:
            raise EgressRefused(f"the push URL cannot be used: {failed}") from None

    async def deliver(self, delivery: Delivery) -> None:
        if delivery.channel not in (PUSH_CHANNEL, PUSH_CHANNEL_V03):
            await self.inner.deliver(delivery)
            return
        state, token = run_of_push(delivery.message)
        task = task_of(state)
        body = (
            to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True)
            if delivery.channel == PUSH_CHANNEL_V03
            else MessageToDict(StreamResponse(task=task))
        )
        headers = {"Content-Type": "application/json", "Idempotency-Key": delivery.idempotency_key}
        if token:
            headers[TOKEN_HEADER] = token
        # One client a push: nothing pooled outlives the event loop it was made on.
        client = egress_client(
            self.egress,
            timeout=PUSH_TIMEOUT_SECONDS,
            follow_redirects=False,
            transport=self._transport,
            resolver=self._resolver,
        )
        try:
            # Streamed, and left unread: the status is the answer; closing the response
            # drops the connection with whatever body it had.
            async with client.stream(
                "POST", delivery.to, content=json.dumps(body), headers=headers
            ) as response:
                status = response.status_code
        except EgressRefused as refused:
            raise DeliveryRejected(str(refused)) from None
        finally:
            await client.aclose()
        if 200 <= status < 300:
            return
        if 400 <= status < 500 and status not in (408, 429):
            raise DeliveryRejected(f"the push receiver answered {status}")
        raise RuntimeError(f"the push receiver answered {status}")
