"""Reading an OpenClaw state directory: ``sessions.json`` stores and their transcripts.

Layout (openclaw-behaviour.md §2.3, §4, §5): each agent has a store
``agents/<agentId>/sessions/sessions.json`` mapping session keys to entries (sessionId,
updatedAt, label, displayName, channel, lastChannel/lastTo/lastAccountId or a
deliveryContext, model, token counts, levels, sendPolicy, spawnedBy); the transcript of
an entry is ``<sessionId>.jsonl`` beside the store, one JSON object per line whose
``message`` field is a raw transcript message ({role, content, timestamp, ...}). Lines
without a ``message`` (the session header, model changes) carry no message and are
passed over. A store elsewhere in the directory belongs to agent ``main``.

Malformed stores, entries and lines are reported (file, line, reason) and skipped; they
never stop the rest of the import.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sessionwire.application.audit.history_import import (
    Problem,
    SourceMessage,
    SourceSession,
)
from sessionwire.application.tools.params import friendly
from sessionwire.domain.transcript import ROLES, TranscriptMessage, content_blocks

STORE_FILE = "sessions.json"

# Entry field -> row field, for plain values of the given type.
_TEXT_FIELDS = {
    "label": "label",
    "displayName": "display_name",
    "channel": "channel",
    "chatType": "chat_type",
    "lastChannel": "last_channel",
    "lastTo": "last_to",
    "lastAccountId": "last_account_id",
    "model": "model",
    "thinkingLevel": "thinking_level",
    "verboseLevel": "verbose_level",
    "sendPolicy": "send_policy",
}
_COUNT_FIELDS = {
    "contextTokens": "context_tokens",
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
}
_FLAG_FIELDS = {"systemSent": "system_sent", "abortedLastRun": "aborted_last_run"}
_CHAT_TYPES = {"direct": "direct", "dm": "direct", "group": "group", "channel": "channel"}


def read_state_dir(root: Path) -> tuple[list[SourceSession], list[Problem]]:
    """Every session of every store under ``root``, with the problems met on the way."""
    sessions: list[SourceSession] = []
    problems: list[Problem] = []
    for store in sorted(root.rglob(STORE_FILE)):
        read, found = read_store(store, agent_id=_agent_of(store, root))
        sessions.extend(read)
        problems.extend(found)
    return sessions, problems


def _agent_of(store: Path, root: Path) -> str:
    parts = store.relative_to(root).parts
    # agents/<agentId>/sessions/sessions.json
    if len(parts) >= 4 and parts[-4] == "agents" and parts[-2] == "sessions":
        return parts[-3]
    return "main"


def read_store(store: Path, *, agent_id: str) -> tuple[list[SourceSession], list[Problem]]:
    problems: list[Problem] = []
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return [], [Problem(file=str(store), line=0, reason=f"unreadable store: {error}")]
    if not isinstance(data, dict):
        return [], [Problem(file=str(store), line=0, reason="a store must be a JSON object")]
    sessions = []
    for key, entry in data.items():
        session = _session(store, agent_id, key, entry, problems)
        if session is not None:
            sessions.append(session)
    return sessions, problems


def _session(
    store: Path, agent_id: str, key: str, entry: Any, problems: list[Problem]
) -> SourceSession | None:
    def problem(reason: str) -> None:
        problems.append(Problem(file=str(store), line=0, reason=f"entry {key!r}: {reason}"))

    if not isinstance(entry, dict):
        problem("not an object")
        return None
    session_id = entry.get("sessionId")
    if not isinstance(session_id, str) or not session_id.strip():
        problem("no sessionId")
        return None
    updated = entry.get("updatedAt")
    if isinstance(updated, int) and _is_count(updated):
        updated_ms = updated
    else:
        problem("no updatedAt (milliseconds); the import time is used")
        updated_ms = int(datetime.now(tz=UTC).timestamp() * 1000)
    spawned_by = entry.get("spawnedBy")
    session = SourceSession(
        key=key,
        agent_id=agent_id,
        session_id=session_id.strip(),
        updated_at=datetime.fromtimestamp(updated_ms / 1000, tz=UTC),
        file=str(store),
        spawned_by=spawned_by if isinstance(spawned_by, str) else None,
        fields=_fields(entry),
    )
    transcript = _transcript_path(store, entry, session.session_id)
    if transcript.is_file():
        session.messages = read_transcript(transcript, problems)
    return session


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fields(entry: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, row_name in _TEXT_FIELDS.items():
        value = entry.get(name)
        if isinstance(value, str) and value.strip():
            fields[row_name] = value.strip()
    context = entry.get("deliveryContext")
    if isinstance(context, dict):  # newer stores: the delivery context wins (§4)
        for name, row_name in (
            ("channel", "last_channel"),
            ("to", "last_to"),
            ("accountId", "last_account_id"),
        ):
            value = context.get(name)
            if isinstance(value, str) and value.strip():
                fields[row_name] = value.strip()
    chat_type = _CHAT_TYPES.get(str(fields.get("chat_type", "")).lower())
    fields.pop("chat_type", None)
    if chat_type:
        fields["chat_type"] = chat_type
    for name, row_name in _COUNT_FIELDS.items():
        if _is_count(entry.get(name)):
            fields[row_name] = entry[name]
    for name, row_name in _FLAG_FIELDS.items():
        if isinstance(entry.get(name), bool):
            fields[row_name] = entry[name]
    return fields


def _transcript_path(store: Path, entry: dict[str, Any], session_id: str) -> Path:
    named = entry.get("sessionFile")
    if isinstance(named, str) and named.strip():
        path = Path(named)
        return path if path.is_absolute() else store.parent / path
    return store.parent / f"{session_id}.jsonl"


def read_transcript(path: Path, problems: list[Problem]) -> list[SourceMessage]:
    messages: list[SourceMessage] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        problems.append(Problem(file=str(path), line=0, reason=f"unreadable: {error.strerror}"))
        return messages
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            message = _message(text)
        except ValueError as error:
            problems.append(Problem(file=str(path), line=number, reason=str(error)))
            continue
        if message is not None:
            messages.append(SourceMessage(message=message, file=str(path), line=number))
    return messages


def _message(text: str) -> TranscriptMessage | None:
    """The message on one transcript line, None for a line that holds none."""
    try:
        line = json.loads(text)
    except ValueError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(line, dict):
        raise ValueError("a transcript line must be a JSON object")
    if "message" not in line:
        return None  # a header or a metadata line: nothing to import
    raw = line["message"]
    if not isinstance(raw, dict):
        raise ValueError("'message' is not an object")
    role = raw.get("role")
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    data = dict(raw)
    if "timestamp" not in data or not _is_count(data["timestamp"]):
        data["timestamp"] = _line_time(line.get("timestamp"))
    try:
        data["content"] = content_blocks(data.get("content", []))
        return TranscriptMessage.model_validate(data)
    except ValidationError as error:
        raise ValueError(f"invalid message: {friendly(error)}") from None


def _line_time(value: Any) -> int:
    if _is_count(value):
        return int(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"timestamp {value!r} is not ISO 8601") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    raise ValueError("the message has no timestamp")
