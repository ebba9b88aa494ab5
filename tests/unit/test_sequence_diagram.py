"""The exchange's sequence diagram: steps from the events, SVG with every text escaped."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sessionwire.adapters.console.sequence_diagram import (
    Arrow,
    Note,
    exchange_sequence,
    sequence_svg,
)
from sessionwire.application.audit.timeline import TimelineEntry

A, B = "agent:main:a", "agent:main:b"


def entry(event: str, position: int, summary: str = "", **data: Any) -> TimelineEntry:
    return TimelineEntry(
        position=position,
        timestamp=datetime(2026, 5, 1, tzinfo=UTC),
        kind="delivery" if event.startswith("Delivery") else "exchange",
        aggregate_id="x",
        version=position,
        event=event,
        summary=summary or event,
        data=data,
    )


def test_steps_follow_the_exchange_and_its_deliveries() -> None:
    entries = [
        entry("ExchangeOpened", 1, requester_key=A, target_key=B, original_message="hi"),
        entry("RoundOneReplied", 2, reply="hello"),
        entry("PingPongTurn", 3, turn=1, speaker="requester", reply="more?"),
        entry("ReplySkipped", 4, "turn 2 ended the loop"),
        entry("AnnounceFailed", 5, error="down"),
        entry("DeliveryQueued", 6, channel="discord", to="channel:x", message="done"),
        entry("DeliveryAttemptFailed", 7, attempt=1, error="down"),
        entry("DeliverySucceeded", 8, attempt=2),
    ]
    sequence = exchange_sequence(entries)
    channel = "discord channel:x"
    assert sequence.participants == [A, B, channel]
    assert sequence.steps == [
        Arrow(A, B, "hi", "message"),
        Arrow(B, A, "hello", "reply"),
        Arrow(A, B, "turn 1: more?", "reply"),
        Note("turn 2 ended the loop"),
        # The announce failed before the outbox named the channel: it still points there.
        Arrow(B, channel, "failed: down", "failure"),
        Note("queued for retry: done"),
        Arrow(B, channel, "attempt 1 failed: down", "failure"),
        Arrow(B, channel, "attempt 2 delivered", "delivery"),
    ]


def test_recorded_text_is_escaped_in_the_svg() -> None:
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    entries = [entry("ExchangeOpened", 1, requester_key=A, target_key=B, original_message=hostile)]
    svg = sequence_svg(exchange_sequence(entries), title=f"t {hostile}")
    assert "<script" not in svg
    assert "<img" not in svg
    assert "&lt;script&gt;" in svg
    assert svg.startswith("<svg")
    assert svg.endswith("</svg>")
