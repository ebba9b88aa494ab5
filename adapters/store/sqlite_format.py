"""Storage v3 on SQLite (ADR 0036): each message stored once, its chain hashes beside it.

The event row is the transcript row and the chain row:

- ``stored_events`` (eventsourcing's table, kept so its reads still work) gains
  ``role``, ``body`` and ``provenance`` (a message's role, the length of its message's
  JSON at the start of ``state`` and of the provenance after it: ``sessions_history``
  reads the line as slices of the stored bytes)
  and ``stream_hash``, ``log_hash``, ``log_seq`` (ADR 0016's chain, in the row it covers);
- ``sw_chain`` is a view over those columns, so the audit queries read as before; its
  INSTEAD OF triggers turn a write to it (an import's links) into an UPDATE of the row;
- ``sw_transcript`` is a view whose INSTEAD OF INSERT trigger refuses with a clear error:
  a gateway of the v2 code that opens the upgraded file fails on its first message.

A session row keeps the fields a message changes in columns of their own (an append is a
narrow UPDATE of those that changed); its ``state`` JSON holds the others.

A v2 file upgrades in place when a v3 store opens it (``upgrade``): the columns are added,
filled from ``sw_chain`` and the events' own bytes in batches by position, each committed
with the position reached (``sw_format``), so a crash resumes where it stopped; then the
session rows' fields move to their columns and the old tables are dropped, in one
transaction. No stored event byte and no hash changes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from sessionwire.adapters.store.read_models import HOT_COLUMNS, HOT_TYPES, ROW_FIELDS
from sessionwire.domain.hash_chain import BATCH_CODE, BATCH_TOPIC

FORMAT = 3
BATCH_ROLE = "*"
"""The role column of a batch of messages (its lines' roles are inside it)."""
UPGRADE_BATCH = 5_000
MESSAGE_TOPIC = "sessionwire.domain.session:Session.MessageAppended"

V3_COLUMNS = (
    ("role", "TEXT"),
    ("body", "INTEGER"),
    ("provenance", "INTEGER"),
    ("stream_hash", "BLOB"),
    ("log_hash", "BLOB"),
    ("log_seq", "INTEGER"),
)

INSERT_EVENT = (
    "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state, "
    "role, body, provenance, stream_hash, log_hash, log_seq) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""A v3 row: the event, its history columns and its chain link, in one statement."""

REFUSE_OLD = "this store is storage v3 (ADR 0036); open it with a sessionwire that reads v3"


def create_statements() -> list[str]:
    """A new store's events table, in its v3 shape (the read models come after)."""
    columns = ", ".join(f"{name} {kind}" for name, kind in V3_COLUMNS)
    return [
        "CREATE TABLE IF NOT EXISTS stored_events (originator_id TEXT, "
        f"originator_version INTEGER, topic TEXT, state BLOB, {columns}, "
        "PRIMARY KEY (originator_id, originator_version))",
    ]


def finish_statements() -> list[str]:
    """Views, triggers and the index that make a v3 store (idempotent)."""
    return [
        # Named as v2's index on the chain's log_seq, which it replaces: a v2 gateway
        # opening the file finds it and creates nothing (its CREATE ... IF NOT EXISTS).
        "CREATE UNIQUE INDEX IF NOT EXISTS sw_chain_seq ON stored_events (log_seq) "
        "WHERE log_seq IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS sw_chain_stream ON stored_events (log_seq) "
        "WHERE log_seq IS NULL AND stream_hash IS NOT NULL",
        "CREATE VIEW IF NOT EXISTS sw_chain AS SELECT rowid AS notification_id, "
        "originator_id, originator_version, stream_hash, log_hash, log_seq "
        "FROM stored_events WHERE stream_hash IS NOT NULL",
        "CREATE TRIGGER IF NOT EXISTS sw_chain_insert INSTEAD OF INSERT ON sw_chain BEGIN "
        "UPDATE stored_events SET stream_hash = NEW.stream_hash, log_hash = NEW.log_hash, "
        "log_seq = NEW.log_seq WHERE rowid = NEW.notification_id; END",
        "CREATE TRIGGER IF NOT EXISTS sw_chain_update INSTEAD OF UPDATE ON sw_chain BEGIN "
        "UPDATE stored_events SET stream_hash = NEW.stream_hash, log_hash = NEW.log_hash, "
        "log_seq = NEW.log_seq WHERE rowid = OLD.notification_id; END",
        "CREATE TRIGGER IF NOT EXISTS sw_chain_delete INSTEAD OF DELETE ON sw_chain BEGIN "
        "UPDATE stored_events SET stream_hash = NULL, log_hash = NULL, log_seq = NULL "
        "WHERE rowid = OLD.notification_id; END",
        "CREATE VIEW IF NOT EXISTS sw_transcript AS SELECT originator_id AS session, "
        "originator_version AS seq, role, NULL AS message FROM stored_events WHERE 0",
        "CREATE TRIGGER IF NOT EXISTS sw_transcript_refused INSTEAD OF INSERT ON "
        f"sw_transcript BEGIN SELECT RAISE(ABORT, '{REFUSE_OLD}'); END",
        "CREATE TABLE IF NOT EXISTS sw_format (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        f"INSERT OR REPLACE INTO sw_format (name, value) VALUES ('storage', {FORMAT})",
        "DELETE FROM sw_format WHERE name = 'upgraded_to'",
    ]


def _kind(cursor: Any, name: str) -> str | None:
    cursor.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,))
    found = cursor.fetchone()
    return None if found is None else str(found[0])


