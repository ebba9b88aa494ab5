"""Sub-agent report formatting (openclaw-conformance.md §H [derived] cases H.10–H.12).

The report itself follows contract decision 7 (``Status`` / ``Result`` / ``Notes`` plus one
stats line), so where OpenClaw's wording differs the test asserts ours and says so.
"""

from __future__ import annotations

import pytest
from sessionwire.domain.subagent_announce import (
    AnnounceStats,
    announce_step_context,
    format_announce,
    format_cost,
    format_runtime,
    format_tokens,
)


def stats(**changes: object) -> AnnounceStats:
    fields: dict[str, object] = {
        "runtime_ms": 65_000,
        "input_tokens": 1_200,
        "output_tokens": 300,
        "total_tokens": None,
        "cost": 0.005,
        "session_key": "agent:main:subagent:x",
        "session_id": "sess-1",
        "transcript": None,
    }
    fields.update(changes)
    return AnnounceStats(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("reply", ["", "   \n", None])
def test_h10_an_empty_reply_is_not_available(reply: str | None) -> None:
    """OpenClaw writes ``Findings: (no output)``; decision 7's ``Result:`` says
    ``(not available)`` and the notes say none."""
    text = format_announce(reply, status="ok", error=None, stats=stats())
    assert text.startswith("Status: ok\n\nResult:\n(not available)\n\nNotes:\n- (none)\n\n")


def test_h11_the_announce_step_names_the_task_and_the_label() -> None:
    """OpenClaw picks one name (label, else task, else "background task"); decision 7's
    announce step runs in the child and names the task, and the label when there is one."""
    labelled = announce_step_context(
        task="  find   the bug ", label="bug hunt", requester_key="agent:main:main"
    )
    assert "Task: find the bug\nLabel: bug hunt\n" in labelled
    unlabelled = announce_step_context(task="find the bug", label=None, requester_key="main")
    assert "Label:" not in unlabelled
    assert "Task: find the bug\nRequester session: main." in unlabelled


@pytest.mark.parametrize(
    ("milliseconds", "text"),
    [(65_000, "1m5s"), (45_000, "45s"), (3_723_000, "1h2m"), (0, "n/a"), (None, "n/a")],
)
def test_h12_runtime(milliseconds: int | None, text: str) -> None:
    assert format_runtime(milliseconds) == text


@pytest.mark.parametrize(
    ("count", "text"), [(1_500, "1.5k"), (2_000_000, "2.0m"), (999, "999"), (1_000, "1.0k")]
)
def test_h12_tokens(count: int, text: str) -> None:
    assert format_tokens(count) == text


@pytest.mark.parametrize(("dollars", "text"), [(0.005, "$0.0050"), (1.234, "$1.23")])
def test_h12_cost(dollars: float, text: str) -> None:
    assert format_cost(dollars) == text


def test_h12_parts_are_separated_by_bullets() -> None:
    assert stats().line() == (
        "Stats: runtime 1m5s • tokens 1.5k (in 1.2k / out 300) • est $0.0050"
        " • sessionKey agent:main:subagent:x • sessionId sess-1"
    )
