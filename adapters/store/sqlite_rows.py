"""Writing storage-v3 rows on SQLite (ADR 0036): each event in one INSERT with its chain
link and its history columns. Shared by the writer thread and the caller-connection path."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from sessionwire.adapters.store import sqlite_format
from sessionwire.adapters.store.serialisation import (
    MESSAGE_BODY_OFFSET,
    StoredMessage,
    is_message_first,
)
from sessionwire.domain.hash_chain import ChainLink, is_batch


def insert_rows(
    cursor: Any, stored_events: Sequence[StoredEvent], links: Sequence[ChainLink]
) -> None:
    """The v3 rows of events whose links (positions and hashes) are made."""
    for stored, link in zip(stored_events, links, strict=True):
        cursor.execute(
            sqlite_format.INSERT_EVENT,
            (
                link.notification_id,
                stored.originator_id.hex
                if isinstance(stored.originator_id, UUID)
                else stored.originator_id,
                stored.originator_version,
                stored.topic,
                stored.state,
                *history_columns(stored),
                link.stream_hash,
                link.log_hash,
                link.log_seq,
            ),
        )


History = tuple[str | None, int | None, int | None]
"""(role, body, provenance) columns of a row."""


def history_columns(stored: StoredEvent) -> History:
    """A record's history columns: a message's role and the lengths of its message and
    provenance JSON; a batch's marker."""
    if isinstance(stored, StoredMessage):
        return stored.role, stored.body or None, stored.provenance
    if is_batch(stored.topic):
        return sqlite_format.BATCH_ROLE, None, None
    return None, None, None


def history_columns_of(topic: str, state: bytes) -> History:
    """A record's history columns read back from its bytes (an import): what
    ``history_columns`` gave it when it was written."""
    if is_batch(topic):
        return sqlite_format.BATCH_ROLE, None, None
    if is_message_first(topic):
        text = state.decode()
        decoder = json.JSONDecoder()
        line, end = decoder.raw_decode(text, MESSAGE_BODY_OFFSET)
        body = len(text[MESSAGE_BODY_OFFSET:end].encode())
        marker = ',"provenance":'
        provenance = None
        if text.startswith(marker, end):
            _, stop = decoder.raw_decode(text, end + len(marker))
            provenance = len(text[end + len(marker) : stop].encode())
        return str(line.get("role", "")), body, provenance
    if topic == sqlite_format.MESSAGE_TOPIC:
        message = json.loads(state).get("message") or {}
        return str(message.get("role", "")), None, None
    return None, None, None
