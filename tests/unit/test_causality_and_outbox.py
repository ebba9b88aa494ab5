"""Pure rules of decisions 13 and 17 and of reply cleaning: the outbox's back-off and
attempts, the hop limit's setting, what a reader sees of a reply (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sessionwire import GatewayConfig
from sessionwire.domain.agent_to_agent import reply_text
from sessionwire.domain.causality import (
    Causality,
    default_provenance,
    hop_limit_reached,
    with_provenance,
)
from sessionwire.domain.outbox import OutboundDelivery
from sessionwire.domain.retry_policy import RetryPolicy

MAIN = "agent:main:main"


def failed_once(policy: RetryPolicy, at: datetime) -> OutboundDelivery:
    """An outbox entry for a report whose first attempt, at ``at``, failed (not for good)."""
    return OutboundDelivery.after_failure(
        source="subagent_report",
        source_id="s",
        session_key=MAIN,
        channel="whatsapp",
        to="+1555",
        account_id=None,
        thread_id=None,
        message="m",
        idempotency_key="k",
        error="down",
        permanent=False,
        policy=policy,
        at=at,
    )


def test_a_chain_counts_sends_and_spawns_not_the_steps_it_runs_itself() -> None:
    root = Causality.root("t")
    child = root.next_hop("r1")
    assert (child.trace_id, child.parent_run_id, child.hops) == ("t", "r1", 2)
    step = child.same_hop("r2")
    assert (step.trace_id, step.parent_run_id, step.hops) == ("t", "r2", 2)
    assert not hop_limit_reached(5, 6)
    assert hop_limit_reached(6, 6)


def test_back_off_doubles_from_the_first_retry_up_to_the_cap() -> None:
    policy = RetryPolicy()
    assert [policy.wait_after(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]


def test_an_outbox_entry_records_each_attempt_with_one_key() -> None:
    at = datetime(2026, 5, 1, tzinfo=UTC)
    entry = failed_once(RetryPolicy(), at)
    step = entry.next_step()
    assert step is not None
    assert step.attempt == 2
    assert step.due_ms == int((at + timedelta(seconds=10)).timestamp() * 1000)
    entry.succeeded(at=at + timedelta(seconds=10))
    assert entry.state.status == "delivered"
    assert entry.next_step() is None


def test_an_outbox_entry_is_abandoned_once_its_next_try_falls_past_the_deadline() -> None:
    # Found by mutation testing (docs/testing.md): the deadline counted from the first
    # attempt, not from anywhere else; the simulator never plays a day of failures.
    at = datetime(2026, 5, 1, tzinfo=UTC)
    policy = RetryPolicy(first_retry_seconds=10, max_retry_seconds=10, abandon_after_seconds=25)
    entry = failed_once(policy, at)
    entry.attempt_failed(
        error="down", permanent=False, policy=policy, at=at + timedelta(seconds=10)
    )
    assert entry.state.status == "pending"
    entry.attempt_failed(
        error="down", permanent=False, policy=policy, at=at + timedelta(seconds=20)
    )
    assert entry.state.status == "abandoned"
    assert entry.next_step() is None


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("Hello  [Tool Call: exec (ID: call_1)] world", "Hello  world"),
        ("Hello [Tool Call: exec (ID: 1)]\n  world", "Hello world"),
        ("first\n[Tool Call: read (ID: 2)]\n\nsecond", "first\nsecond"),
        ("[tool call: lower (ID: 3)] case", "case"),
        ("[Tool Call: only (ID: 4)]", None),
    ],
    ids=["blanks-after", "line-break-after", "own-line", "any-case", "nothing-left"],
)
def test_reply_cleaning_strips_the_blanks_after_a_tool_call_marker(
    raw: str, cleaned: str | None
) -> None:
    assert reply_text(raw) == cleaned


@pytest.mark.parametrize("max_hops", [0, -1, 2.5, "6"])
def test_max_hops_must_be_a_positive_whole_number(max_hops: Any) -> None:
    with pytest.raises(ValueError, match="maxHops"):
        GatewayConfig.load({"session": {"agentToAgent": {"maxHops": max_hops}}})


@pytest.mark.parametrize("role", ["user", "assistant", "toolResult", None])
def test_a_line_without_provenance_reads_with_its_roles_default(role: str | None) -> None:
    line: dict[str, Any] = {"role": role, "content": []}
    shown = with_provenance(line)
    assert shown["provenance"] == default_provenance(str(role)).for_reader()
    assert "provenance" not in line  # the stored line is left as it was
    kept = {"role": "user", "provenance": {"kind": "a2a", "sessionKey": "agent:x:main"}}
    assert with_provenance(kept) is kept