def _columns(cursor: Any, table: str) -> set[str]:
    cursor.execute(f"SELECT name FROM pragma_table_info('{table}')")
    return {str(row[0]) for row in cursor.fetchall()}


def needs_upgrade(cursor: Any) -> bool:
    """A v2 file (its chain a table of its own), or a v3 upgrade that stopped midway."""
    return _kind(cursor, "sw_chain") == "table"


Progress = Callable[[str], None]


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def upgrade(
    transaction: Callable[[], Any],
    *,
    progress: Progress = stderr_progress,
    batch: int = UPGRADE_BATCH,
    stop_after: int | None = None,
) -> bool:
    """Upgrade a v2 file to v3 in place, resumably; False if it needed none.

    ``transaction()`` gives a context manager whose cursor commits at its end.
    ``stop_after`` (tests) stops after that many batches, as a crash would."""
    with transaction() as cursor:
        if not needs_upgrade(cursor):
            return False
        present = _columns(cursor, "stored_events")
        for name, kind in V3_COLUMNS:
            if name not in present:
                cursor.execute(f"ALTER TABLE stored_events ADD COLUMN {name} {kind}")
        present = _columns(cursor, "sw_sessions")
        for name in HOT_COLUMNS:
            if name not in present:
                kind = HOT_TYPES.get(name, "TEXT")
                cursor.execute(f"ALTER TABLE sw_sessions ADD COLUMN {name} {kind}")
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS sw_format (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
        )
        cursor.execute("INSERT OR IGNORE INTO sw_format (name, value) VALUES ('upgraded_to', 0)")
        cursor.execute("SELECT value FROM sw_format WHERE name = 'upgraded_to'")
        reached = int(cursor.fetchone()[0])
        cursor.execute("SELECT COALESCE(MAX(rowid), 0) FROM stored_events")
        last = int(cursor.fetchone()[0])
    if reached:
        progress(f"storage v3: resuming the upgrade at event {reached} of {last}")
    else:
        progress(f"storage v3: upgrading {last} events in place (resumable)")
    batches = 0
    while reached < last:
        if stop_after is not None and batches >= stop_after:
            return True
        upto = min(last, reached + batch)
        with transaction() as cursor:
            _fill(cursor, reached, upto)
            cursor.execute("UPDATE sw_format SET value = ? WHERE name = 'upgraded_to'", (upto,))
        reached, batches = upto, batches + 1
        progress(f"storage v3: {reached}/{last} events")
    with transaction() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM sw_chain c LEFT JOIN stored_events e "
            "ON e.rowid = c.notification_id WHERE e.rowid IS NULL"
        )
        orphans = int(cursor.fetchone()[0])
        # The session rows: the fields a message changes move to their columns (ADR 0036).
        extracted = ", ".join(f"{name} = json_extract(state, '$.{name}')" for name in HOT_COLUMNS)
        removed = ", ".join(f"'$.{name}'" for name in sorted(ROW_FIELDS))
        cursor.execute(
            f"UPDATE sw_sessions SET {extracted}, state = json_remove(state, {removed}) "
            "WHERE json_extract(state, '$.updated_at') IS NOT NULL"
        )
        cursor.execute("DROP TABLE sw_chain")
        if _kind(cursor, "sw_transcript") == "table":
            cursor.execute("DROP TABLE sw_transcript")
        for statement in finish_statements():
            cursor.execute(statement)
    if orphans:
        # Chain rows of no event (an edited file): v3 keeps links only on events.
        progress(f"storage v3: {orphans} chain row(s) of no event dropped")
    progress("storage v3: upgrade done; `sessionwire audit verify` checks the result")
    return True


def _fill(cursor: Any, after: int, upto: int) -> None:
    """Move the chain links and the history columns into events ``after < rowid <= upto``."""
    cursor.execute(
        "UPDATE stored_events SET stream_hash = c.stream_hash, log_hash = c.log_hash, "
        "log_seq = c.log_seq FROM sw_chain c WHERE c.notification_id = stored_events.rowid "
        "AND stored_events.rowid > ? AND stored_events.rowid <= ?",
        (after, upto),
    )
    # A v2 message keeps its layout (its bytes are hashed): only its role is a column;
    # its line is made from the event when read (body stays NULL).
    cursor.execute(
        "UPDATE stored_events SET role = json_extract(CAST(state AS TEXT), '$.message.role') "
        "WHERE topic = ? AND rowid > ? AND rowid <= ?",
        (MESSAGE_TOPIC, after, upto),
    )
    cursor.execute(
        "UPDATE stored_events SET role = ? WHERE topic IN (?, ?) AND rowid > ? AND rowid <= ?",
        (BATCH_ROLE, BATCH_TOPIC, BATCH_CODE, after, upto),
    )
