"""What the outbox tells telemetry of a retried delivery (found by mutation testing,
docs/testing.md "What mutation testing left": no simulator invariant reads metrics)."""

from __future__ import annotations

from sessionwire import Gateway, GatewayConfig
from sessionwire.application.ports.runtime import Delivery
from sessionwire.application.ports.telemetry import Telemetry
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

RULES = [
    {"step": "subagent_task", "reply": "done"},
    {"step": "subagent_announce", "reply": "Result: all done"},
    {"reply": "ok"},
]


class DownOnce(CapturingDelivery):
    """The channel is down for the first post, up after."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def deliver(self, delivery: Delivery) -> None:
        if not self.refused:
            self.refused += 1
            raise ConnectionError("channel down")
        await super().deliver(delivery)


class Outcomes(Telemetry):
    def __init__(self) -> None:
        self.attempts: list[str] = []

    def delivery_attempted(self, outcome: str) -> None:
        self.attempts.append(outcome)


async def test_a_retry_that_delivers_is_counted_delivered() -> None:
    delivery, telemetry, clock = DownOnce(), Outcomes(), VirtualClock()
    gw = await Gateway.open(
        config=GatewayConfig.load({}),
        store="memory",
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": RULES}),
        delivery=delivery,
        telemetry=telemetry,
    )
    try:
        await gw.record_message("main", role="user", content="hi", channel="whatsapp", to="+1555")
        await gw.call_tool("main", "sessions_spawn", {"task": "work"})
        await gw.wait_idle()
        assert delivery.refused == 1
        await clock.advance(10)  # the outbox's first retry
        await gw.wait_idle()
    finally:
        await gw.close()

    assert len(delivery.sent) == 1
    # The first post failed, the retry delivered.
    assert telemetry.attempts == ["failed", "delivered"]
