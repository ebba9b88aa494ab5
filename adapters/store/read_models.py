"""The read-model tables (session rows, transcripts) in SQL, for SQLite and PostgreSQL.

Both engines take the same statements; only the parameter marker and the table prefix
(a PostgreSQL schema) differ. Writes run on the cursor of the transaction that inserts
the events, so the read model never lags or leads the log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, cast
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from orjson import dumps, loads
from sessionwire.adapters.store.serialisation import (
    MESSAGE_BODY_OFFSET,
    PROVENANCE_MARKER,
    StoredMessage,
    transcript_lines,
)
from sessionwire.adapters.store.sql_dialect import SqlDialect
from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.session_read_model import (
    RenderedWindow,
    SessionListing,
    SessionPage,
    SessionQuery,
    SessionTranscript,
    StoredSession,
    TranscriptPage,
    TranscriptWindow,
)
from sessionwire.application.ports.work_queue import StoredWork
from sessionwire.domain.causality import default_provenance_shown
from sessionwire.domain.reader_view import rendered_view, view_stamp
from sessionwire.domain.redaction import Redactor
from sessionwire.domain.session_ids import session_uuid, to_millis

if TYPE_CHECKING:
    # The projection and the run aggregate load with the first write or rebuild: a
    # store opened only to read sessions never needs them (ADR 0036); the session
    # aggregate with the first row read whole, which a listing never reads.
    from sessionwire.application.projection import ReadModelChanges, RunRow, SessionRow
    from sessionwire.domain.session import SessionState

SESSION_COLUMNS = (
    "id, key, session_id, agent_id, kind, label, spawned_by, status, updated_at, "
    "version, created_on, modified_on, state"
)
# Storage v3 (ADR 0036, SQLite): the fields a message changes are columns of their own,
# so an append is a narrow UPDATE of those that changed; the ``state`` JSON holds the
# other fields and is written only when one of them changes.
HOT_FIELDS = (
    "updated_at",
    "message_count",
    "channel",
    "chat_type",
    "display_name",
    "last_channel",
    "last_to",
    "last_account_id",
    "model",
    "input_tokens",
    "output_tokens",
    "total_tokens",
)
HOT_TYPES = {
    "updated_at": "BIGINT NOT NULL",
    "message_count": "BIGINT",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "total_tokens": "BIGINT",
}
HOT_COLUMNS = tuple(name for name in HOT_FIELDS if name != "updated_at")
# The fields the row keeps in columns (so not in its JSON, with session columns).
ROW_FIELDS = frozenset({"label", "status", *HOT_FIELDS})
_JSON_EXCLUDED: set[str] = set(ROW_FIELDS)


# A listing's columns (``SessionListing``'s fields in order): those every row has, those
# of the hot columns it shows (in the JSON where the row has no hot columns), the JSON.
LISTING_COLUMNS = "id, key, session_id, agent_id, spawned_by, status, label, updated_at"
LISTING_HOT = (
    "channel",
    "chat_type",
    "display_name",
    "last_channel",
    "last_to",
    "last_account_id",
    "model",
    "total_tokens",
)


def _json_only_fields(fields: dict[str, Any]) -> tuple[Any, ...]:
    """The listing's fields that only the state JSON holds, in ``SessionListing``'s order
    (a row written before a field existed gets ``SessionState``'s default)."""
    get = fields.get
    return (
        get("context_tokens"),
        get("thinking_level"),
        get("verbose_level"),
        get("system_sent", False),
        get("aborted_last_run", False),
        get("send_policy"),
    )


ALL_LINES = 2**62
"""A limit no session reaches: every line of a session's view."""

# History views (ADR 0054): what a line read without provenance ends with in the view.
_DEFAULT_ENDS = {
    role: ',"provenance":' + dumps(default_provenance_shown(role)).decode() + "}"
    for role in ("user", "assistant")
}
UNRENDERED = 2
"""A view row's ``exact`` when rendering the message failed: read as before (rendered
on read), never from the views."""


class Cursor(Protocol):
    def execute(self, query: Any, params: Any = ..., /, **options: Any) -> Any: ...
    def executemany(self, query: Any, params: Any, /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlReadModel:
    def __init__(
        self,
        dialect: SqlDialect,
        *,
        kind_of: Any,
        name_prefix: str = "",
        transcript_in_log: bool = False,
        session_columns: bool = False,
        history_views: bool = False,
    ) -> None:
        self.dialect = dialect
        # History views (ADR 0054): each message's view rendered when it is written, so a
        # history read concatenates stored JSON. ``redactor`` is the writer's masking.
        self.history_views = history_views and transcript_in_log
        self.redactor: Redactor | None = None
        self.stamp = view_stamp(None)
        self.m = marker = dialect.marker
        prefix = dialect.prefix
        # Storage v3 (ADR 0036, SQLite): the message rows of the log are the transcript;
        # no table of its own is written, and history reads the events.
        self.transcript_in_log = transcript_in_log
        # The events table the history reads, its stream id as a parameter, and its
        # line expression (SQLite: hex text and CAST; PostgreSQL: uuid and convert_from).
        self.events = dialect.events
        self.log_id = dialect.to_db_id
        self.line = dialect.line
        # The line a reader is shown, read from the row (prefix ``e.``): the ``line``
        # expression with the provenance a line stored without one is shown with.
        user_end, agent_end = (_sql_text(_DEFAULT_ENDS[r]) for r in ("user", "assistant"))
        self.dialect_view_line = (
            "CASE WHEN e.provenance IS NULL THEN "
            f"{dialect.text_of('substr(e.state, 12, e.body - 1)')} || "
            f"CASE WHEN e.role = 'user' THEN {user_end} ELSE {agent_end} END "
            f"ELSE {dialect.text_of('substr(e.state, 12, e.body - 1)')} || ',\"provenance\":' "
            f"|| {dialect.text_of('substr(e.state, 26 + e.body, e.provenance)')} || '}}' END"
        )
        self.write_options = dialect.write_options
        # ``name_prefix`` names a second set of tables and indexes (``audit rebuild``
        # projects into those, then compares them with the live ones).
        self.n = name_prefix
        self.sessions = f"{prefix}{name_prefix}sw_sessions"
        self.transcript = f"{prefix}{name_prefix}sw_transcript"
        self.work_table = f"{prefix}{name_prefix}sw_work"
        self.streams_table = f"{prefix}{name_prefix}sw_session_streams"
        self.runs_table = f"{prefix}{name_prefix}sw_runs"
        self.views_table = f"{prefix}{name_prefix}sw_history_views"
        self.prefix = prefix
        self.session_columns = session_columns
        m = marker
        hot = "".join(f", {name}" for name in HOT_COLUMNS) if session_columns else ""
        self.session_select = SESSION_COLUMNS + hot
        listed_hot = "".join(f", {name}" for name in LISTING_HOT) if session_columns else ""
        self.listing_select = f"{LISTING_COLUMNS}{listed_hot}, state"
        count = 13 + (len(HOT_COLUMNS) if session_columns else 0)
        self.insert_session = (
            f"INSERT INTO {self.sessions} ({self.session_select}) VALUES ({', '.join([m] * count)})"
        )
        # An existing row only changes these columns (key, ids and kind never change).
        hot_set = "".join(f", {name}={m}" for name in HOT_COLUMNS) if session_columns else ""
        self.update_session = (
            f"UPDATE {self.sessions} SET label={m}, status={m}, updated_at={m}, version={m}, "
            f"modified_on={m}, state={m}{hot_set} WHERE id={m}"
        )
        # Per set of changed fields: its UPDATE, and a getter of their values in its order.
        self._narrow: dict[
            tuple[frozenset[str], str], tuple[str, Callable[[Any], tuple[Any, ...]]]
        ] = {}
        self._narrow_named: dict[
            frozenset[str], tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]
        ] = {}
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
        # Runs: a new run's row, and the columns a run's later events change. The link
        # columns (exchange_id, spawn_id) are left alone by updates: links set them.
        self.insert_run = (
            f"INSERT INTO {self.runs_table} ({RUN_COLUMNS}) VALUES ({', '.join([m] * 18)}) "
            "ON CONFLICT (run_id) DO NOTHING"
        )
        self.update_run = (
            f"UPDATE {self.runs_table} SET status={m}, started_at={m}, ended_at={m}, "
            f"attempt={m}, usage={m}, model={m}, error={m} WHERE run_id={m}"
        )
        self.link_exchange = f"UPDATE {self.runs_table} SET exchange_id={m} WHERE run_id={m}"
        self.link_spawn = f"UPDATE {self.runs_table} SET spawn_id={m} WHERE run_id={m}"
        # Kind depends on config (session.mainKey); the store is given the classifier.
        self.kind_of = kind_of
        self.follow_work_positions: list[str] = []
        """Statements that set where new work rows' positions go on from, after the work
        rows were replaced wholesale (a rebuild): Citus's counter (ADR 0061). None where a
        position is the rows' own MAX + 1."""
        self.route_by_key = False
        """Updates of session, work and run rows name their session's key too (a store
        distributed by it, ADR 0051 and 0062: Citus then sends each to one shard);
        ``route_by_session_key``."""
        self.log_in_session = ""
        """With ``route_by_key``: the condition that keeps a read of a session's message
        rows in its shard (one parameter, the session's key)."""
        self.insert_views = (
            f"INSERT INTO {self.views_table} (originator_id, originator_version, own, other, "
            f"exact) VALUES ({m}, {m}, {m}, {m}, {m})"
        )
        # Which of a session's messages have their views, rendered under which stamp:
        # every message from version ``view_since`` to the row's version ``view_upto``
        # was written with its views under ``view_stamp``. A message's save keeps the
        # span when it was whole up to the row's version before this save (SQL reads
        # the old values on the right) and its stamp is this writer's, and starts it
        # again at its first message otherwise; any other save of the row carries a
        # whole span to its new version. A writer that keeps no views (an older
        # sessionwire) moves the version and not ``view_upto``: the span is broken, and
        # readers render on read until a message's save starts it again.
        self.views_covered = (
            f", view_since = CASE WHEN view_stamp = {m} AND view_upto = version "
            f"THEN view_since ELSE {m} END, view_stamp = {m}, view_upto = {m}"
        )
        self.views_kept = f", view_upto = CASE WHEN view_upto = version THEN {m} ELSE view_upto END"
        self.start_views = (
            f"UPDATE {self.sessions} SET view_since = {m}, view_stamp = {m}, view_upto = {m} "
            f"WHERE id = {m}"
        )
        self.break_views = f"UPDATE {self.sessions} SET view_upto = NULL WHERE id = {m}"
        self._full_updates: dict[str, str] = {}
        self._window_statements: dict[tuple[str, str, str], str] = {}

    def use_redactor(self, redactor: Redactor | None) -> None:
        """Render the views of the messages this store writes as ``redactor`` masks."""
        self.redactor = redactor
        self.stamp = view_stamp(redactor)

    def create_statements(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.sessions} ("
            "id TEXT PRIMARY KEY, key TEXT NOT NULL, session_id TEXT NOT NULL, "
            "agent_id TEXT NOT NULL, kind TEXT NOT NULL, label TEXT, spawned_by TEXT, "
            "status TEXT NOT NULL, updated_at BIGINT NOT NULL, version BIGINT NOT NULL, "
            "created_on TEXT NOT NULL, modified_on TEXT NOT NULL, state TEXT NOT NULL"
            f"{self.hot_column_definitions()}{self.view_column_definitions()})",
            # The label rides along so the console's search filters on the index entry
            # before reading the row (stores made before keep the narrower index).
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_sessions_recent ON {self.sessions} "
            "(status, updated_at DESC, key, label)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_sessions_session_id ON {self.sessions} "
            "(session_id)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_sessions_label ON {self.sessions} (label)",
            *self.transcript_create_statements(),
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
            *self.runs_create_statements(),
            *self.views_create_statements(),
        ]

    def views_create_statements(self) -> list[str]:
        if not self.history_views:
            return []
        # Only the messages whose view is not their stored line have a row (ADR 0054).
        # Its ids of the events table's type, so the read joins them as they are.
        return [
            f"CREATE TABLE IF NOT EXISTS {self.views_table} ("
            f"originator_id {self.dialect.id_type} NOT NULL, "
            "originator_version BIGINT NOT NULL, own TEXT, other TEXT, exact INTEGER NOT NULL, "
            f"PRIMARY KEY (originator_id, originator_version)){self.dialect.keyed_table}"
        ]

    def view_column_definitions(self) -> str:
        return (
            ", view_stamp TEXT, view_since BIGINT, view_upto BIGINT" if self.history_views else ""
        )

    def missing_view_columns(self, present: set[str]) -> list[str]:
        """``ALTER TABLE`` statements giving a session table made before history views
        (ADR 0054) their columns; its rows' views then read as before until written."""
        if not self.history_views:
            return []
        return [
            f"ALTER TABLE {self.sessions} ADD COLUMN {name} {kind}"
            for name, kind in (
                ("view_stamp", "TEXT"),
                ("view_since", "BIGINT"),
                ("view_upto", "BIGINT"),
            )
            if name not in present
        ]

    def hot_column_definitions(self) -> str:
        if not self.session_columns:
            return ""
        return "".join(f", {name} {HOT_TYPES.get(name, 'TEXT')}" for name in HOT_COLUMNS)

    def _state_json(self, state: SessionState) -> str:
        if self.session_columns:
            return state.model_dump_json(exclude=_JSON_EXCLUDED)
        return state.model_dump_json()

    def _hot_values(self, state: SessionState) -> tuple[Any, ...]:
        if not self.session_columns:
            return ()
        return tuple(getattr(state, name) for name in HOT_COLUMNS)

    def narrow_only(self, changes: ReadModelChanges) -> tuple[str, tuple[Any, ...]] | None:
        """The one statement ``write`` sends for ``changes`` and its parameters, when that
        is all it sends: one session row's narrow UPDATE (a message's save). A store may
        then send it within its insert of the events (PostgreSQL: one statement a save)."""
        row = self._only_narrow_row(changes)
        return None if row is None else self._narrow_write(row)

    def narrow_row(
        self, changes: ReadModelChanges, stored: Sequence[StoredEvent] = ()
    ) -> dict[str, Any] | None:
        """``narrow_only``'s update as the values it sets, by column: the row's ``id``,
        ``version``, ``modified_on`` and its changed columns (PostgreSQL's save function
        takes them as one JSON object, ADR 0058), and with history views the span's
        and the views of the messages among ``stored`` (``narrow_views``)."""
        row = self._only_narrow_row(changes)
        if row is None:
            return None
        changed = cast(frozenset[str], row.changed)
        named = self._narrow_named.get(changed)
        if named is None:
            names = tuple(name for name in ("label", "status", *HOT_FIELDS) if name in changed)
            named = self._narrow_named[changed] = (names, _getter(names))
        names, values = named
        found = {"id": row.id.hex, "version": row.version, "modified_on": row.modified_on_iso}
        found.update(zip(names, values(row.state), strict=True))
        if self.history_views:
            views = self.narrow_views(row, stored)
            if views is None:
                return None
            found.update(views)
        return found

    def narrow_views(self, row: SessionRow, stored: Sequence[StoredEvent]) -> dict[str, Any] | None:
        """What ``narrow_row`` adds for the row's span of views (ADR 0054), as ``write``
        sets it: for a message's save the stamp, the first message's version and the
        views that are not their lines (``views``: version, own, other, exact); for any
        other save ``view_keep`` (a whole span is carried to the new version). A save
        that says neither (an older gateway's) leaves the span behind the version.
        None when ``stored`` holds messages of another session: ``write`` then writes
        the save's rows."""
        rows, firsts = self.rendered_views(stored)
        if not firsts:
            return {"view_keep": True}
        if firsts.keys() != {row.id}:
            return None
        found: dict[str, Any] = {"view_stamp": self.stamp, "view_since": firsts[row.id]}
        if rows:
            found["views"] = [values[1:] for values in rows]
        return found

    def _only_narrow_row(self, changes: ReadModelChanges) -> SessionRow | None:
        if len(changes.rows) != 1:
            return None
        (row,) = changes.rows.values()
        if not self._is_narrow(row):
            return None
        # Whatever else ``write`` would send (a field ReadModelChanges gains counts too).
        rest = (
            replace(changes, rows={}, transcript=[], transcript_rows=[])
            if self.transcript_in_log
            else replace(changes, rows={})
        )
        return None if rest else row

    def _is_narrow(self, row: SessionRow) -> bool:
        return (
            not row.is_new
            and self.session_columns
            and row.changed is not None
            and row.changed <= ROW_FIELDS
        )

    def route_by_session_key(self) -> None:
        """Every session, work and run row update also by its session's key (see
        ``route_by_key``)."""
        m = self.m
        self.route_by_key = True
        self.update_session += f" AND key={m}"
        self.update_work += f" AND session_key={m}"
        self.update_run += f" AND session_key={m}"
        self.link_exchange += f" AND session_key={m}"
        self.link_spawn += f" AND session_key={m}"
        # A session's message rows are under its key (its events' shard key).
        self.log_in_session = f" AND shard_key={m}"
        self._narrow.clear()

    def _within(self, key: str | None) -> tuple[str, tuple[Any, ...]]:
        """The condition (and its parameter) that keeps a read of session ``key``'s
        message rows within its shard; none where the store is not sharded or the key
        is not known."""
        if key is None or not self.log_in_session:
            return "", ()
        return self.log_in_session, (key,)

    def _narrow_write(
        self, row: SessionRow, views_since: int | None = None
    ) -> tuple[str, tuple[Any, ...]]:
        views, view_values = self._views_set(row, views_since)
        statement, values = self._narrow_update(cast(frozenset[str], row.changed), views)
        routed = (row.state.key,) if self.route_by_key else ()
        return statement, (
            row.version,
            row.modified_on_iso,
            *values(row.state),
            *view_values,
            row.id.hex,
            *routed,
        )

    def _views_set(self, row: SessionRow, since: int | None) -> tuple[str, tuple[Any, ...]]:
        """What a write of ``row`` assigns to its span of views (ADR 0054): a message's
        save (``since``: its first message's version) or any other save's."""
        if not self.history_views:
            return "", ()
        if since is None:
            return self.views_kept, (row.version,)
        return self.views_covered, (self.stamp, since, self.stamp, row.version)

    def _narrow_update(
        self, changed: frozenset[str], views: str = ""
    ) -> tuple[str, Callable[[Any], tuple[Any, ...]]]:
        """``UPDATE`` of the version, the modification time and the ``changed`` columns
        (and the span of views, ``views``), and a getter of those columns' values from a
        state (cached: one per append)."""
        narrow = self._narrow.get((changed, views))
        if narrow is None:
            m = self.m
            ordered = [name for name in ("label", "status", *HOT_FIELDS) if name in changed]
            assigned = "".join(f", {name}={m}" for name in ordered)
            routed = f" AND key={m}" if self.route_by_key else ""
            statement = (
                f"UPDATE {self.sessions} SET version={m}, modified_on={m}{assigned}{views} "
                f"WHERE id={m}{routed}"
            )
            narrow = self._narrow[changed, views] = (statement, _getter(ordered))
        return narrow

    def _full_update(self, views: str) -> str:
        found = self._full_updates.get(views)
        if found is None:
            head, _, tail = self.update_session.rpartition(" WHERE id=")
            found = self._full_updates[views] = f"{head}{views} WHERE id={tail}"
        return found

    def transcript_create_statements(self) -> list[str]:
        if self.transcript_in_log:
            return []
        return [
            f"CREATE TABLE IF NOT EXISTS {self.transcript} ("
            "session TEXT NOT NULL, seq BIGINT NOT NULL, role TEXT NOT NULL, "
            "message TEXT NOT NULL, PRIMARY KEY (session, seq))"
        ]

    def runs_create_statements(self) -> list[str]:
        """The runs read model (ADR 0017); each listing reads one index, newest first."""
        return [
            f"CREATE TABLE IF NOT EXISTS {self.runs_table} ("
            "run_id TEXT PRIMARY KEY, status TEXT NOT NULL, session_key TEXT NOT NULL, "
            "agent_id TEXT NOT NULL, step TEXT NOT NULL, requester_key TEXT, trace_id TEXT, "
            "parent_run_id TEXT, hop BIGINT NOT NULL, created_at BIGINT NOT NULL, "
            "started_at BIGINT, ended_at BIGINT, attempt BIGINT NOT NULL, usage TEXT, "
            "model TEXT, error TEXT, exchange_id TEXT, spawn_id TEXT)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_runs_recent ON {self.runs_table} "
            "(created_at DESC, run_id DESC)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_runs_session ON {self.runs_table} "
            "(session_key, created_at DESC, run_id DESC)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_runs_status ON {self.runs_table} "
            "(status, created_at DESC, run_id DESC)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_runs_trace ON {self.runs_table} "
            "(trace_id, created_at DESC, run_id DESC)",
            f"CREATE INDEX IF NOT EXISTS {self.n}sw_runs_parent ON {self.runs_table} "
            "(parent_run_id)",
        ]

    def drop_statements(self) -> list[str]:
        return [
            *([] if self.transcript_in_log else [f"DELETE FROM {self.transcript}"]),
            f"DELETE FROM {self.sessions}",
            f"DELETE FROM {self.work_table}",
            *self.follow_work_positions,
            f"DELETE FROM {self.streams_table}",
            f"DELETE FROM {self.runs_table}",
            *([f"DELETE FROM {self.views_table}"] if self.history_views else []),
        ]

    # Writes ---------------------------------------------------------------------------

    def write(
        self, cursor: Cursor, changes: ReadModelChanges, stored: Sequence[StoredEvent] = ()
    ) -> None:
        """Write ``changes`` (of the save whose rows are ``stored``, just inserted)."""
        execute: Any = partial(cursor.execute, **self.write_options)
        views = self._write_views(cursor, stored) if self.history_views and stored else {}
        for row in changes.rows.values():
            state = row.state
            since = views.pop(row.id, None) if views else None
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
                        self._state_json(state),
                        *self._hot_values(state),
                    ),
                )
                if since is not None:
                    # A new row: its views start with its first message.
                    execute(self.start_views, (since, self.stamp, row.version, row.id.hex))
            elif self._is_narrow(row):
                # A message (or a label or status change): its own columns only.
                execute(*self._narrow_write(row, since))
            else:
                views_set, view_values = self._views_set(row, since)
                execute(
                    self._full_update(views_set),
                    (
                        state.label,
                        state.status,
                        state.updated_at,
                        row.version,
                        row.modified_on_iso,
                        self._state_json(state),
                        *self._hot_values(state),
                        *view_values,
                        row.id.hex,
                        *((state.key,) if self.route_by_key else ()),
                    ),
                )
        for session in views:
            # Messages of a session whose row this save does not write (none is known):
            # its span is broken rather than claimed.
            execute(self.break_views, (session.hex,))
        if self.transcript_in_log:
            pass  # the events just inserted are the transcript (storage v3)
        elif len(changes.transcript) > 1:
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
        if changes.transcript_rows and not self.transcript_in_log:
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
                    (
                        work.status,
                        work.version,
                        work.modified_on_iso,
                        work.state_json,
                        work.id.hex,
                        *((work.session_key,) if self.route_by_key else ()),
                    ),
                )
        for member in changes.members:
            execute(self.insert_member, (member.session_key, member.stream_id.hex, member.kind))
        self.write_runs(execute, changes.runs.values())
        # After the runs: a run is saved with (and before) the exchange or spawn it belongs to.
        for link in changes.run_links:
            routed = (link.session_key,) if self.route_by_key else ()
            if link.exchange_id is not None:
                execute(self.link_exchange, (link.exchange_id, link.run_id, *routed))
            if link.spawn_id is not None:
                execute(self.link_spawn, (link.spawn_id, link.run_id, *routed))

    def _write_views(self, cursor: Cursor, stored: Sequence[StoredEvent]) -> dict[UUID, int]:
        """The views of the messages among ``stored`` that are not their stored line (ADR
        0054), and each session's first message version in them."""
        rows, firsts = self.rendered_views(stored)
        if rows:
            cursor.executemany(self.insert_views, rows)
        return firsts

    def rendered_views(
        self, stored: Sequence[StoredEvent]
    ) -> tuple[list[tuple[Any, ...]], dict[UUID, int]]:
        """``_write_views``'s rows (``insert_views``'s values) and each session's first
        message version among ``stored``."""
        firsts: dict[UUID, int] = {}
        rows: list[tuple[Any, ...]] = []
        redactor = self.redactor
        for record in stored:
            if not isinstance(record, StoredMessage) or not record.body:
                continue
            found = record.originator_id
            session = found if isinstance(found, UUID) else UUID(str(found))
            version = record.originator_version
            if session not in firsts:
                firsts[session] = version
            state = record.state
            end = MESSAGE_BODY_OFFSET + record.body
            # The line as the store reads it (the ``line`` expression), provenance added.
            head = state[MESSAGE_BODY_OFFSET : end - 1].decode()
            if record.provenance is None:
                line = head + _DEFAULT_ENDS.get(record.role, _DEFAULT_ENDS["assistant"])
            else:
                start = end + len(PROVENANCE_MARKER)
                provenance = state[start : start + record.provenance].decode()
                line = f'{head},"provenance":{provenance}}}'
            try:
                own, other, exact = rendered_view(line, redactor)
            except Exception:
                rows.append((self.log_id(session), version, None, None, UNRENDERED))
                continue
            if own is not None or other is not None or exact:
                rows.append((self.log_id(session), version, own, other, int(exact)))
        return rows, firsts

    def write_runs(self, execute: Any, rows: Iterable[RunRow]) -> None:
        for row in rows:
            state = row.state
            usage = state.usage.model_dump_json() if state.usage is not None else None
            if row.is_new:
                execute(
                    self.insert_run,
                    (
                        state.run_id,
                        state.status,
                        state.session_key,
                        state.agent_id,
                        state.step,
                        state.requester_key,
                        state.trace_id,
                        state.parent_run_id,
                        state.hops,
                        row.created_at,
                        state.started_at,
                        state.ended_at,
                        state.attempts,
                        usage,
                        state.model,
                        state.error,
                        state.exchange_id,
                        None,
                    ),
                )
            else:
                execute(
                    self.update_run,
                    (
                        state.status,
                        state.started_at,
                        state.ended_at,
                        state.attempts,
                        usage,
                        state.model,
                        state.error,
                        state.run_id,
                        *((state.session_key,) if self.route_by_key else ()),
                    ),
                )

    def runs_missing(self, cursor: Cursor) -> bool:
        """No run rows, yet runs in the store: recorded before the runs read model."""
        cursor.execute(f"SELECT 1 AS found FROM {self.runs_table} LIMIT 1")
        if cursor.fetchone() is not None:
            return False
        cursor.execute(f"SELECT 1 AS found FROM {self.work_table} WHERE kind = 'run' LIMIT 1")
        return cursor.fetchone() is not None

    def backfill_runs(self, cursor: Cursor) -> int:
        """Fill an empty runs table from the work rows (a store made before it existed):
        the same rows the projection writes, links included. How many runs it wrote."""
        cursor.execute(f"SELECT 1 AS found FROM {self.runs_table} LIMIT 1")
        if cursor.fetchone() is not None:
            return 0
        execute: Any = partial(cursor.execute, **self.write_options)
        cursor.execute(
            f"SELECT kind, created_on, state FROM {self.work_table} "
            "WHERE kind IN ('run', 'exchange', 'spawn') ORDER BY position"
        )
        from sessionwire.application.projection import RunRow
        from sessionwire.domain.run import RunState

        rows: list[RunRow] = []
        links: list[tuple[str, str, str]] = []
        for found in cursor.fetchall():
            kind, state_json = found["kind"], found["state"]
            if kind == "run":
                state = RunState.model_validate_json(state_json)
                created = to_millis(datetime.fromisoformat(found["created_on"]))
                rows.append(
                    RunRow(id=UUID(state.run_id), created_at=created, state=state, is_new=True)
                )
                continue
            owner = json.loads(state_json)
            if kind == "exchange":
                links.append((self.link_exchange, owner["exchange_id"], owner["primary_run_id"]))
            else:
                for run_id in (owner.get("run_id"), owner.get("announce_run_id")):
                    if run_id:
                        links.append((self.link_spawn, owner["spawn_id"], run_id))
        self.write_runs(execute, rows)
        # A store distributed by session key routes each link to its run's shard (ADR 0062).
        run_keys = {row.state.run_id: row.state.session_key for row in rows}
        for statement, owner_id, run_id in links:
            if run_id not in run_keys:
                continue  # a link to a run the work rows no longer hold: nothing to mark
            routed = (run_keys[run_id],) if self.route_by_key else ()
            execute(statement, (owner_id, run_id, *routed))
        return len(rows)

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

    def session(self, cursor: Cursor, key: str) -> StoredSession | None:
        if self.route_by_key:
            # Read within the key's shard: by id alone Citus asks every shard.
            cursor.execute(
                f"SELECT {self.session_select} FROM {self.sessions} "
                f"WHERE id = {self.m} AND key = {self.m}",
                (session_uuid(key).hex, key),
            )
            found = cursor.fetchone()
            return None if found is None else self.stored_session(found)
        return self.session_row(cursor, session_uuid(key))

    def session_row(self, cursor: Cursor, aggregate_id: UUID) -> StoredSession | None:
        cursor.execute(
            f"SELECT {self.session_select} FROM {self.sessions} WHERE id = {self.m}",
            (aggregate_id.hex,),
        )
        found = cursor.fetchone()
        return None if found is None else self.stored_session(found)

    def sessions_by_session_id(self, cursor: Cursor, session_id: str) -> list[StoredSession]:
        return self.sessions_where(cursor, "session_id", session_id)

    def sessions_by_label(self, cursor: Cursor, label: str) -> list[StoredSession]:
        return self.sessions_where(cursor, "label", label)

    def listings_by_label(self, cursor: Cursor, label: str) -> list[SessionListing]:
        cursor.execute(self._where_statement(self.listing_select, "label"), (label,))
        return self._listings(cursor.fetchall())

    def sessions_where(self, cursor: Cursor, column: str, value: str) -> list[StoredSession]:
        cursor.execute(self._where_statement(self.session_select, column), (value,))
        return [self.stored_session(found) for found in cursor.fetchall()]

    def _where_statement(self, columns: str, column: str) -> str:
        assert column in {"session_id", "label"}
        return (
            f"SELECT {columns} FROM {self.sessions} "
            f"WHERE {column} = {self.m} AND status = 'active' ORDER BY key"
        )

    def list_sessions(self, cursor: Cursor, query: SessionQuery) -> list[StoredSession]:
        found = self._list_rows(cursor, self.session_select, query)
        return [self.stored_session(each) for each in found]

    def list_listings(self, cursor: Cursor, query: SessionQuery) -> list[SessionListing]:
        return self._listings(self._list_rows(cursor, self.listing_select, query))

    def _list_rows(self, cursor: Cursor, columns: str, query: SessionQuery) -> list[Any]:
        condition = self.session_conditions(query)
        if condition is None:
            return []
        where, params = condition
        cursor.execute(
            f"SELECT {columns} FROM {self.sessions} WHERE {where} "
            f"ORDER BY updated_at DESC, key LIMIT {self.m}",
            [*params, query.limit],
        )
        return cursor.fetchall()

    def session_conditions(
        self, query: SessionQuery, table: str = ""
    ) -> tuple[str, list[Any]] | None:
        """``query``'s filters (not its limit) as a condition on the sessions table (its
        columns qualified by ``table``, an alias, when given) and its parameters; None
        when no session can match. ``list_sessions`` and the transcript search's scopes
        both filter with it."""
        m = self.m
        t = f"{table}." if table else ""
        where = [f"{t}status = 'active'"]
        params: list[Any] = []
        if query.updated_since_ms is not None:
            where.append(f"{t}updated_at >= {m}")
            params.append(query.updated_since_ms)
        for column, values in (
            ("kind", query.kinds),
            ("agent_id", query.agent_ids),
            ("key", query.keys),
            ("spawned_by", query.spawned_by_any),
        ):
            if values is not None:
                if not values:
                    return None
                where.append(f"{t}{column} IN ({', '.join([m] * len(values))})")
                params.extend(sorted(values))
        if query.spawned_by is not None:
            where.append(f"{t}spawned_by = {m}")
            params.append(query.spawned_by)
        if query.exclude_keys:
            where.append(f"{t}key NOT IN ({', '.join([m] * len(query.exclude_keys))})")
            params.extend(sorted(query.exclude_keys))
        return " AND ".join(where), params

    def session_page(self, cursor: Cursor, page: SessionPage) -> list[StoredSession]:
        found = self._page_rows(cursor, self.session_select, page)
        return [self.stored_session(each) for each in found]

    def listing_page(self, cursor: Cursor, page: SessionPage) -> list[SessionListing]:
        return self._listings(self._page_rows(cursor, self.listing_select, page))

    def _page_rows(self, cursor: Cursor, columns: str, page: SessionPage) -> list[Any]:
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
            f"SELECT {columns} FROM {self.sessions} {condition}"
            f"ORDER BY updated_at DESC, key LIMIT {m}",
            params,
        )
        return cursor.fetchall()

    def _listings(self, rows: list[Any]) -> list[SessionListing]:
        """Listings from rows of ``listing_select``: the columns as they are, the fields
        kept only in the state JSON from one orjson decode of it."""
        if rows and isinstance(rows[0], dict):
            rows = [tuple(found.values()) for found in rows]  # psycopg's rows, in order
        make = SessionListing._make
        if self.session_columns:
            return [make((*found[:16], *_json_only_fields(loads(found[16])))) for found in rows]
        listings = []
        for found in rows:
            fields = loads(found[8])
            get = fields.get
            listings.append(
                make((*found[:8], *[get(name) for name in LISTING_HOT], *_json_only_fields(fields)))
            )
        return listings

    def recent_work(
        self,
        cursor: Cursor,
        kind: str,
        *,
        limit: int,
        status: str | None = None,
        before: int | None = None,
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

    def pending_work(
        self,
        cursor: Cursor,
        kind: str,
        statuses: Sequence[str],
        *,
        session_key: str | None = None,
    ) -> list[StoredWork]:
        if not statuses:
            return []
        # The (kind, status, position) index narrows to pending work; the session is a
        # filter on those few rows.
        of_session = f"AND session_key = {self.m} " if session_key is not None else ""
        cursor.execute(
            f"SELECT {WORK_COLUMNS} FROM {self.work_table} WHERE kind = {self.m} "
            f"AND status IN ({', '.join([self.m] * len(statuses))}) {of_session}"
            "ORDER BY position",
            (kind, *statuses, *([session_key] if session_key is not None else [])),
        )
        return [stored_work(found) for found in cursor.fetchall()]

    def agent_ids(self, cursor: Cursor) -> list[str]:
        cursor.execute(
            f"SELECT DISTINCT agent_id FROM {self.sessions} WHERE status = 'active' "
            "ORDER BY agent_id"
        )
        return [found["agent_id"] for found in cursor.fetchall()]

    def transcript_tail(
        self,
        cursor: Cursor,
        session: UUID,
        *,
        limit: int,
        include_tools: bool,
        key: str | None = None,
    ) -> list[str]:
        """The newest ``limit`` lines of ``session``'s transcript (``key``: its key, when
        known, so a sharded store reads one shard)."""
        if self.transcript_in_log:
            return self._log_tail(
                cursor, session, limit=limit, include_tools=include_tools, key=key
            )
        role_filter = "" if include_tools else "AND role <> 'toolResult' "
        cursor.execute(
            f"SELECT message FROM {self.transcript} WHERE session = {self.m} {role_filter}"
            f"ORDER BY seq DESC LIMIT {self.m}",
            (session.hex, limit),
        )
        messages = [found["message"] for found in cursor.fetchall()]
        messages.reverse()
        return messages

    def session_transcript(
        self,
        cursor: Cursor,
        key: str,
        window: TranscriptWindow,
        wanted: Callable[[StoredSession], bool],
    ) -> SessionTranscript:
        found = self.session(cursor, key)
        if found is None or not wanted(found):
            return SessionTranscript(found)
        if window.view is not None and self.history_views:
            rendered = self.rendered_window(cursor, found, window)
            if rendered is not None:
                return SessionTranscript(found, None, rendered.total, rendered)
        if window.offset is None:
            tail = self.transcript_tail(
                cursor,
                found.id,
                limit=window.limit,
                include_tools=window.include_tools,
                key=found.state.key,
            )
            return SessionTranscript(found, tail)
        page = self.transcript_page(
            cursor,
            found.id,
            offset=window.offset,
            limit=window.limit,
            include_tools=window.include_tools,
            key=found.state.key,
        )
        return SessionTranscript(found, page.messages, page.total)

    def rendered_window(
        self, cursor: Cursor, found: StoredSession, window: TranscriptWindow
    ) -> RenderedWindow | None:
        """``window`` of ``found``'s transcript as its reader reads it, concatenated from
        the stored views in one query (ADR 0054); None when a message of it has no view
        rendered for this reader (written before the views, or under other patterns, a
        v2 row, a failed rendering), when it is empty or over the byte cap, or for a fork
        (whose window holds its source's lines): the reader then renders the lines."""
        view = window.view
        if view is None or found.state.forked_from is not None or window.limit <= 0:
            return None
        m = self.m
        stream = self.log_id(found.id)
        role_filter = "" if window.include_tools else "AND e.role <> 'toolResult' "
        total: int | None = None
        offset = 0
        if window.offset is not None:
            cursor.execute(
                f"SELECT COUNT(*) AS n FROM {self.events} e "
                f"WHERE originator_id = {m} AND role IS NOT NULL {role_filter}",
                (stream,),
            )
            total = int(cursor.fetchone()["n"])
            offset = window.offset
            if offset >= total:
                return None
        # The session's own view is its line unless cleaning changed it; another
        # session's, the masked one unless masking changed nothing.
        text = (
            "COALESCE(h.other, h.own, {line})" if view.masked else "COALESCE(h.own, {line})"
        ).format(line=self.dialect_view_line)
        redacted = "CASE WHEN h.other IS NULL THEN 0 ELSE 1 END" if view.masked else "0"
        cursor.execute(
            self._window_statement(text, redacted, role_filter),
            (stream, window.limit, offset, found.id.hex),
        )
        got = cursor.fetchone()
        if got is None:
            return None  # the session row went meanwhile (an archive, a rebuild)
        count = int(got["n"])
        stamp, since, upto = got["stamp"], got["since"], got["upto"]
        if (
            not count
            or got["lines"] != count
            or stamp is None
            or since is None
            or upto is None
            or int(upto) != int(got["version"])
            or int(got["first"]) < int(since)
            or int(got["exact"]) >= UNRENDERED
        ):
            return None
        if view.masked:
            if stamp != view.stamp:
                return None
        elif stamp.partition(":")[0] != view.stamp.partition(":")[0]:
            # The own view depends on the rendering only, not on the patterns.
            return None
        size = int(got["size"]) + count + 1
        if size > view.max_bytes:
            return None
        return RenderedWindow(
            messages=f"[{got['messages']}]",
            count=count,
            size=size,
            redacted=bool(got["redacted"]),
            exact=bool(got["exact"]),
            total=total,
        )

    def _window_statement(self, text: str, redacted: str, role_filter: str) -> str:
        """``rendered_window``'s one query: the window's views (``text``) joined oldest
        first, with what decides whether they may answer it (cached: a few shapes)."""
        key = (text, redacted, role_filter)
        found = self._window_statements.get(key)
        if found is None:
            m = self.m
            dialect = self.dialect
            # Oldest first: the aggregate's own order where it takes one, else the
            # order of the rows it is given. The session row joins the one aggregate
            # row (joined to each message row, it cost PostgreSQL a sort of them all).
            ordered = "" if dialect.joined_in_order else " ORDER BY ver"
            found = self._window_statements[key] = (
                "SELECT w.messages, w.n, w.lines, w.first, w.exact, w.redacted, w.size, "
                "s.view_stamp AS stamp, s.view_since AS since, s.view_upto AS upto, "
                "s.version AS version "
                f"FROM (SELECT {dialect.joined('v', 'ver')} AS messages, COUNT(*) AS n, "
                "COUNT(body) AS lines, MIN(ver) AS first, MAX(exact) AS exact, "
                f"MAX(red) AS redacted, SUM({dialect.byte_length('v')}) AS size "
                "FROM (SELECT * FROM ("
                f"SELECT e.originator_version AS ver, e.body AS body, {text} AS v, "
                f"COALESCE(h.exact, 0) AS exact, {redacted} AS red "
                f"FROM {self.events} e LEFT JOIN {self.views_table} h "
                "ON h.originator_id = e.originator_id "
                "AND h.originator_version = e.originator_version "
                f"WHERE e.originator_id = {m} AND e.role IS NOT NULL {role_filter}"
                f"ORDER BY e.originator_version DESC LIMIT {m} OFFSET {m}) newest"
                f"{ordered}) window_rows) w, "
                f"(SELECT view_stamp, view_since, view_upto, version FROM {self.sessions} "
                f"WHERE id = {m}) s"
            )
        return found

    def transcript_page(
        self,
        cursor: Cursor,
        session: UUID,
        *,
        offset: int,
        limit: int,
        include_tools: bool,
        key: str | None = None,
    ) -> TranscriptPage:
        if self.transcript_in_log:
            return self._log_page(
                cursor, session, offset=offset, limit=limit, include_tools=include_tools, key=key
            )
        role_filter = "" if include_tools else "AND role <> 'toolResult' "
        stream = session.hex
        cursor.execute(
            f"SELECT COUNT(*) AS n FROM {self.transcript} WHERE session = {self.m} {role_filter}",
            (stream,),
        )
        total = int(cursor.fetchone()["n"])
        if offset >= total or limit <= 0:
            # Past the end: nothing to read (and an offset beyond 64 bits never reaches SQL).
            return TranscriptPage(messages=[], total=total)
        cursor.execute(
            f"SELECT message FROM {self.transcript} WHERE session = {self.m} {role_filter}"
            f"ORDER BY seq DESC LIMIT {self.m} OFFSET {self.m}",
            (stream, limit, offset),
        )
        messages = [found["message"] for found in cursor.fetchall()]
        messages.reverse()
        return TranscriptPage(messages=messages, total=total)

    def _log_page(
        self,
        cursor: Cursor,
        aggregate_id: UUID,
        *,
        offset: int,
        limit: int,
        include_tools: bool,
        key: str | None = None,
    ) -> TranscriptPage:
        """``transcript_page`` from the session's message rows (storage v3): one row a
        line, paged in SQL; an upgraded store's v2 rows (a batch holds several lines)
        make the count and the page come from the decoded view instead."""
        role_filter = "" if include_tools else "AND role <> 'toolResult' "
        session = self.log_id(aggregate_id)
        within, routed = self._within(key)
        cursor.execute(
            f"SELECT COUNT(*) AS n, COUNT(body) AS lines FROM {self.events} "
            f"WHERE originator_id = {self.m}{within} AND role IS NOT NULL {role_filter}",
            (session, *routed),
        )
        counted = cursor.fetchone()
        rows, one_line_rows = int(counted["n"]), int(counted["lines"])
        if rows != one_line_rows:
            lines = self._log_tail(
                cursor, aggregate_id, limit=ALL_LINES, include_tools=include_tools, key=key
            )
            total = len(lines)
            if offset >= total or limit <= 0:
                return TranscriptPage(messages=[], total=total)
            end = total - offset
            return TranscriptPage(messages=lines[max(0, end - limit) : end], total=total)
        if offset >= rows or limit <= 0:
            # Past the end: nothing to read (and an offset beyond 64 bits never reaches SQL).
            return TranscriptPage(messages=[], total=rows)
        cursor.execute(
            f"SELECT {self.line} FROM {self.events} "
            f"WHERE originator_id = {self.m}{within} AND role IS NOT NULL {role_filter}"
            f"ORDER BY originator_version DESC LIMIT {self.m} OFFSET {self.m}",
            (session, *routed, limit, offset),
        )
        messages = [found["line"] for found in cursor.fetchall()]
        messages.reverse()
        return TranscriptPage(messages=messages, total=rows)

    def _log_tail(
        self,
        cursor: Cursor,
        aggregate_id: UUID,
        *,
        limit: int,
        include_tools: bool,
        key: str | None = None,
    ) -> list[str]:
        """The newest ``limit`` lines from the session's message rows (storage v3): the
        primary key (originator_id, originator_version) read backwards. A row is one line,
        except a batch of messages; pages are read until ``limit`` lines are found."""
        role_filter = "" if include_tools else "AND role <> 'toolResult' "
        newest_first: list[str] = []
        below: int | None = None
        within, routed = self._within(key)
        while len(newest_first) < limit:
            bound = "" if below is None else f"AND originator_version < {self.m} "
            wanted = limit - len(newest_first)
            cursor.execute(
                f"SELECT originator_version, {self.line} FROM {self.events} "
                f"WHERE originator_id = {self.m}{within} AND role IS NOT NULL "
                f"{role_filter}{bound}ORDER BY originator_version DESC LIMIT {self.m}",
                (
                    self.log_id(aggregate_id),
                    *routed,
                    *([] if below is None else [below]),
                    wanted,
                ),
            )
            rows = cursor.fetchall()
            for row in rows:
                if row["line"] is not None:
                    newest_first.append(row["line"])
                    continue
                # A v2-layout message or batch (an upgraded store): decoded.
                lines = self._decoded_lines(cursor, aggregate_id, int(row["originator_version"]))
                for role, line in reversed(lines):
                    if include_tools or role != "toolResult":
                        newest_first.append(line)
            if len(rows) < wanted:
                break
            below = int(rows[-1]["originator_version"])
        del newest_first[limit:]
        newest_first.reverse()
        return newest_first

    def _decoded_lines(
        self, cursor: Cursor, aggregate_id: UUID, version: int
    ) -> list[tuple[str, str]]:
        cursor.execute(
            f"SELECT topic, state FROM {self.events} WHERE originator_id = {self.m} "
            f"AND originator_version = {self.m}",
            (self.log_id(aggregate_id), version),
        )
        found = cursor.fetchone()
        return transcript_lines(aggregate_id, version, found["topic"], bytes(found["state"]), None)

    def stored_session(self, found: Any) -> StoredSession:
        if not self.session_columns:
            return stored_session(found)
        fields = loads(found["state"])
        for name in ("label", "status", "updated_at"):
            fields[name] = found[name]
        for name in HOT_COLUMNS:
            fields[name] = found[name]
        # Imported with the first row read whole: a listing reads none (issue 38 item 7).
        from sessionwire.domain.session import SessionState

        return StoredSession(
            id=UUID(found["id"]),
            version=int(found["version"]),
            created_on=datetime.fromisoformat(found["created_on"]),
            modified_on=datetime.fromisoformat(found["modified_on"]),
            state=SessionState.model_validate(fields),
        )

    def _log_transcript(self, cursor: Cursor) -> list[tuple[object, ...]]:
        """Every message row of the log as a v2 transcript row (session, seq, role, line),
        for snapshots and comparisons: a batch gives one row per message."""
        cursor.execute(
            "SELECT originator_id, originator_version, topic, state, body, role "
            f"FROM {self.events} WHERE role IS NOT NULL ORDER BY originator_id, originator_version"
        )
        rows: list[tuple[object, ...]] = []
        for found in cursor.fetchall():
            stream = UUID(str(found["originator_id"]))
            version = int(found["originator_version"])
            lines = transcript_lines(
                stream, version, found["topic"], bytes(found["state"]), found["body"]
            )
            first = version - len(lines) + 1
            for index, (role, line) in enumerate(lines):
                rows.append((stream.hex, first + index, role or found["role"], line))
        return rows

    def run(self, cursor: Cursor, run_id: str) -> StoredRun | None:
        cursor.execute(
            f"SELECT {RUN_COLUMNS} FROM {self.runs_table} WHERE run_id = {self.m}", (run_id,)
        )
        found = cursor.fetchone()
        return None if found is None else stored_run(found)

    def list_runs(self, cursor: Cursor, query: RunQuery) -> list[StoredRun]:
        m = self.m
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("session_key", query.session_key),
            ("status", query.status),
            ("trace_id", query.trace_id),
            ("parent_run_id", query.parent_run_id),
        ):
            if value is not None:
                where.append(f"{column} = {m}")
                params.append(value)
        if query.before is not None:
            # Keyset paging in the indexes' order (created_at DESC, run_id DESC).
            where.append(f"created_at <= {m} AND (created_at < {m} OR run_id < {m})")
            params += [query.before[0], query.before[0], query.before[1]]
        params.append(query.limit)
        condition = f"WHERE {' AND '.join(where)} " if where else ""
        cursor.execute(
            f"SELECT {RUN_COLUMNS} FROM {self.runs_table} {condition}"
            f"ORDER BY created_at DESC, run_id DESC LIMIT {m}",
            params,
        )
        return [stored_run(found) for found in cursor.fetchall()]

    def snapshot(self, cursor: Cursor) -> dict[str, list[tuple[object, ...]]]:
        cursor.execute(f"SELECT {self.session_select} FROM {self.sessions} ORDER BY id")
        names = [name.strip() for name in self.session_select.split(",")]
        sessions = [tuple(found[c] for c in names) for found in cursor.fetchall()]
        transcript: list[tuple[object, ...]] = []
        if self.transcript_in_log:
            transcript = self._log_transcript(cursor)
        else:
            cursor.execute(
                f"SELECT session, seq, role, message FROM {self.transcript} ORDER BY session, seq"
            )
            transcript = [
                (f["session"], f["seq"], f["role"], f["message"]) for f in cursor.fetchall()
            ]
        columns = ", ".join(WORK_ROW_COLUMNS)
        cursor.execute(f"SELECT {columns} FROM {self.work_table} ORDER BY position")
        work = [tuple(found[c] for c in WORK_ROW_COLUMNS) for found in cursor.fetchall()]
        cursor.execute(
            f"SELECT session_key, stream_id, kind FROM {self.streams_table} "
            "ORDER BY session_key, stream_id"
        )
        members = [(f["session_key"], f["stream_id"], f["kind"]) for f in cursor.fetchall()]
        cursor.execute(f"SELECT {RUN_COLUMNS} FROM {self.runs_table} ORDER BY run_id")
        runs = [tuple(found[c] for c in RUN_ROW_COLUMNS) for found in cursor.fetchall()]
        return {
            "sessions": sessions,
            "transcript": transcript,
            "work": work,
            "session_streams": members,
            "runs": runs,
        }


