"""An agent-to-agent exchange drawn as a sequence diagram, in SVG made on the server.

The exchange's events (and its deliveries' attempts) become steps: an arrow from one
participant to another, or a note across the lifelines (a loop that ended, a blocked
turn). The SVG is plain markup: no script, every recorded text escaped, a title and a
description for screen readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from sessionwire.application.audit.timeline import TimelineEntry

Style = Literal["message", "reply", "delivery", "failure"]
LABEL_CHARS = 64
COLUMN = 230
MARGIN = 100
ROW = 46
HEAD = 60


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    label: str
    style: Style


@dataclass(frozen=True)
class Note:
    text: str
    failure: bool = False


Step = Arrow | Note


@dataclass(frozen=True)
class Sequence:
    participants: list[str]
    steps: list[Step]


def _short(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


def exchange_sequence(entries: list[TimelineEntry]) -> Sequence:
    """The steps of one exchange, from its entries and its deliveries' (log order)."""
    requester = target = ""
    # Where the announce goes, known once a delivery names it; an announce that failed
    # before anything was queued names no channel.
    channel = next(
        (
            f"{entry.data['channel']} {entry.data['to']}"
            for entry in entries
            if entry.event in {"AnnounceDelivered", "DeliveryQueued"}
        ),
        "channel",
    )
    steps: list[Step] = []
    for entry in entries:
        data: dict[str, Any] = entry.data
        event = entry.event
        if event == "ExchangeOpened":
            requester, target = data["requester_key"], data["target_key"]
            steps.append(Arrow(requester, target, _short(data["original_message"]), "message"))
        elif event == "RoundOneReplied" and data.get("failure"):
            # The target's run failed: say so, not "(no reply)".
            label = f"run failed: {_short(data['failure'])}"
            steps.append(Arrow(target, requester, label, "failure"))
        elif event == "RoundOneReplied":
            steps.append(
                Arrow(target, requester, _short(data.get("reply") or "(no reply)"), "reply")
            )
        elif event == "PingPongTurn":
            source = requester if data["speaker"] == "requester" else target
            other = target if source == requester else requester
            steps.append(
                Arrow(source, other, f"turn {data['turn']}: {_short(data['reply'])}", "reply")
            )
        elif event in {"ReplySkipped", "LoopEnded", "AnnounceSkipped", "ExchangeClosed"}:
            steps.append(Note(entry.summary))
        elif event in {"TurnBlocked", "AnnounceSuppressed"}:
            steps.append(Note(entry.summary, failure=True))
        elif event == "AnnounceRequested":
            steps.append(Arrow(requester, target, "announce step", "message"))
        elif event == "AnnounceReplied":
            steps.append(Note(f"announce reply: {_short(data.get('reply'))}"))
        elif event == "AnnounceDelivered":
            steps.append(Arrow(target, channel, _short(data["message"]), "delivery"))
        elif event == "AnnounceFailed":
            steps.append(Arrow(target, channel, f"failed: {_short(data['error'])}", "failure"))
        elif event == "DeliveryQueued":
            steps.append(Note(f"queued for retry: {_short(data['message'])}"))
        elif event == "DeliveryAttemptFailed":
            label = f"attempt {data['attempt']} failed: {_short(data['error'])}"
            steps.append(Arrow(target, channel, label, "failure"))
        elif event == "DeliverySucceeded":
            steps.append(Arrow(target, channel, f"attempt {data['attempt']} delivered", "delivery"))
        elif event == "DeliveryAbandoned":
            steps.append(Note(entry.summary, failure=True))
    participants = [p for p in dict.fromkeys([requester, target]) if p]
    if any(isinstance(s, Arrow) and channel in (s.source, s.target) for s in steps):
        participants.append(channel)
    return Sequence(participants=participants, steps=steps)


def sequence_svg(sequence: Sequence, title: str) -> str:
    """The diagram as an inline ``<svg>`` element."""
    names = sequence.participants or ["(none)"]
    x = {name: MARGIN + i * COLUMN for i, name in enumerate(names)}
    width = MARGIN * 2 + COLUMN * (len(names) - 1)
    height = HEAD + ROW * len(sequence.steps) + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" role="img" '
        f'aria-labelledby="seq-title seq-desc" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        f'<title id="seq-title">{escape(title)}</title>',
        f'<desc id="seq-desc">{len(sequence.steps)} steps between '
        f"{escape(', '.join(names))}</desc>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#1f2933"/></marker></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for name, cx in x.items():
        parts.append(
            f'<g class="participant"><rect x="{cx - 95}" y="8" width="190" height="30" rx="4" '
            f'fill="#e4ecf7" stroke="#1f4e8c"/><text x="{cx}" y="28" text-anchor="middle" '
            f'font-size="12" fill="#102a43">{escape(_short(name)[:30])}</text>'
            f'<line x1="{cx}" y1="38" x2="{cx}" y2="{height - 8}" stroke="#52606d" '
            f'stroke-dasharray="4 4"/></g>'
        )
    for index, step in enumerate(sequence.steps):
        y = HEAD + ROW * index + ROW // 2
        if isinstance(step, Note):
            fill, stroke = ("#fde8e8", "#9b1c1c") if step.failure else ("#fff8db", "#8d6e00")
            wide = width - 2 * MARGIN + 180
            parts.append(
                f'<g class="note"><rect x="{MARGIN - 90}" y="{y - 16}" width="{wide}" '
                f'height="26" rx="3" fill="{fill}" stroke="{stroke}"/><text x="{width // 2}" '
                f'y="{y + 2}" text-anchor="middle" font-size="12" fill="#1f2933">'
                f"{escape(_short(step.text))}</text></g>"
            )
            continue
        x1, x2 = x.get(step.source, MARGIN), x.get(step.target, MARGIN)
        if x1 == x2:  # a step to oneself: a short loop to the right
            x2 = x1 + 40
        dash = ' stroke-dasharray="6 4"' if step.style in {"reply", "failure"} else ""
        color = "#9b1c1c" if step.style == "failure" else "#1f2933"
        parts.append(
            f'<g class="arrow {step.style}"><line x1="{x1}" y1="{y + 6}" x2="{x2}" y2="{y + 6}" '
            f'stroke="{color}" stroke-width="1.5"{dash} marker-end="url(#arrow)"/>'
            f'<text x="{(x1 + x2) // 2}" y="{y}" text-anchor="middle" font-size="12" '
            f'fill="{color}">{escape(step.label)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)
