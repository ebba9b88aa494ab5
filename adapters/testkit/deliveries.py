"""Channel deliveries for tests and embedding: capture what the gateway posts."""

from __future__ import annotations

from typing import Any

from sessionwire.application.ports.runtime import ChannelDelivery, Delivery


class CapturingDelivery(ChannelDelivery):
    """Keeps every delivery, in order, as dicts (channel, to, accountId, message, sessionKey)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def deliver(self, delivery: Delivery) -> None:
        self.sent.append(delivery.as_dict())
