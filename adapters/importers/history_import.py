"""Importing sessions recorded elsewhere (OpenClaw) as sessionwire events.

Each imported session becomes one stream: SessionOpened, its transcript in batches of up
to IMPORT_BATCH messages (one MessagesAppended each, at its last message's time; each
message keeps its own timestamp), then SessionImported with the row fields of the source
entry, saved in one transaction. Timestamps never go backwards within a stream, so
``audit state --at`` works on imported history too (a batch is cut at the instant).

Re-importing is safe: a key already in the store is skipped and reported, never merged.
A session that cannot be built is reported and skipped; it never stops the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.clock_and_ids import IdSource
from sessionwire.domain.keys import InvalidSessionKey, KeyRules, agent_id_of
from sessionwire.domain.session import InvalidPatch, Session, validate_patch
from sessionwire.domain.transcript import MAX_MESSAGE_BYTES, TranscriptMessage

log = library_logger("sessionwire.import")

# Messages per MessagesAppended event of an imported transcript.
IMPORT_BATCH = 1_000

# Source entry fields that pass through sessions.patch validation (entry name, patch name).
_PATCHED = (
    ("label", "label"),
    ("model", "model"),
    ("thinking_level", "thinkingLevel"),
    ("verbose_level", "verboseLevel"),
    ("send_policy", "sendPolicy"),
)


class Problem(BaseModel):
    """Something in the source that was not imported, and why."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    file: str
    line: int
    """1-based line number; 0 for a problem with the whole file or entry."""
    reason: str


@dataclass(slots=True)
class SourceMessage:
    message: TranscriptMessage
    file: str
    line: int
    fits: bool = False
    """The reader knows the message's JSON is within MAX_MESSAGE_BYTES (its line was short
    enough); otherwise the import serialises it to measure."""


@dataclass
class SourceSession:
    """One session as another system recorded it, already parsed."""

    key: str
    agent_id: str
    session_id: str
    updated_at: datetime
    file: str
    spawned_by: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    messages: list[SourceMessage] = field(default_factory=list)


class ImportReport(BaseModel):
    imported: list[str] = []
    skipped: list[str] = []
    """Keys already in the store: left as they were."""
    messages: int = 0
    problems: list[Problem] = []


def import_sessions(
    store: EventSourcedStore,
    rules: KeyRules,
    ids: IdSource,
    sessions: list[SourceSession],
    *,
    source: str,
    problems: list[Problem] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Record ``sessions`` as events; a key seen twice keeps the newer entry (OpenClaw's rule).
    ``progress`` is told how many of the sessions' messages have been dealt with so far."""
    report = ImportReport(problems=list(problems or []))
    newest: dict[str, SourceSession] = {}
    for item in sessions:
        try:
            key = rules.canonical(item.key, agent_id=item.agent_id)
        except InvalidSessionKey as error:
            report.problems.append(Problem(file=item.file, line=0, reason=f"{item.key!r}: {error}"))
            continue
        kept = newest.get(key)
        if kept is None or item.updated_at > kept.updated_at:
            newest[key] = item
    done = 0

    def dealt_with(count: int) -> None:
        if progress is not None:
            progress(done + count)

    for key, item in sorted(newest.items(), key=lambda pair: pair[1].updated_at):
        _import_session(store, rules, ids, key, item, source, report, dealt_with)
        done += len(item.messages)  # imported, skipped or refused: dealt with
        dealt_with(0)
    return report


def _import_session(
    store: EventSourcedStore,
    rules: KeyRules,
    ids: IdSource,
    key: str,
    item: SourceSession,
    source: str,
    report: ImportReport,
    dealt_with: Callable[[int], None],
) -> None:
    if store.session(key) is not None:
        report.skipped.append(key)
        return
    try:
        session = _session(store, rules, ids, key, item, source, report, dealt_with)
    except (ValueError, OverflowError) as error:
        # A value the reader let through but the session refuses: this session is
        # reported and left out, the others are still imported.
        report.problems.append(Problem(file=item.file, line=0, reason=f"{key}: {error}"))
        return
    store.save(session)
    report.imported.append(key)
    report.messages += session.state.message_count
    log.info("session imported", session_key=key, messages=session.state.message_count)


def _session(
    store: EventSourcedStore,
    rules: KeyRules,
    ids: IdSource,
    key: str,
    item: SourceSession,
    source: str,
    report: ImportReport,
    dealt_with: Callable[[int], None],
) -> Session:
    first = item.messages[0].message.timestamp if item.messages else None
    opened_at = _at(first) if first is not None else item.updated_at
    opened_at = min(opened_at, item.updated_at)
    spawned_by = None
    if item.spawned_by:
        try:
            spawned_by = rules.canonical(item.spawned_by, agent_id=item.agent_id)
        except InvalidSessionKey:
            report.problems.append(
                Problem(file=item.file, line=0, reason=f"{key}: bad spawnedBy {item.spawned_by!r}")
            )
    session = Session.open(
        key=key,
        session_id=_session_id(item.session_id, ids, report, item.file),
        agent_id=agent_id_of(key),
        spawned_by=spawned_by,
        at=opened_at,
    )
    moment = opened_at
    batch: list[TranscriptMessage] = []

    def append(dealt: int) -> None:
        nonlocal moment, batch
        # A stream's time never goes backwards, even where the source's clock did: the
        # batch is at its latest message's time, or the previous batch's if later.
        moment = max(moment, _at(max(map(_timestamp, batch))))
        session.append_messages(batch, at=moment)
        batch = []
        dealt_with(dealt)

    for index, source_message in enumerate(item.messages, start=1):
        message = source_message.message
        if not source_message.fits and len(message.to_json().encode()) > MAX_MESSAGE_BYTES:
            report.problems.append(
                Problem(
                    file=source_message.file,
                    line=source_message.line,
                    reason=f"message larger than {MAX_MESSAGE_BYTES} bytes",
                )
            )
            continue
        batch.append(message)
        if len(batch) == IMPORT_BATCH:
            append(index)
    if batch:
        append(len(item.messages))
    fields = _checked_fields(store, key, item, report)
    session.import_fields(fields, source=source, at=max(moment, item.updated_at))
    return session


def _checked_fields(
    store: EventSourcedStore, key: str, item: SourceSession, report: ImportReport
) -> dict[str, Any]:
    fields = dict(item.fields)
    for name, patch_name in _PATCHED:
        value = fields.get(name)
        if value is None:
            continue
        try:
            checked = validate_patch({patch_name: value})[patch_name]
        except InvalidPatch as error:
            report.problems.append(Problem(file=item.file, line=0, reason=f"{key}: {error}"))
            del fields[name]
            continue
        fields[name] = checked
    label = fields.get("label")
    if label is not None and any(s.state.key != key for s in store.sessions_by_label(label)):
        report.problems.append(
            Problem(file=item.file, line=0, reason=f"{key}: label already in use: {label}")
        )
        del fields["label"]
    return fields


_timestamp = attrgetter("timestamp")


def _at(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def _session_id(text: str, ids: IdSource, report: ImportReport, file: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        # OpenClaw's sessionIds are UUIDs; the report keeps the original text.
        report.problems.append(
            Problem(file=file, line=0, reason=f"sessionId {text!r} is not a UUID; a new one given")
        )
        return ids.new_id()
