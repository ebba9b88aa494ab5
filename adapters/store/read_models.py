"""The read-model tables (session rows, transcripts) in SQL, for SQLite and PostgreSQL.

Both engines take the same statements; only the parameter marker and the table prefix
(a PostgreSQL schema) differ. Writes run on the cursor of the transaction that inserts
the events, so the read model never lags or leads the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any, Protocol
from uuid import UUID

from sessionwire.application.ports.session_read_model import (
    SessionPage,
    SessionQuery,
    StoredSession,
)
from sessionwire.application.ports.work_queue import StoredWork
from sessionwire.application.projection import ReadModelChanges
from sessionwire.domain.session import SessionState

SESSION_COLUMNS = (
    "id, key, session_id, agent_id, kind, label, spawned_by, status, updated_at, "
    "version, created_on, modified_on, state"
)


class Cursor(Protocol):
    def execute(self, query: Any, params: Any = ..., /, **options: Any) -> Any: ...
    def executemany(self, query: Any, params: Any, /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlReadModel:
    def __init__(
        self,
        *,
        marker: str,
        prefix: str = "",
        kind_of: Any,
        write_options: dict[str, Any],
        name_prefix: str = "",
    ) -> None:
        self.m = marker
        # Options for every write (psycopg: no server-side prepare, see PostgresSessionRecorder).
        self.write_options = write_options
        # ``name_prefix`` names a second set of tables and indexes (``audit rebuild``
        # projects into those, then compares them with the live ones).
        self.n = name_prefix
        self.sessions = f"{prefix}{name_prefix}sw_sessions"
        self.transcript = f"{prefix}{name_prefix}sw_transcript"
        self.work_table = f"{prefix}{name_prefix}sw_work"
        self.streams_table = f"{prefix}{name_prefix}sw_session_streams"
        self.prefix = prefix
        m = marker
        self.insert_session = (
            f"INSERT INTO {self.sessions} ({SESSION_COLUMNS}) VALUES ({', '.join([m] * 13)})"
        )
        # An existing row only changes these columns (key, ids and kind never change).
        self.update_session = (
            f"UPDATE {self.sessions} SET label={m}, status={m}, updated_at={m}, version={m}, "
            f"modified_on={m}, state={m} WHERE id={m}"
        )
        self.insert_message = (
            f"INSERT INTO {self.transcript} (session, seq, role, message) "
            f"VALUES ({m}, {m}, {m}, {m})"
        )
        # Position: creation order of runs and exchanges, so a restart re-queues runs in
        # the order they arrived. Writers are serialised (SQLite's write lock, the
        # PostgreSQL events table lock taken before these statements), so MAX()+1 holds.
        self.insert_work = (
            f"INSERT INTO {self.work_table} (id, kind, status, session_key, position, version, "
            f"created_on, modified_on, state) VALUES ({m}, {m}, {m}, {m}, "
            f"(SELECT COALESCE(MAX(position), 0) + 1 FROM {self.work_table}), "
            f"{m}, {m}, {m}, {m})"
        )
        self.update_work = (
            f"UPDATE {self.work_table} SET status={m}, version={m}, modified_on={m}, state={m} "
            f"WHERE id={m}"
        )
        self.insert_member = (
            f"INSERT INTO {self.streams_table} (session_key, stream_id, kind) "
            f"VALUES ({m}, {m}, {m}) ON CONFLICT DO NOTHING"
        )
        # Kind depends on config (session.mainKey); the store is given the classifier.
        self.kind_of = kind_of

    def create_statements(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.sessions} ("
            "id TEXT PRIMARY KEY, key TEXT NOT NULL, session_id TEXT NOT NULL, "
            "agent_id TEXT NOT NULL, kind TEXT NOT NULL, label TEXT, spawned_by TEXT, "
            "status TEXT NOT NULL, updated_at BIGINT NOT NULL, version BIGINT NOT NULL, "
            "created_on TEXT NOT NULL, modified_on TEXT NOT NULL, state TEXT NOT NULL)",
            # The label rides along so the console's search filters on the index entry
            # before reading the row (stores made before keep the narrower index).
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_sessions_recent ON {self.sessions} "
            "(status, updated_at DESC, key, label)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_sessions_session_id ON {self.sessions} "
            "(session_id)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_sessions_label ON {self.sessions} (label)",
            f"CREATE TABLE IF NOT EXISTS {self.transcript} ("
            "session TEXT NOT NULL, seq BIGINT NOT NULL, role TEXT NOT NULL, "
            "message TEXT NOT NULL, PRIMARY KEY (session, seq))",
            f"CREATE TABLE IF NOT EXISTS {self.work_table} ("
            "id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, "
            "session_key TEXT NOT NULL, position BIGINT NOT NULL, version BIGINT NOT NULL, "
            "created_on TEXT NOT NULL, modified_on TEXT NOT NULL, state TEXT NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_work_pending ON {self.work_table} "
            "(kind, status, position)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_work_position ON {self.work_table} (position)",
            # The timeline index: which streams each session took part in.
            f"CREATE TABLE IF NOT EXISTS {self.streams_table} ("
            "session_key TEXT NOT NULL, stream_id TEXT NOT NULL, kind TEXT NOT NULL, "
            "PRIMARY KEY (session_key, stream_id))",
        ]

    def drop_statements(self) -> list[str]:
        return [
            f"DELETE FROM {self.transcript}",
            f"DELETE FROM {self.sessions}",
            f"DELETE FROM {self.work_table}",
            f"DELETE FROM {self.streams_table}",
        ]

    # Writes ---------------------------------------------------------------------------

    def write(self, cursor: Cursor, changes: ReadModelChanges) -> None:
        execute: Any = partial(cursor.execute, **self.write_options)
        for row in changes.rows.values():
            state = row.state
            if row.is_new:
                execute(
                    self.insert_session,
                    (
                        row.id.hex,
                        state.key,
                        state.session_id,
                        state.agent_id,
                        self.kind_of(state),
                        state.label,
                        state.spawned_by,
                        state.status,
                        state.updated_at,
                        row.version,
                        row.created_on_iso,
                        row.modified_on_iso,
                        state.model_dump_json(),
                    ),
                )
            else:
                execute(
                    self.update_session,
                    (
                        state.label,
                        state.status,
                        state.updated_at,
                        row.version,
                        row.modified_on_iso,
                        state.model_dump_json(),
                        row.id.hex,
                    ),
                )
        if len(changes.transcript) > 1:
            # Many single appends at once (an import, a rebuild): one statement.
            cursor.executemany(
                self.insert_message,
                [(e.session.hex, e.seq, e.role, e.message_json) for e in changes.transcript],
            )
        else:
            for entry in changes.transcript:
                execute(
                    self.insert_message,
                    (entry.session.hex, entry.seq, entry.role, entry.message_json),
                )
        if changes.transcript_rows:
            # Batches of messages: one statement for all their rows.
            cursor.executemany(self.insert_message, changes.transcript_rows)
        for work in changes.work.values():
            if work.is_new:
                execute(
                    self.insert_work,
                    (
                        work.id.hex,
                        work.kind,
                        work.status,
                        work.session_key,
                        work.version,
                        work.created_on_iso,
                        work.modified_on_iso,
                        work.state_json,
                    ),
                )
            else:
                execute(
                    self.update_work,
                    (work.status, work.version, work.modified_on_iso, work.state_json, work.id.hex),
                )
        for member in changes.members:
            execute(self.insert_member, (member.session_key, member.stream_id.hex, member.kind))

    # Reads ----------------------------------------------------------------------------

    def session_streams(self, cursor: Cursor, key: str) -> dict[UUID, str] | None:
        """The streams session ``key`` took part in, by kind; None when the index was
        never filled on a store that has runs (recorded before it existed)."""
        cursor.execute(
            f"SELECT stream_id, kind FROM {self.streams_table} WHERE session_key = {self.m}",
            (key,),
        )
        found = {UUID(row["stream_id"]): row["kind"] for row in cursor.fetchall()}
        if found:
            return found
        cursor.execute(f"SELECT 1 AS found FROM {self.streams_table} LIMIT 1")
        if cursor.fetchone() is not None:
            return found
        cursor.execute(f"SELECT 1 AS found FROM {self.work_table} LIMIT 1")
        return None if cursor.fetchone() is not None else found

    def session(self, cursor: Cursor, aggregate_id: UUID) -> StoredSession | None:
        cursor.execute(
            f"SELECT {SESSION_COLUMNS} FROM {self.sessions} WHERE id = {self.m}",
            (aggregate_id.hex,),
        )
        found = cursor.fetchone()
        return None if found is None else stored_session(found)

    def sessions_where(self, cursor: Cursor, column: str, value: str) -> list[StoredSession]:
        assert column in {"session_id", "label"}
        cursor.execute(
            f"SELECT {SESSION_COLUMNS} FROM {self.sessions} "
            f"WHERE {column} = {self.m} AND status = 'active' ORDER BY key",
            (value,),
        )
        return [stored_session(found) for found in cursor.fetchall()]

    def list_sessions(self, cursor: Cursor, query: SessionQuery) -> list[StoredSession]:
        m = self.m
        where = ["status = 'active'"]
        params: list[Any] = []
        if query.updated_since_ms is not None:
            where.append(f"updated_at >= {m}")
            params.append(query.updated_since_ms)
        for column, values in (("kind", query.kinds), ("agent_id", query.agent_ids)):
            if values is not None:
                if not values:
                    return []
                where.append(f"{column} IN ({', '.join([m] * len(values))})")
                params.extend(sorted(values))
        if query.spawned_by is not None:
            where.append(f"spawned_by = {m}")
            params.append(query.spawned_by)
        if query.exclude_keys:
            where.append(f"key NOT IN ({', '.join([m] * len(query.exclude_keys))})")
            params.extend(sorted(query.exclude_keys))
        params.append(query.limit)
        cursor.execute(
            f"SELECT {SESSION_COLUMNS} FROM {self.sessions} WHERE {' AND '.join(where)} "
            f"ORDER BY updated_at DESC, key LIMIT {m}",
            params,
        )
        return [stored_session(found) for found in cursor.fetchall()]

    def session_page(self, cursor: Cursor, page: SessionPage) -> list[StoredSession]:
        m = self.m
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("status", page.status), ("kind", page.kind)):
            if value is not None:
                where.append(f"{column} = {m}")
                params.append(value)
        if page.agent_id is not None:
            where.append(f"agent_id = {m}")
            params.append(page.agent_id)
        if page.search:
            pattern = "%" + escape_like(page.search.lower()) + "%"
            where.append(
                f"(key LIKE {m} ESCAPE '!' "
                f"OR (label IS NOT NULL AND LOWER(label) LIKE {m} ESCAPE '!'))"
            )
            params += [pattern, pattern]
        if page.after is not None:
            # Keyset paging in the index's order (updated_at DESC, key). The first term
            # bounds the index range (an OR alone made SQLite walk the index from the top).
            where.append(f"updated_at <= {m} AND (updated_at < {m} OR key > {m})")
            params += [page.after[0], page.after[0], page.after[1]]
        params.append(page.limit)
        condition = f"WHERE {' AND '.join(where)} " if where else ""
        cursor.execute(
            f"SELECT {SESSION_COLUMNS} FROM {self.sessions} {condition}"
            f"ORDER BY updated_at DESC, key LIMIT {m}",
            params,
        )
        return [stored_session(found) for found in cursor.fetchall()]

    def recent_work(
        self, cursor: Cursor, kind: str, limit: int, status: str | None, before: int | None
    ) -> list[tuple[int, StoredWork]]:
        m = self.m
        where, params = [f"kind = {m}"], list[Any]([kind])
        if status is not None:
            where.append(f"status = {m}")
            params.append(status)
        if before is not None:
            where.append(f"position < {m}")
            params.append(before)
        cursor.execute(
            f"SELECT position, {WORK_COLUMNS} FROM {self.work_table} "
            f"WHERE {' AND '.join(where)} ORDER BY position DESC LIMIT {m}",
            (*params, limit),
        )
        return [(int(found["position"]), stored_work(found)) for found in cursor.fetchall()]

    def work(self, cursor: Cursor, aggregate_id: UUID) -> StoredWork | None:
        cursor.execute(
            f"SELECT {WORK_COLUMNS} FROM {self.work_table} WHERE id = {self.m}",
            (aggregate_id.hex,),
        )
        found = cursor.fetchone()
        return None if found is None else stored_work(found)

    def pending_work(self, cursor: Cursor, kind: str, statuses: Sequence[str]) -> list[StoredWork]:
        if not statuses:
            return []
        cursor.execute(
            f"SELECT {WORK_COLUMNS} FROM {self.work_table} WHERE kind = {self.m} "
            f"AND status IN ({', '.join([self.m] * len(statuses))}) ORDER BY position",
            (kind, *statuses),
        )
        return [stored_work(found) for found in cursor.fetchall()]

    def agent_ids(self, cursor: Cursor) -> list[str]:
        cursor.execute(
            f"SELECT DISTINCT agent_id FROM {self.sessions} WHERE status = 'active' "
            "ORDER BY agent_id"
        )
        return [found["agent_id"] for found in cursor.fetchall()]

    def transcript_tail(
        self, cursor: Cursor, aggregate_id: UUID, *, limit: int, include_tools: bool
    ) -> list[str]:
        role_filter = "" if include_tools else "AND role <> 'toolResult' "
        cursor.execute(
            f"SELECT message FROM {self.transcript} WHERE session = {self.m} {role_filter}"
            f"ORDER BY seq DESC LIMIT {self.m}",
            (aggregate_id.hex, limit),
        )
        messages = [found["message"] for found in cursor.fetchall()]
        messages.reverse()
        return messages

    def snapshot(self, cursor: Cursor) -> dict[str, list[tuple[object, ...]]]:
        cursor.execute(f"SELECT {SESSION_COLUMNS} FROM {self.sessions} ORDER BY id")
        sessions = [tuple(found[c] for c in _column_names()) for found in cursor.fetchall()]
        cursor.execute(
            f"SELECT session, seq, role, message FROM {self.transcript} ORDER BY session, seq"
        )
        transcript = [(f["session"], f["seq"], f["role"], f["message"]) for f in cursor.fetchall()]
        columns = ", ".join(WORK_ROW_COLUMNS)
        cursor.execute(f"SELECT {columns} FROM {self.work_table} ORDER BY position")
        work = [tuple(found[c] for c in WORK_ROW_COLUMNS) for found in cursor.fetchall()]
        cursor.execute(
            f"SELECT session_key, stream_id, kind FROM {self.streams_table} "
            "ORDER BY session_key, stream_id"
        )
        members = [(f["session_key"], f["stream_id"], f["kind"]) for f in cursor.fetchall()]
        return {
            "sessions": sessions,
            "transcript": transcript,
            "work": work,
            "session_streams": members,
        }


def escape_like(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern (``!`` is the escape character)."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def _column_names() -> Sequence[str]:
    return [name.strip() for name in SESSION_COLUMNS.split(",")]


WORK_COLUMNS = "id, kind, version, created_on, modified_on, state"
# Every column of a work row, as snapshots and rebuild comparisons read them.
WORK_ROW_COLUMNS = (
    "id",
    "kind",
    "status",
    "session_key",
    "position",
    "version",
    "created_on",
    "modified_on",
    "state",
)


def stored_work(found: Any) -> StoredWork:
    return StoredWork(
        id=UUID(found["id"]),
        kind=found["kind"],
        version=int(found["version"]),
        created_on=datetime.fromisoformat(found["created_on"]),
        modified_on=datetime.fromisoformat(found["modified_on"]),
        state_json=found["state"],
    )


def stored_session(found: Any) -> StoredSession:
    return StoredSession(
        id=UUID(found["id"]),
        version=int(found["version"]),
        created_on=datetime.fromisoformat(found["created_on"]),
        modified_on=datetime.fromisoformat(found["modified_on"]),
        state=SessionState.model_validate_json(found["state"]),
    )