def _sql_text(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def escape_like(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern (``!`` is the escape character)."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


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


RUN_ROW_COLUMNS = (
    "run_id",
    "status",
    "session_key",
    "agent_id",
    "step",
    "requester_key",
    "trace_id",
    "parent_run_id",
    "hop",
    "created_at",
    "started_at",
    "ended_at",
    "attempt",
    "usage",
    "model",
    "error",
    "exchange_id",
    "spawn_id",
)
RUN_COLUMNS = ", ".join(RUN_ROW_COLUMNS)


def stored_run(found: Any) -> StoredRun:
    def number(column: str) -> int | None:
        value = found[column]
        return None if value is None else int(value)

    return StoredRun(
        run_id=found["run_id"],
        status=found["status"],
        session_key=found["session_key"],
        agent_id=found["agent_id"],
        step=found["step"],
        requester_key=found["requester_key"],
        trace_id=found["trace_id"],
        parent_run_id=found["parent_run_id"],
        hop=int(found["hop"]),
        created_at=int(found["created_at"]),
        started_at=number("started_at"),
        ended_at=number("ended_at"),
        attempt=int(found["attempt"]),
        usage=json.loads(found["usage"]) if found["usage"] is not None else None,
        model=found["model"],
        error=found["error"],
        exchange_id=found["exchange_id"],
        spawn_id=found["spawn_id"],
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
    from sessionwire.domain.session import SessionState

    return StoredSession(
        id=UUID(found["id"]),
        version=int(found["version"]),
        created_on=datetime.fromisoformat(found["created_on"]),
        modified_on=datetime.fromisoformat(found["modified_on"]),
        state=SessionState.model_validate_json(found["state"]),
    )


def _getter(names: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The named attributes of an object, as a tuple (``attrgetter``: in C)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda state: (one(state),)
    return lambda state: ()
