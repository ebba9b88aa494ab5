"""What a send's answer says became of its message (decision 29): read off the recorded
busy decision, and which keys name a chat thread (never a send's target)."""

from __future__ import annotations

import pytest
from sessionwire.adapters.cli.event_lines import call_summary
from sessionwire.domain.keys import is_thread_key
from sessionwire.domain.send_delivery import SendDelivery


@pytest.mark.parametrize(
    ("decision", "runs_ahead", "shown"),
    [
        (None, None, {"status": "started", "mode": "announce"}),
        ("enqueued", 0, {"status": "started", "mode": "announce"}),
        ("enqueued", 1, {"status": "queued", "position": 1, "mode": "announce"}),
        ("enqueued", 3, {"status": "queued", "position": 3, "mode": "announce"}),
        ("interrupted", 0, {"status": "started", "mode": "announce"}),
        ("interrupted", 1, {"status": "queued", "position": 1, "mode": "announce"}),
        # A decision recorded before positions were: queued, its place unknown.
        ("enqueued", None, {"status": "queued", "mode": "announce"}),
        ("rejected", 2, {"status": "refused"}),
    ],
)
def test_the_delivery_is_read_off_the_decision(
    decision: str | None, runs_ahead: int | None, shown: dict[str, object]
) -> None:
    assert SendDelivery.of(decision, runs_ahead).to_json() == shown  # type: ignore[arg-type]


def test_a_steered_send_names_the_run_it_joined_and_announces_nothing() -> None:
    # It started no run and opened no exchange: no place in a queue, no announce mode.
    delivery = SendDelivery.of("steered", 1, steered_run_id="r-1")
    assert delivery.to_json() == {"status": "steered", "runId": "r-1"}


@pytest.mark.parametrize(
    ("key", "thread"),
    [
        ("agent:main:slack:channel:c1:thread:1712345.000100", True),
        ("agent:main:discord:channel:c1:THREAD:7", True),
        ("slack:channel:c1:thread:42", True),
        ("agent:main:slack:channel:c1:thread:", False),
        ("agent:main:slack:channel:c1:thread: ", False),
        ("thread:42", False),
        ("agent:main:slack:channel:thread-talk", False),
        ("agent:main:main", False),
        ("agent:main:discord:group:threads", False),
    ],
)
def test_a_thread_key_ends_in_a_thread_id(key: str, thread: bool) -> None:
    assert is_thread_key(key) is thread


def test_the_cli_line_names_the_run_a_steered_message_joined() -> None:
    line = call_summary(
        {"runId": "r-1", "status": "accepted", "delivery": {"status": "steered", "runId": "r-1"}}
    )
    assert line == "accepted: message steered into run r-1"
