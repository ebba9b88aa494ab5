"""Storage v3 on PostgreSQL (ADR 0036 §6): each message stored once, its chain beside it.

As on SQLite (``sqlite_format.py``), the event row is the transcript row and the chain
row: the events table gains ``role``, ``body``, ``provenance`` (history columns),
``stream_hash``, ``log_hash``, ``log_seq`` (ADR 0016's chain) and ``xact_id`` (the
writing transaction, for the sealer that seals behind the writers, ADR 0021).
``sw_chain`` is a view over them: reads and the sealer's UPDATE go through it (an
automatically updatable view), and INSTEAD OF triggers turn an insert (an import's
links) or a delete (a test's tampering) into an UPDATE of the row. ``sw_transcript`` is
a view that refuses inserts.

A v2 gateway opening an upgraded schema finds ``sw_chain`` and creates nothing; its
first save is refused whole, with a clear error, by those triggers: its unsealed link
into ``sw_chain`` (every save) and its line into ``sw_transcript`` (a message).

A v2 schema is upgraded in place by the first v3 gateway that opens it (``upgrade``),
under a session-level advisory lock on the schema's storage, in batches by position,
each one transaction recording the position reached (``sw_format.upgraded_to``): a
crash resumes there. No stored event byte and no hash changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sessionwire.adapters.store.read_models import HOT_COLUMNS, HOT_TYPES, ROW_FIELDS
from sessionwire.adapters.store.sqlite_format import (
    BATCH_ROLE,
    MESSAGE_TOPIC,
    REFUSE_OLD,
    Progress,
    stderr_progress,
)
from sessionwire.application.ports.store import StoreInUse
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.hash_chain import BATCH_CODE, BATCH_TOPIC
from sessionwire.domain.session import SessionState

FORMAT = 3
UPGRADE_BATCH = 5_000
REFUSE_CODE = "SWV03"

V3_COLUMNS = (
    ("role", "text"),
    ("body", "integer"),
    ("provenance", "integer"),
    ("stream_hash", "bytea"),
    ("log_hash", "bytea"),
    ("log_seq", "bigint"),
    ("xact_id", "xid8"),
)


class StoreNeedsUpgrade(StoreInUse):
    """A v2 schema that live v2 gateways still write: upgrading it would refuse them."""


def column_statements(events: str) -> list[str]:
    """The v3 columns of the events table (instant: no default while adding them; a v2
    row takes its transaction id from its chain row)."""
    added = ", ".join(f"ADD COLUMN IF NOT EXISTS {name} {kind}" for name, kind in V3_COLUMNS)
    return [
        f"ALTER TABLE {events} {added}",
        f"ALTER TABLE {events} ALTER COLUMN xact_id SET DEFAULT pg_current_xact_id()",
    ]


def finish_statements(schema: str, events: str) -> list[str]:
    """Views, triggers and indexes that make a v3 schema (idempotent)."""
    s = f'"{schema}"'
    refuse = f"RAISE EXCEPTION '{REFUSE_OLD}' USING ERRCODE = '{REFUSE_CODE}'"
    return [
        # Named as v2's indexes on the chain table they replace.
        f"CREATE UNIQUE INDEX IF NOT EXISTS sw_chain_seq ON {events} (log_seq) "
        "WHERE log_seq IS NOT NULL",
        # Small: only the rows the sealer has still to seal, in the order it seals them.
        f"CREATE INDEX IF NOT EXISTS sw_chain_unsealed ON {events} (xact_id, notification_id) "
        "WHERE log_seq IS NULL",
        f"CREATE TABLE IF NOT EXISTS {s}.sw_format (name text PRIMARY KEY, value bigint NOT NULL)",
        f"INSERT INTO {s}.sw_format (name, value) VALUES ('storage', {FORMAT}) "
        f"ON CONFLICT (name) DO UPDATE SET value = {FORMAT}",
        f"DELETE FROM {s}.sw_format WHERE name = 'upgraded_to'",
        f"CREATE OR REPLACE VIEW {s}.sw_transcript AS SELECT NULL::text AS session, "
        "NULL::bigint AS seq, NULL::text AS role, NULL::text AS message WHERE false",
        f"CREATE OR REPLACE FUNCTION {s}.sw_refuse_v2() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN {refuse}; END $$",
        f"DROP TRIGGER IF EXISTS sw_transcript_refused ON {s}.sw_transcript",
        f"CREATE TRIGGER sw_transcript_refused INSTEAD OF INSERT ON {s}.sw_transcript "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.sw_refuse_v2()",
        f"CREATE OR REPLACE FUNCTION {s}.sw_chain_insert() RETURNS trigger LANGUAGE plpgsql AS "
        # An unsealed link is v2's write path (its save's link); v3 writes links with
        # their rows, and a v3 import says so (``SqlChain.write_links_many``).
        "$$ BEGIN IF NEW.log_seq IS NULL AND "
        "coalesce(current_setting('sessionwire.writer', true), '') <> 'v3' "
        f"THEN {refuse}; END IF; "
        f"UPDATE {events} SET stream_hash = NEW.stream_hash, log_hash = NEW.log_hash, "
        "log_seq = NEW.log_seq WHERE notification_id = NEW.notification_id; RETURN NEW; END $$",
        f"CREATE OR REPLACE FUNCTION {s}.sw_chain_delete() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN UPDATE {events} SET stream_hash = NULL, log_hash = NULL, log_seq = NULL "
        "WHERE notification_id = OLD.notification_id; RETURN OLD; END $$",
        # Last: _postgres_setup takes the chain's presence to mean "all created".
        f"CREATE OR REPLACE VIEW {s}.sw_chain AS SELECT notification_id, originator_id, "
        f"originator_version, stream_hash, log_hash, log_seq, xact_id FROM {events} "
        "WHERE stream_hash IS NOT NULL",
        f"DROP TRIGGER IF EXISTS sw_chain_insert ON {s}.sw_chain",
        f"CREATE TRIGGER sw_chain_insert INSTEAD OF INSERT ON {s}.sw_chain "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.sw_chain_insert()",
        f"DROP TRIGGER IF EXISTS sw_chain_delete ON {s}.sw_chain",
        f"CREATE TRIGGER sw_chain_delete INSTEAD OF DELETE ON {s}.sw_chain "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.sw_chain_delete()",
    ]


def _relkind(cursor: Any, schema: str, name: str) -> str | None:
    cursor.execute(
        "SELECT c.relkind::text AS kind FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, name),
    )
    found = cursor.fetchone()
    if found is None:
        return None
    return str(found["kind"] if isinstance(found, dict) else found[0])


def needs_upgrade(cursor: Any, schema: str) -> bool:
    """A v2 schema (its chain a table of its own), or a v3 upgrade that stopped midway."""
    return _relkind(cursor, schema, "sw_chain") == "r"


def storage_lock_key(schema: str) -> str:
    """What ``hashtext`` takes for the schema's storage lock (ADR 0036 §6)."""
    return f"{schema}/storage"


