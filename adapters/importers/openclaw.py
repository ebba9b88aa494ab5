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

The directory is untrusted input. Nothing outside it is read: a ``sessionFile`` path, a
``sessionId`` with ``../`` in it, or a symlink that leads elsewhere is reported and not
followed. Files, lines and JSON nesting are bounded (MAX_FILE_BYTES, MAX_LINE_BYTES,
MAX_DEPTH) and so are timestamps, so one oversized, deeply nested or out-of-range line is
one problem, never a traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator, core_schema
from sessionwire.adapters.importers.history_import import (
    Problem,
    SourceMessage,
    SourceSession,
)
from sessionwire.application.tools.params import friendly
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.transcript import (
    MAX_MESSAGE_BYTES,
    ROLES,
    TranscriptMessage,
    content_blocks,
)

STORE_FILE = "sessions.json"
AGENT_DATABASE = "openclaw-agent.sqlite"
# Bounds on what one import reads (docs/security.md, "Importing from OpenClaw").
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = MAX_MESSAGE_BYTES + 64 * 1024  # a largest message and its line's framing
MAX_DEPTH = 64
# Transcript lines whose messages are validated together (TranscriptLines).
CHECK_BATCH = 1_000
# Milliseconds since 1970 up to the end of year 9999: what a datetime can hold.
MAX_MILLIS = 253_402_300_799_999

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
_MESSAGES = TypeAdapter(list[TranscriptMessage])


@cache
def _line_validator() -> SchemaValidator:
    """A transcript line that holds a message: its ``message`` validated, its other
    fields ignored (_one_pass). Built on first use, as the models are."""
    TranscriptMessage.model_rebuild()
    message = TranscriptMessage.__pydantic_core_schema__
    fields = {"message": core_schema.typed_dict_field(message)}
    return SchemaValidator(core_schema.typed_dict_schema(fields, extra_behavior="ignore"))


LinesRead = Callable[[int], None]
"""Told how many more transcript lines (messages and problems) have been read."""


class Outside(SessionwireError, ValueError):
    """A path that leads out of the imported directory."""


def inside(root: Path, path: Path) -> Path:
    """``path`` with every symlink resolved, when it stays under ``root``; else Outside."""
    real = path.resolve()
    if not real.is_relative_to(root.resolve()):
        raise Outside(f"{path} leads outside {root}")
    return real


def read_state_dir(
    root: Path, *, progress: LinesRead | None = None
) -> tuple[list[SourceSession], list[Problem]]:
    """Every session of every store under ``root`` (both layouts), with the problems met;
    ``progress`` is told of transcript lines as they are read."""
    sessions: list[SourceSession] = []
    problems: list[Problem] = []
    for path in _files(root, {STORE_FILE, AGENT_DATABASE}):
        try:
            inside(root, path)
        except Outside as error:
            problems.append(Problem(file=str(path), line=0, reason=f"not read: {error}"))
            continue
        if path.name == STORE_FILE:
            read, found = read_store(
                path, agent_id=_agent_of(path, root), root=root, progress=progress
            )
        else:
            read, found = read_agent_database(
                path, agent_id=_agent_of(path, root), root=root, progress=progress
            )
        sessions.extend(read)
        problems.extend(found)
    return sessions, problems


def _files(root: Path, names: set[str]) -> list[Path]:
    # os.walk does not descend into symlinked directories; a symlinked file is checked
    # by the caller like any other path.
    found = [
        Path(folder) / name
        for folder, _, files in os.walk(root, followlinks=False)
        for name in files
        if name in names
    ]
    return sorted(found)


def _agent_of(store: Path, root: Path) -> str:
    parts = store.relative_to(root).parts
    # agents/<agentId>/sessions/sessions.json or agents/<agentId>/agent/openclaw-agent.sqlite
    if len(parts) >= 4 and parts[-4] == "agents" and parts[-2] in ("sessions", "agent"):
        return parts[-3]
    return "main"


