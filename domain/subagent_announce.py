"""How a finished sub-agent reports back: Status / Result / Notes and one stats line.

The documented design (openclaw-behaviour.md §8.6.4, contract decision 7): the child's
announce reply is normalised; ``Status`` comes from the run's outcome, never from what the
model wrote; the stats line follows §8.6.2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUBAGENT_ANNOUNCE_MESSAGE = "Sub-agent announce step."

_SECTION = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:\*\*)?(status|result|notes)(?:\*\*)?\s*:\s*(?:\*\*)?\s*(.*)$",
    re.IGNORECASE,
)


def announce_step_context(*, task: str, label: str | None, requester_key: str) -> str:
    return "\n".join(
        line
        for line in (
            "Sub-agent announce step:",
            f"Task: {' '.join(task.split())}",
            f"Label: {label}" if label else None,
            f"Requester session: {requester_key}.",
            "Reply with the outcome in two sections:",
            "Result: what you accomplished or found.",
            "Notes: anything the requester should know (or none).",
            'Reply exactly "ANNOUNCE_SKIP" only if the task failed completely and there is '
            "nothing to report.",
            "Your reply will be posted to the requester's chat.",
        )
        if line
    )


def parse_sections(reply: str) -> dict[str, str]:
    """``Status:`` / ``Result:`` / ``Notes:`` sections of a reply, by lower-case name."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in reply.splitlines():
        match = _SECTION.match(line)
        if match:
            current = match.group(1).lower()
            first = match.group(2).strip().rstrip("*").strip()
            sections[current] = [first] if first else []
        elif current is not None:
            sections[current].append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def normalise_announce(reply: str | None, *, error: str | None) -> tuple[str, str]:
    """The Result and Notes of an announce; the model's own ``Status:`` is ignored."""
    text = (reply or "").strip()
    sections = parse_sections(text) if text else {}
    result = sections.get("result") or text or "(not available)"
    notes_lines = [sections["notes"]] if sections.get("notes") else []
    if error:
        notes_lines.append(f"- Error: {error}")
    notes = "\n".join(notes_lines) if notes_lines else "- (none)"
    return result, notes


def format_runtime(milliseconds: int | None) -> str:
    if milliseconds is None or milliseconds <= 0:
        return "n/a"
    seconds = milliseconds // 1000
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60}s"
    return f"{seconds}s"


def format_tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}m"
    if count >= 1_000:
        return f"{count / 1_000:.1f}k"
    return str(count)


def format_cost(dollars: float) -> str:
    return f"${dollars:.2f}" if dollars >= 0.01 else f"${dollars:.4f}"


@dataclass(frozen=True)
class AnnounceStats:
    runtime_ms: int | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    cost: float | None
    session_key: str
    session_id: str | None
    transcript: str | None

    def line(self) -> str:
        parts = [f"runtime {format_runtime(self.runtime_ms)}"]
        total = self.total_tokens
        if total is None and self.input_tokens is not None and self.output_tokens is not None:
            total = self.input_tokens + self.output_tokens
        if total is None:
            parts.append("tokens n/a")
        else:
            i = "n/a" if self.input_tokens is None else format_tokens(self.input_tokens)
            o = "n/a" if self.output_tokens is None else format_tokens(self.output_tokens)
            parts.append(f"tokens {format_tokens(total)} (in {i} / out {o})")
        if self.cost is not None:
            parts.append(f"est {format_cost(self.cost)}")
        parts.append(f"sessionKey {self.session_key}")
        if self.session_id:
            parts.append(f"sessionId {self.session_id}")
        if self.transcript:
            parts.append(f"transcript {self.transcript}")
        return "Stats: " + " • ".join(parts)


def format_announce(
    reply: str | None, *, status: str, error: str | None, stats: AnnounceStats
) -> str:
    result, notes = normalise_announce(reply, error=error)
    return f"Status: {status}\n\nResult:\n{result}\n\nNotes:\n{notes}\n\n{stats.line()}"
