"""One readable line per recorded event: when, which stream, what happened.

``EventFeed`` follows a store's log from a position and turns each new event into an
``EventLine`` (time, stream kind, the session the stream is about, event name, gist), for
the demo's live view and the write commands' "recorded" lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from rich.text import Text
from sessionwire.application.audit.timeline import describe
from sessionwire.application.ports.event_log import EventLog
from sessionwire.domain.base import DomainEvent
from sessionwire.domain.session import single_appends

GIST_CHARS = 90
FEED_PAGE = 500
UUID_TAIL = re.compile(r"([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Colours by stream kind, so a reader can follow one conversation through the log.
STREAM_STYLES = {
    "session": "cyan",
    "run": "magenta",
    "exchange": "yellow",
    "spawn": "green",
    "refusal": "red",
    "busy": "bright_red",
    "delivery": "blue",
    "yield": "bright_green",
    "a2a": "bright_cyan",
    "push": "bright_blue",
    "schedule": "bright_magenta",
}
# Narrower than this many columns an event takes two lines (the one-line layout needs ~110).
WIDE = 120
QUIET_EVENTS = {"RunDispatched", "SubagentRunStarted"}
# The stream each aggregate's first event opens, and the field naming its session.
OPENERS = {
    "SessionOpened": ("session", "key"),
    "RunStarted": ("run", "session_key"),
    "ExchangeOpened": ("exchange", "target_key"),
    "SubagentSpawned": ("spawn", "child_key"),
    "AccessRefused": ("refusal", "requester_key"),
    "DeliveryQueued": ("delivery", "session_key"),
    "BusyDecided": ("busy", "session_key"),
    "RunYielded": ("yield", "session_key"),
    "RemoteCallReceived": ("a2a", "session_key"),
    "PushRequested": ("push", "session_key"),
    "ScheduleDefined": ("schedule", "session_key"),
}


@dataclass(frozen=True)
class EventLine:
    position: int
    time: datetime
    stream: str
    subject: str
    event: str
    gist: str

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "time": self.time.isoformat(),
            "stream": self.stream,
            "session": self.subject,
            "event": self.event,
            "gist": self.gist,
        }

    def as_text(self, width: int | None = None) -> Text:
        """The line for a terminal: time, stream, session, event, gist. Narrower than
        ``WIDE`` columns, the gist goes on a line of its own (and wraps, never cut)."""
        quiet = self.event in QUIET_EVENTS
        if width is not None and width < WIDE:
            text = Text(f"  {self.time:%H:%M:%S}  ", style="dim")
            text.append(f"{self.stream:<8} ", style=STREAM_STYLES.get(self.stream, ""))
            text.append(f"{self.event} ", style="dim" if quiet else "bold")
            text.append(short_key(self.subject))
            text.append(f"\n            {self.gist}", style="dim" if quiet else "")
            return text
        text = Text(f"  {self.time:%H:%M:%S}  ", style="dim")
        text.append(f"{self.stream:<8} ", style=STREAM_STYLES.get(self.stream, ""))
        text.append(f"{short_key(self.subject):<34} ")
        text.append(f"{self.event:<26}", style="dim" if quiet else "bold")
        text.append(self.gist, style="dim" if quiet else "")
        return text


class EventFeed:
    """The events recorded after ``start``, read in log order as they arrive."""

    def __init__(
        self, store: EventLog, display: Callable[[str], str], *, after: int | None = None
    ) -> None:
        self.store = store
        self.display = display
        if after is None:
            store.seal()
        self.position = store.sealed_position() if after is None else after
        self._streams: dict[UUID, tuple[str, str]] = {}

    def new_lines(self) -> list[EventLine]:
        # By the sealed log's positions: on PostgreSQL a record that commits after a later
        # numbered one is still read, since positions are given only to final records.
        self.store.seal()
        found: list[tuple[int, DomainEvent]] = []
        after = self.position
        while True:
            page = self.store.records_after(after, FEED_PAGE)
            found.extend(page)
            if len(page) < FEED_PAGE:
                break
            after = page[-1][0]
        lines = []
        # A batch of messages shows as the single appends it stands for.
        for position, event in single_appends(found):
            self.position = position
            stream, subject = self._stream_of(event)
            lines.append(
                EventLine(
                    position=position,
                    time=event.timestamp,
                    stream=stream,
                    subject=subject,
                    event=type(event).__name__,
                    gist=shorten(gist(event, self.display)),
                )
            )
        return lines

    def _stream_of(self, event: DomainEvent) -> tuple[str, str]:
        known = self._streams.get(event.originator_id)
        if known is None:
            # A stream opened before the feed started: its first event names it.
            first = event if event.originator_version == 1 else None
            if first is None:
                opened = self.store.stream(event.originator_id)
                first = opened[0] if opened else event
            opener = OPENERS.get(type(first).__name__)
            if opener is None:
                known = ("?", str(event.originator_id))
            else:
                kind, field = opener
                known = (kind, self.display(str(getattr(first, field))))
            self._streams[event.originator_id] = known
        return known


def short_key(key: str) -> str:
    """A session key with any UUID in it cut to its first block."""
    return UUID_TAIL.sub(r"\1…", key)


def call_summary(result: dict[str, Any]) -> str:
    """A tool result in one line: its status and the field a reader wants next."""
    status = result.get("status")
    if status in {"error", "forbidden"}:
        return f"{status}: {result.get('error')}"
    details = []
    if "reply" in result:
        details.append(f"reply {shorten(str(result['reply']), 70)!r}")
    if "childSessionKey" in result:
        details.append(f"child {short_key(result['childSessionKey'])}")
    if "count" in result:
        details.append(f"{result['count']} session(s)")
    delivery = result.get("delivery")
    if isinstance(delivery, dict) and delivery.get("status"):
        # What became of the message (decision 29): started, queued (its place), steered
        # (into which run) or refused.
        place = f" behind {delivery['position']} run(s)" if "position" in delivery else ""
        joined = f" into run {delivery['runId']}" if "runId" in delivery else ""
        details.append(f"message {delivery['status']}{place}{joined}")
    summary = ", ".join(details)
    return f"{status or 'ok'}{': ' + summary if summary else ''}"


def shorten(text: str, limit: int = GIST_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text(message: Any) -> str:
    return "".join(
        block.get("text", "") for block in message.content if block.get("type") == "text"
    )


def _archive_due(archive_at: int | None) -> str:
    if archive_at is None:
        return ""
    due = datetime.fromtimestamp(archive_at / 1000, tz=UTC)
    return f" (archive due {due:%H:%M:%S})"


def gist(event: DomainEvent, display: Callable[[str], str]) -> str:
    """What the event says, in a few words (its name says the rest)."""
    name = type(event).__name__
    data: Any = event
    match name:
        case "SessionOpened":
            spawned = f", spawned by {display(data.spawned_by)}" if data.spawned_by else ""
            return f"agent {data.agent_id}{spawned}"
        case "MessageAppended":
            return f"{data.message.role}: {_text(data.message)}"
        case "SessionPatched":
            return ", ".join(f"{key}={value}" for key, value in data.changes.items())
        case "SessionArchived" | "SessionDeleted" | "LoopEnded" | "ExchangeClosed":
            return str(data.reason)
        case "RunStarted":
            turn = f" turn {data.turn}" if data.turn is not None else ""
            return f"{data.step}{turn} for agent {data.agent_id}: {data.message}"
        case "RunDispatched":
            return f"handed to the agent (attempt {data.attempt})"
        case "RunCompleted":
            return f"reply: {data.reply or '(empty)'}"
        case "RunFailed" | "AnnounceFailed":
            return f"error: {data.error}"
        case "RunTimedOut":
            return f"timed out after {data.timeout_seconds:g}s"
        case "RunCancelled":
            return f"cancelled: {data.reason}" if data.reason else "cancelled"
        case "RunSteered":
            return f"steered by {data.steered_by}: {data.message}"
        case "RunSteerSent":
            return f"steered run {data.steered_run_id} (hop {data.hops})"
        case "RunInputRequested":
            options = f" [{' / '.join(data.options)}]" if data.options else ""
            return f"asks: {data.prompt}{options}"
        case "RunInputProvided":
            return f"answered by {display(data.by) if data.by else 'an operator'}: {data.text}"
        case "ExchangeOpened":
            return (
                f"{data.requester_display} → {data.target_display}: {data.original_message} "
                f"(up to {data.max_turns} ping-pong turns)"
            )
        case "RoundOneReplied" | "AnnounceReplied" | "SubagentAnnounceReplied":
            return f"reply: {data.reply or '(empty)'}"
        case "PingPongTurn":
            return f"turn {data.turn} ({data.speaker}): {data.reply}"
        case "ReplySkipped":
            return f"turn {data.turn} ({data.speaker}): {data.reason}, the loop ends"
        case "AnnounceRequested" | "SubagentAnnounceRequested":
            return "announce step started"
        case "AnnounceSkipped":
            return str(data.reason)
        case "AnnounceDelivered":
            return f"posted to {data.channel} {data.to}: {data.message}"
        case "SubagentSpawned":
            return f"agent {data.agent_id} for {data.requester_display}: {data.task}"
        case "SubagentRunStarted":
            return "child run started"
        case "SubagentRunEnded":
            error = f": {data.error}" if data.error else ""
            return f"child run ended {data.outcome}{error}"
        case "SubagentAnnounced":
            where = f" to {data.channel} {data.to}" if data.channel else ""
            return f"report delivered{where}{_archive_due(data.archive_at)}: {data.message}"
        case "SubagentArchived":
            return "archived"
        case "SubagentDeleted":
            return "deleted"
    # Everything else (policy decisions, say) in the auditor's words.
    return describe(event)