@contextmanager
def storage_locked(connection: Any, schema: str) -> Iterator[None]:
    """Hold the schema's storage lock on ``connection`` (autocommit, session level): one
    upgrade at a time, and a gateway opening the schema meanwhile waits for it."""
    connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (storage_lock_key(schema),))
    try:
        yield
    finally:
        connection.execute("SELECT pg_advisory_unlock(hashtext(%s))", (storage_lock_key(schema),))


def refuse_beside_live(schema: str, holders: list[str]) -> StoreNeedsUpgrade:
    return StoreNeedsUpgrade(
        f"the PostgreSQL schema {schema!r} is storage v2 and is in use by gateway(s) "
        f"{', '.join(holders)} (live leases in sw_gateways); upgrading it to v3 would refuse "
        "their writes. Stop them and open it again, or add upgrade=yes to the store URL "
        "(?schema=…&upgrade=yes) to upgrade now (ADR 0036 §6, docs/operations.md)"
    )


def upgrade(
    transaction: Callable[[], Any],
    schema: str,
    events: str,
    *,
    progress: Progress = stderr_progress,
    batch: int = UPGRADE_BATCH,
    fail_batch: int | None = None,
) -> bool:
    """Upgrade a v2 schema to v3 in place, resumably; False if it needed none.

    ``transaction()`` gives a context manager whose cursor commits at its end (and rolls
    back on an error). The caller holds the storage lock. ``fail_batch`` (tests) raises
    inside that batch's transaction (counted from 0), as a crash mid-batch would."""
    s = f'"{schema}"'
    with transaction() as cursor:
        if not needs_upgrade(cursor, schema):
            return False
        for statement in column_statements(events):
            cursor.execute(statement)
        hot = ", ".join(
            f"ADD COLUMN IF NOT EXISTS {name} {HOT_TYPES.get(name, 'text')}" for name in HOT_COLUMNS
        )
        cursor.execute(f"ALTER TABLE {s}.sw_sessions {hot}")
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.sw_format "
            "(name text PRIMARY KEY, value bigint NOT NULL)"
        )
        cursor.execute(
            f"INSERT INTO {s}.sw_format (name, value) VALUES ('upgraded_to', 0) "
            "ON CONFLICT (name) DO NOTHING"
        )
        cursor.execute(f"SELECT value FROM {s}.sw_format WHERE name = 'upgraded_to'")
        reached = int(_first(cursor.fetchone()))
        cursor.execute(f"SELECT COALESCE(MAX(notification_id), 0) FROM {events}")
        last = int(_first(cursor.fetchone()))
    if reached:
        progress(f"storage v3: resuming the upgrade at event {reached} of {last}")
    else:
        progress(f"storage v3: upgrading {last} events in place (resumable)")
    batches = 0
    while reached < last:
        upto = min(last, reached + batch)
        with transaction() as cursor:
            _fill(cursor, events, reached, upto)
            if fail_batch is not None and batches == fail_batch:
                raise UpgradeInterrupted(f"batch {batches} failed deliberately (a test)")
            cursor.execute(
                f"UPDATE {s}.sw_format SET value = %s WHERE name = 'upgraded_to'", (upto,)
            )
        reached, batches = upto, batches + 1
        progress(f"storage v3: {reached}/{last} events")
    with transaction() as cursor:
        # Whatever a v2 writer still added or sealed meanwhile (an upgrade forced beside
        # live gateways): its chain table is locked from here until it is dropped.
        cursor.execute(f"LOCK TABLE {s}.sw_chain IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"SELECT COALESCE(MAX(notification_id), 0) FROM {events}")
        _fill(cursor, events, reached, int(_first(cursor.fetchone())))
        cursor.execute(
            f"UPDATE {events} e SET log_hash = c.log_hash, log_seq = c.log_seq "
            f"FROM {s}.sw_chain c WHERE c.notification_id = e.notification_id "
            "AND e.log_seq IS NULL AND c.log_seq IS NOT NULL"
        )
        cursor.execute(
            f"SELECT COUNT(*) FROM {s}.sw_chain c LEFT JOIN {events} e "
            "ON e.notification_id = c.notification_id WHERE e.notification_id IS NULL"
        )
        orphans = int(_first(cursor.fetchone()))
        # The session rows: the fields a message changes move to their columns, and the
        # JSON keeps the others written as the read model writes it (so `audit rebuild`
        # finds the upgraded rows equal to rebuilt ones).
        _move_session_fields(cursor, s)
        cursor.execute(f"DROP TABLE {s}.sw_chain")
        if _relkind(cursor, schema, "sw_transcript") == "r":
            cursor.execute(f"DROP TABLE {s}.sw_transcript")
        for statement in finish_statements(schema, events):
            cursor.execute(statement)
    if orphans:
        progress(f"storage v3: {orphans} chain row(s) of no event dropped")
    progress("storage v3: upgrade done; `sessionwire audit verify` checks the result")
    return True


class UpgradeInterrupted(SessionwireError, RuntimeError):
    """A batch failed on purpose (``fail_batch``): what a crash mid-upgrade leaves."""


def _first(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _move_session_fields(cursor: Any, s: str, *, page: int = 1_000) -> None:
    """Every v2 session row (its JSON holds every field) in its v3 shape, a page at a time."""
    after = ""
    assigned = ", ".join(f"{name} = %s" for name in HOT_COLUMNS)
    while True:
        cursor.execute(
            f"SELECT id, state FROM {s}.sw_sessions WHERE id > %s "
            "AND state::jsonb ? 'updated_at' ORDER BY id LIMIT %s",
            (after, page),
        )
        rows = [(str(_at(row, "id", 0)), str(_at(row, "state", 1))) for row in cursor.fetchall()]
        if not rows:
            return
        changed = []
        for row_id, text in rows:
            state = SessionState.model_validate_json(text)
            changed.append(
                (
                    *(getattr(state, name) for name in HOT_COLUMNS),
                    state.model_dump_json(exclude=set(ROW_FIELDS)),
                    row_id,
                )
            )
        cursor.executemany(
            f"UPDATE {s}.sw_sessions SET {assigned}, state = %s WHERE id = %s", changed
        )
        after = rows[-1][0]


def _at(row: Any, name: str, index: int) -> Any:
    return row[name] if isinstance(row, dict) else row[index]


def _fill(cursor: Any, events: str, after: int, upto: int) -> None:
    """Copy the chain links into events ``after < notification_id <= upto`` and fill
    their history columns from their bytes."""
    schema = events.split(".")[0]
    cursor.execute(
        f"UPDATE {events} e SET stream_hash = c.stream_hash, log_hash = c.log_hash, "
        f"log_seq = c.log_seq, xact_id = c.xact_id FROM {schema}.sw_chain c "
        "WHERE c.notification_id = e.notification_id "
        "AND e.notification_id > %s AND e.notification_id <= %s",
        (after, upto),
    )
    # A v2 message keeps its layout (its bytes are hashed): only its role is a column;
    # its line is made from the event when read (body stays NULL).
    cursor.execute(
        f"UPDATE {events} SET role = convert_from(state, 'UTF8')::jsonb -> 'message' ->> 'role' "
        "WHERE topic = %s AND notification_id > %s AND notification_id <= %s",
        (MESSAGE_TOPIC, after, upto),
    )
    cursor.execute(
        f"UPDATE {events} SET role = %s WHERE topic IN (%s, %s) "
        "AND notification_id > %s AND notification_id <= %s",
        (BATCH_ROLE, BATCH_TOPIC, BATCH_CODE, after, upto),
    )