def _too_big(path: Path) -> str | None:
    try:
        size = path.stat().st_size
    except OSError as error:
        return f"unreadable: {error.strerror}"
    if size > MAX_FILE_BYTES:
        return f"{size} bytes, more than the {MAX_FILE_BYTES} an import reads"
    return None


def read_store(
    store: Path, *, agent_id: str, root: Path | None = None, progress: LinesRead | None = None
) -> tuple[list[SourceSession], list[Problem]]:
    problems: list[Problem] = []
    root = root or store.parent
    refused = _too_big(store)
    if refused:
        return [], [Problem(file=str(store), line=0, reason=f"store not read: {refused}")]
    try:
        data = parse_json(store.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        return [], [Problem(file=str(store), line=error.lineno, reason=f"not JSON: {error.msg}")]
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return [], [Problem(file=str(store), line=0, reason=f"unreadable store: {error}")]
    if not isinstance(data, dict):
        return [], [Problem(file=str(store), line=0, reason="a store must be a JSON object")]
    sessions = []
    for key, entry in data.items():
        session = _session(store, agent_id, key, entry, problems)
        if session is None:
            continue
        transcript = _transcript_path(store, entry, session.session_id)
        try:
            transcript = inside(root, transcript)
        except Outside as error:
            problems.append(
                Problem(file=str(store), line=0, reason=f"entry {key!r}: transcript {error}")
            )
        else:
            if transcript.is_file():
                session.messages = read_transcript(transcript, problems, progress=progress)
        sessions.append(session)
    return sessions, problems


def parse_json(text: str | bytes) -> Any:
    """JSON nested at most MAX_DEPTH deep; ValueError otherwise (never a RecursionError)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    # Each level of nesting opens with a bracket: text with few of them (a transcript
    # line, nearly always) cannot be nested too deep, and is not walked.
    if _brackets(text) > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _brackets(text: str | bytes) -> int:
    """How many ``{`` and ``[`` the text holds: at least how deep it can nest."""
    if isinstance(text, str):
        return text.count("{") + text.count("[")
    return text.count(b"{") + text.count(b"[")


def _depth(value: Any) -> int:
    # Only containers are queued: a transcript line is mostly strings, and this runs for
    # every line of an import.
    containers = (dict, list)
    if not isinstance(value, containers):
        return 0
    deepest = 0
    todo = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if level > deepest:
            deepest = level
            if level > MAX_DEPTH:
                return level
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, containers):
                todo.append((child, level + 1))
    return deepest


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
    if _is_millis(updated):
        updated_ms = updated
    else:
        problem("no updatedAt (milliseconds since 1970); the import time is used")
        updated_ms = int(datetime.now(tz=UTC).timestamp() * 1000)
    spawned_by = entry.get("spawnedBy")
    return SourceSession(
        key=key,
        agent_id=agent_id,
        session_id=session_id.strip(),
        updated_at=datetime.fromtimestamp(updated_ms / 1000, tz=UTC),
        file=str(store),
        spawned_by=spawned_by if isinstance(spawned_by, str) else None,
        fields=_fields(entry),
    )


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_millis(value: Any) -> TypeGuard[int]:
    return _is_count(value) and value <= MAX_MILLIS


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


def read_transcript(
    path: Path, problems: list[Problem], *, progress: LinesRead | None = None
) -> list[SourceMessage]:
    refused = _too_big(path)
    if refused:
        problems.append(Problem(file=str(path), line=0, reason=f"transcript not read: {refused}"))
        return []
    lines = TranscriptLines(str(path), problems, progress=progress)
    try:
        with path.open("rb") as file:
            for number, raw in _bounded_lines(file):
                if raw is None:
                    lines.problem(number, f"line longer than {MAX_LINE_BYTES} bytes")
                    continue
                lines.add(number, raw)
    except OSError as error:
        lines.problem(0, f"unreadable: {error.strerror}")
    return lines.finish()


class TranscriptLines:
    """The messages on a transcript's lines, or the problem with each line, in line order.

    A line is first read in one pass (``_one_pass``: parsed and validated by pydantic
    from its text). A line that pass refuses is parsed and checked on its own
    (``_message_data``), which finds the reason, and its message validated with the
    others of the batch of CHECK_BATCH lines in one pydantic call; a batch that fails is
    validated again line by line, so a bad message is reported on its own line with the
    reason a single check gives."""

    def __init__(
        self, file: str, problems: list[Problem], *, progress: LinesRead | None = None
    ) -> None:
        self.file = file
        self.problems = problems
        self.progress = progress
        self.messages: list[SourceMessage] = []
        # (line, its message, or its fields to validate, or the problem's reason; whether
        # its JSON surely fits)
        self._pending: list[tuple[int, TranscriptMessage | dict[str, Any] | str, bool]] = []

    def add(self, number: int, line: str | bytes) -> None:
        """The message on one line (none on a blank line or one without a message); a
        line read from a file comes as bytes, decoded (bad UTF-8 replaced) only if the
        one pass refuses it: that pass takes valid UTF-8 alone."""
        # A character of the line (a byte is at least one) is at most 6 bytes of the
        # message's JSON (an escape), and what the reader adds (content block, timestamp)
        # is small: only a message that could be too large is serialised to be measured.
        fits = 6 * len(line) + 4096 <= MAX_MESSAGE_BYTES
        found: TranscriptMessage | dict[str, Any] | None = _one_pass(line)
        if found is None:
            text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
            if not text or text.isspace():
                return
            try:
                found = _message_data(text)
            except ValueError as error:
                self.problem(number, str(error))
                return
            if found is None:
                return
        self._pending.append((number, found, fits))
        if len(self._pending) >= CHECK_BATCH:
            self._flush()

    def problem(self, number: int, reason: str) -> None:
        self._pending.append((number, reason, True))

    def finish(self) -> list[SourceMessage]:
        self._flush()
        return self.messages

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if self.progress is not None:
            self.progress(len(pending))
        rows = [found for _, found, _ in pending if type(found) is dict]
        checked: Iterator[TranscriptMessage] | None = iter(())
        if rows:
            try:
                checked = iter(_MESSAGES.validate_python(rows))
            except ValidationError:
                checked = None  # each line alone, below: its own error
        for number, found, fits in pending:
            if isinstance(found, str):
                self.problems.append(Problem(file=self.file, line=number, reason=found))
                continue
            if isinstance(found, TranscriptMessage):
                message = found
            elif checked is not None:
                message = next(checked)
            else:
                try:
                    message = TranscriptMessage.model_validate(found)
                except ValidationError as error:
                    reason = f"invalid message: {friendly(error)}"
                    self.problems.append(Problem(file=self.file, line=number, reason=reason))
                    continue
            self.messages.append(
                SourceMessage(message=message, file=self.file, line=number, fits=fits)
            )


def _bounded_lines(file: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """(number, bytes) per line, or (number, None) for a line over MAX_LINE_BYTES, which
    is skipped without being held in memory."""
    number = 0
    while True:
        line = file.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) <= MAX_LINE_BYTES:
            yield number, line
            continue
        while line and not line.endswith(b"\n"):
            line = file.readline(MAX_LINE_BYTES)
        yield number, None


def read_agent_database(
    path: Path, *, agent_id: str, root: Path | None = None, progress: LinesRead | None = None
) -> tuple[list[SourceSession], list[Problem]]:
    """Sessions of a newer OpenClaw's per-agent SQLite database (AGENT_DATABASE).

    Its ``session_entries`` rows hold the same entry JSON as ``sessions.json`` (keyed by
    session key) and ``transcript_events`` the transcript, one row per JSONL record in
    ``event_json``, ordered by ``seq`` (OpenClaw's src/state/openclaw-agent-schema.sql).
    A problem in a transcript row names ``<database>:transcript_events:<sessionId>`` as
    its file and the row's ``seq`` as its line.
    """
    # The file (and the write-ahead log SQLite would read with it) is bounded as every
    # other file an import reads: a database was read whatever its size.
    for part in (path, path.with_name(path.name + "-wal")):
        refused = _too_big(part) if part.exists() else None
        if refused:
            return [], [Problem(file=str(part), line=0, reason=f"database not read: {refused}")]
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        return [], [Problem(file=str(path), line=0, reason=f"unreadable database: {error}")]
    try:
        # A crafted database's views and triggers never run: only its two tables are read.
        connection.execute("PRAGMA trusted_schema = OFF")
        tables: dict[str, str | None] = dict(
            connection.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                "AND name IN ('session_entries', 'transcript_events')"
            )
        )
        if set(tables) != {"session_entries", "transcript_events"}:
            return [], [
                Problem(
                    file=str(path),
                    line=0,
                    reason="not an OpenClaw agent database: no session_entries and "
                    "transcript_events tables",
                )
            ]
        refused = _computed_columns(connection, tables)
        if refused:
            return [], [Problem(file=str(path), line=0, reason=f"database not read: {refused}")]
        return _database_sessions(connection, path, agent_id, progress)
    except sqlite3.Error as error:
        return [], [Problem(file=str(path), line=0, reason=f"unreadable database: {error}")]
    finally:
        connection.close()


def _computed_columns(connection: sqlite3.Connection, tables: dict[str, str | None]) -> str | None:
    """Why the two tables cannot be read as plain stored rows, or None.

    ``trusted_schema = OFF`` stops views, triggers and SQL functions in the schema, not a
    generated column: reading one evaluates its expression (a crafted 12 KB file took
    a gigabyte that way), and so does measuring it. OpenClaw's tables have none, and
    no hidden column either (``PRAGMA table_xinfo``: 1 hidden in a virtual table, 2
    and 3 generated), nor are they virtual tables (whose module computes every value)."""
    for table, sql in sorted(tables.items()):
        if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
            return f"{table} is a virtual table, not OpenClaw's"
        for column in connection.execute(f"PRAGMA table_xinfo({table})"):
            name, hidden = column[1], column[6]
            if hidden:
                kind = "hidden" if hidden == 1 else "generated"
                return f"{table}.{name} is a {kind} column, not OpenClaw's"
    return None


# Longer texts are not fetched: SQLite measures them, Python never holds them.
_BOUNDED = "CASE WHEN length(CAST({0} AS BLOB)) > {1} THEN NULL ELSE {0} END"
# A session key or id longer than this is no OpenClaw one (it is not fetched).
MAX_KEY_BYTES = 4096


def _database_sessions(
    connection: sqlite3.Connection, path: Path, agent_id: str, progress: LinesRead | None
) -> tuple[list[SourceSession], list[Problem]]:
    problems: list[Problem] = []
    sessions: list[SourceSession] = []
    # Each value bounded before Python holds it, and the rows iterated, not fetched all
    # at once: what a row costs is one row's.
    rows = connection.execute(
        f"SELECT {_BOUNDED.format('session_key', MAX_KEY_BYTES)}, "
        f"{_BOUNDED.format('session_id', MAX_KEY_BYTES)}, "
        f"{_BOUNDED.format('entry_json', MAX_LINE_BYTES)}, "
        "CASE WHEN typeof(updated_at) = 'integer' THEN updated_at END "
        "FROM session_entries ORDER BY session_key"
    )
    for key, session_id, entry_json, updated_at in rows:
        if not isinstance(key, str) or not isinstance(session_id, str):
            problems.append(
                Problem(
                    file=str(path),
                    line=0,
                    reason=f"a row without its keys (text of at most {MAX_KEY_BYTES} bytes)",
                )
            )
            continue
        try:
            if entry_json is None:
                raise ValueError(f"entry longer than {MAX_LINE_BYTES} bytes")
            entry = parse_json(entry_json)
        except ValueError as error:
            problems.append(Problem(file=str(path), line=0, reason=f"entry {key!r}: {error}"))
            continue
        if isinstance(entry, dict):
            # The row's columns are OpenClaw's own record of these two.
            entry = {**entry, "sessionId": session_id}
            if _is_millis(updated_at) and not _is_millis(entry.get("updatedAt")):
                entry["updatedAt"] = updated_at
        session = _session(path, agent_id, key, entry, problems)
        if session is None:
            continue
        session.messages = _database_transcript(connection, path, session_id, problems, progress)
        sessions.append(session)
    return sessions, problems


def _database_transcript(
    connection: sqlite3.Connection,
    path: Path,
    session_id: str,
    problems: list[Problem],
    progress: LinesRead | None,
) -> list[SourceMessage]:
    where = f"{path}:transcript_events:{session_id}"
    lines = TranscriptLines(where, problems, progress=progress)
    rows = connection.execute(
        "SELECT CASE WHEN typeof(seq) = 'integer' THEN seq END, "
        f"{_BOUNDED.format('event_json', MAX_LINE_BYTES)} FROM transcript_events "
        "WHERE session_id = ? ORDER BY seq",
        (session_id,),
    )
    for seq, text in rows:
        if not isinstance(seq, int):
            lines.problem(0, "a seq that is not an integer")
            continue
        if text is None:
            lines.problem(seq, f"event longer than {MAX_LINE_BYTES} bytes")
            continue
        lines.add(seq, str(text))
    return lines.finish()


def _one_pass(text: str | bytes) -> TranscriptMessage | None:
    """The message on a line, parsed and validated from its text in one pydantic call,
    when that gives exactly what ``_message_data`` and validation give; else None.

    Strict JSON validation takes a line only when json.loads would parse it to the same
    values (it refuses what json.loads refuses, and more: lone surrogates, integers over
    4,300 digits) and only a ``message`` object whose role, integer timestamp and list of
    content blocks pass as they are, with no conversion; the line's other fields are not
    read. Everything else (string content, a missing or out-of-range timestamp, a line
    that may be nested too deep, any error) goes the checked way, which gives the reason.
    tests/unit/test_openclaw_lines.py holds the two ways to the same results."""
    if _brackets(text) > MAX_DEPTH:
        return None  # may be nested too deep: parse_json walks it
    try:
        message: TranscriptMessage = _line_validator().validate_json(text, strict=True)["message"]
    except ValueError:  # a ValidationError, or JSON pydantic cannot read
        return None
    return message if message.timestamp <= MAX_MILLIS else None


def _message_data(text: str) -> dict[str, Any] | None:
    """The fields of the message on one transcript line, checked as far as they can be
    before validation (role, timestamp, content blocks); None for a line that holds none.
    The line was just parsed: its objects are changed in place, never copied."""
    try:
        line = parse_json(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(line, dict):
        raise ValueError("a transcript line must be a JSON object")
    if "message" not in line:
        return None  # a header or a metadata line: nothing to import
    data = line["message"]
    if not isinstance(data, dict):
        raise ValueError("'message' is not an object")
    role = data.get("role")
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    stamp = data.get("timestamp")
    if type(stamp) is not int or not 0 <= stamp <= MAX_MILLIS:
        if _is_count(stamp) and not _is_millis(stamp):
            raise ValueError(f"timestamp {stamp} is out of range")
        if not _is_millis(stamp):
            data["timestamp"] = _line_time(line.get("timestamp"))
    content = data.get("content", [])
    if type(content) is list and all(type(block) is dict for block in content):
        data["content"] = content
    else:
        data["content"] = content_blocks(content)
    return data


def _line_time(value: Any) -> int:
    if _is_millis(value):
        return int(value)
    if _is_count(value):
        raise ValueError(f"timestamp {value} is out of range")
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            millis = int(moment.timestamp() * 1000)
        except (ValueError, OverflowError):
            raise ValueError(f"timestamp {value[:40]!r} is not ISO 8601") from None
        if not 0 <= millis <= MAX_MILLIS:
            raise ValueError(f"timestamp {value[:40]!r} is out of range")
        return millis
    raise ValueError("the message has no timestamp")
