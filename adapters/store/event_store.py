"""The event store: eventsourcing 9.5 on SQLite (file or memory) or PostgreSQL.

Each recorder subclass writes the read-model changes on the cursor that inserts the
events, so events and read models commit together or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar, cast
from urllib.parse import parse_qs, unquote, urlsplit
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder
from eventsourcing.utils import get_topic
from psycopg.sql import SQL
from sessionwire.adapters.store.chain import SqlChain, postgres_tables, sqlite_tables
from sessionwire.adapters.store.read_models import SqlReadModel
from sessionwire.adapters.store.serialisation import JSONBytesTranscoder, PydanticMapper
from sessionwire.adapters.store.writer_lock import SQLiteWriterLock
from sessionwire.application.ports.store import (
    SessionQuery,
    SessionStore,
    StoreConflict,
    StoredSession,
    StoredWork,
)
from sessionwire.application.projection import ReadModelChanges, Replay, project
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.hash_chain import RecordContent
from sessionwire.domain.session import Session, SessionState, session_uuid

KindOf = Callable[[SessionState], str]
READ_MODEL_KEY = "read_model_changes"
LOG_PAGE = 500
WRITE_CACHE_SIZE = 10_000
ANALYZE_FIRST_AT = 1_000


class StoreURLError(ValueError):
    """A store location that cannot be opened; the message shows the accepted forms."""


def _no_kind(state: SessionState) -> str:
    return "other"


def _contents(
    notification_ids: Sequence[int], stored_events: Sequence[StoredEvent]
) -> list[tuple[int, RecordContent]]:
    return [
        (
            notification_id,
            RecordContent(
                originator_id=UUID(str(stored.originator_id)),
                originator_version=stored.originator_version,
                topic=stored.topic,
                state=stored.state,
            ),
        )
        for notification_id, stored in zip(notification_ids, stored_events, strict=True)
    ]


class SQLiteSessionRecorder(SQLiteApplicationRecorder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.read_model = SqlReadModel(marker="?", kind_of=_no_kind, write_options={})
        self.chain = SqlChain(sqlite_tables(), write_options={})
        super().__init__(*args, **kwargs)

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            *self.read_model.create_statements(),
            *self.chain.create_statements(),
        ]

    def _insert_events(self, c: Any, stored_events: Any, **kwargs: Any) -> Any:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        assert notification_ids is not None
        changes: ReadModelChanges | None = kwargs.get(READ_MODEL_KEY)
        if changes:
            self.read_model.write(c, changes)
        # The hash chain, in the transaction that records the events (ADR 0008).
        self.chain.append(c, _contents(notification_ids, stored_events))
        return notification_ids


class PostgresSessionRecorder(PostgresApplicationRecorder):
    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        # No server-side prepared statements for our writes: they run in a pipeline,
        # and when a conflicting save aborts it psycopg can lose track of a statement it
        # was preparing ("prepared statement _pg3_N does not exist" on the next save).
        self.read_model = SqlReadModel(
            marker="%s",
            prefix=f'"{self.datastore.schema}".',
            kind_of=_no_kind,
            write_options={"prepare": False},
        )
        self.chain = SqlChain(
            postgres_tables(self.datastore.schema, self.events_table_name),
            write_options={"prepare": False},
        )
        # The chain table last: _postgres_setup takes its presence to mean "all created".
        for statement in [*self.read_model.create_statements(), *self.chain.create_statements()]:
            self.sql_create_statements.append(SQL(statement))  # type: ignore[arg-type]

    def _insert_stored_events(self, curs: Any, stored_events: Any, **kwargs: Any) -> None:
        # Same transaction (and pipeline) as the events, and after them: a conflicting
        # save then fails on the events' primary key, where eventsourcing expects it.
        # Failing earlier, in our statements, would skip the table-lock statement that
        # psycopg believes it prepared, breaking the connection's next save.
        try:
            super()._insert_stored_events(curs, stored_events, **kwargs)
            changes: ReadModelChanges | None = kwargs.get(READ_MODEL_KEY)
            if changes:
                # Another cursor: eventsourcing reads the new notification ids from this one.
                with curs.connection.cursor() as view_cursor:
                    self.read_model.write(view_cursor, changes)
        except psycopg.Error:
            # The conflict came back early, while later statements were still being sent
            # (the server answered first: a loaded machine). That leaves the pipeline
            # aborted, and unless it is synced now the commit fails with "pipeline
            # aborted", an OperationalError that hides the conflict from our retries.
            _sync_pipeline(curs.connection)
            raise

    def _fetch_ids_after_insert_events(
        self, curs: Any, stored_events: Any, **kwargs: Any
    ) -> Sequence[int] | None:
        # After the pipeline's sync: the events are in (a conflict raised before this)
        # and the table lock taken before them serialises every writer until commit, so
        # the chain's head read here is the log's head (ADR 0008).
        notification_ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        assert notification_ids is not None
        with curs.connection.cursor() as chain_cursor:
            self.chain.append(chain_cursor, _contents(notification_ids, stored_events))
        return notification_ids


def _sync_pipeline(connection: psycopg.Connection[Any]) -> None:
    # pipeline() inside a pipeline yields that same pipeline; syncing an aborted one
    # reports it as an error, which the error being raised already explains.
    with contextlib.suppress(psycopg.Error), connection.pipeline() as pipeline:
        pipeline.sync()


# First half of the advisory-lock key pair for session locks (any fixed number).
_SESSION_LOCK_SPACE = 7251


class PostgresSessionLock(AbstractAsyncContextManager[None]):
    """A session-level advisory lock: one run per session across every gateway process.

    The lock belongs to a database connection, so a process that dies releases it.
    """

    POLL_SECONDS = 0.002

    def __init__(self, recorder: PostgresSessionRecorder, key: str) -> None:
        self.recorder = recorder
        # Advisory locks are database-wide: the schema is part of the key, so stores in
        # other schemas of the same database never wait on this one's runs.
        self.key = f"{recorder.datastore.schema}:{key}"
        self._held: Any = None

    async def __aenter__(self) -> None:
        while True:
            connection_context = self.recorder.datastore.get_connection()
            connection = connection_context.__enter__()
            locked = connection.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS locked",
                (_SESSION_LOCK_SPACE, self.key),
            ).fetchone()
            if locked and locked["locked"]:
                self._held = (connection_context, connection)
                return
            connection_context.__exit__(None, None, None)
            # A blocking pause, then a turn of the loop: event-loop timers stop under
            # freezegun's frozen time, and this runs in frozen-time tests too.
            time.sleep(self.POLL_SECONDS)
            await asyncio.sleep(0)

    async def __aexit__(self, *_: object) -> None:
        connection_context, connection = self._held
        self._held = None
        try:
            connection.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(%s))", (_SESSION_LOCK_SPACE, self.key)
            )
        finally:
            connection_context.__exit__(None, None, None)


class SessionwireApplication(Application):  # type: ignore[type-arg]
    name = "sessionwire"
    env: ClassVar[dict[str, str]] = {
        "MAPPER_TOPIC": get_topic(PydanticMapper),
        "TRANSCODER_TOPIC": get_topic(JSONBytesTranscoder),
    }


def store_env(url: str) -> tuple[dict[str, str], str]:
    """Application settings for a store URL, and a printable location (no password)."""
    if url == "memory":
        name = f"file:sessionwire-{uuid.uuid4().hex}?mode=memory&cache=shared"
        return _sqlite_env(name), "memory"
    if url.startswith("sqlite:"):
        raw = url[len("sqlite:") :]
        path = "/" + raw.lstrip("/") if raw.startswith("//") else raw
        if not path or path == "/":
            raise StoreURLError(f"no file in store URL {url!r}; use sqlite:///path/to/file.db")
        file = Path(path).expanduser()
        if not file.parent.is_dir():
            raise StoreURLError(f"directory {file.parent} of store {url!r} does not exist")
        return _sqlite_env(str(file)), str(file)
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        database = parts.path.lstrip("/")
        if not database:
            raise StoreURLError(f"no database in store URL {url!r}; use postgresql://user@host/db")
        schema = parse_qs(parts.query).get("schema", ["public"])[0]
        if not schema.replace("_", "").isalnum():
            raise StoreURLError(f"schema {schema!r} must be letters, digits and underscores")
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "APPLICATION_RECORDER_TOPIC": get_topic(PostgresSessionRecorder),
            "POSTGRES_DBNAME": database,
            "POSTGRES_HOST": parts.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(parts.port or 5432),
            "POSTGRES_USER": unquote(parts.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parts.password or ""),
            "POSTGRES_SCHEMA": schema,
            "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
            "POSTGRES_CONNECT_TIMEOUT": "5",
        }
        host = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5432}"
        location = f"postgresql://{unquote(parts.username or 'postgres')}@{host}/{database}"
        if schema != "public":
            location += f"?schema={schema}"
        return env, location
    raise StoreURLError(
        f"unknown store {url!r}: use 'memory', 'sqlite:///path/to/file.db' "
        "or 'postgresql://user@host:port/db'"
    )


def _sqlite_env(name: str) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "APPLICATION_RECORDER_TOPIC": get_topic(SQLiteSessionRecorder),
        "SQLITE_DBNAME": name,
        "SQLITE_LOCK_TIMEOUT": "30",
    }


# Any fixed number: the advisory lock that serialises creating sessionwire's tables.
_SETUP_LOCK = 7_251_030_117


@contextmanager
def _postgres_setup(env: dict[str, str]) -> Iterator[None]:
    """Create the schema and tables once, with no DDL at all when they exist.

    Gateways starting together would otherwise run CREATE ... IF NOT EXISTS against
    each other's writes: the DDL's table locks deadlock with a writer's row and table
    locks, and concurrent catalog updates fail ("tuple concurrently updated").
    """
    schema = env["POSTGRES_SCHEMA"]
    with psycopg.connect(
        dbname=env["POSTGRES_DBNAME"],
        host=env["POSTGRES_HOST"],
        port=int(env["POSTGRES_PORT"]),
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"] or None,
        connect_timeout=5,
        autocommit=True,
    ) as connection:
        connection.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
        try:
            connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            found = connection.execute(
                "SELECT to_regclass(%s)", (f'"{schema}".sw_chain',)
            ).fetchone()
            if found is not None and found[0] is not None:
                env["CREATE_TABLE"] = "n"
            yield
        finally:
            connection.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))


class EventSourcedStore(SessionStore):
    def __init__(self, url: str, *, kind_of: KindOf, writer: bool = False) -> None:
        """``writer``: this store carries on the work it holds (a resuming gateway); on an
        SQLite file that takes the file's writer lock first (decision 20)."""
        env, self.location = store_env(url)
        self._writer_lock: SQLiteWriterLock | None = None
        if writer and url != "memory" and env["PERSISTENCE_MODULE"] == "eventsourcing.sqlite":
            self._writer_lock = SQLiteWriterLock(Path(self.location))
            self._writer_lock.acquire()
        try:
            self._open(env, kind_of)
        except BaseException:
            self._release_writer_lock()
            raise

    def _open(self, env: dict[str, str], kind_of: KindOf) -> None:
        if env["PERSISTENCE_MODULE"] == "eventsourcing.postgres":
            with _postgres_setup(env):
                self.app = SessionwireApplication(env=env)
        else:
            self.app = SessionwireApplication(env=env)
        recorder = self.app.recorder
        assert isinstance(recorder, SQLiteSessionRecorder | PostgresSessionRecorder)
        self.recorder = recorder
        self.read_model = recorder.read_model
        self.read_model.kind_of = kind_of
        # Sessions as this process last wrote them: saves one read per append.
        self._written: OrderedDict[str, StoredSession] = OrderedDict()
        self._new_rows = 0
        self._analyze_at = ANALYZE_FIRST_AT
        self.analyze()

    def _reading(self) -> Any:
        return self.recorder.datastore.transaction(commit=False)

    def _writing(self) -> Any:
        return self.recorder.datastore.transaction(commit=True)

    def save(self, *aggregates: Aggregate) -> None:
        events: list[DomainEvent] = []
        for aggregate in aggregates:
            events.extend(cast(Sequence[DomainEvent], aggregate.collect_events()))
        if not events:
            return
        changes = project(list(aggregates), events)
        stored = [self.app.mapper.to_stored_event(event) for event in events]
        try:
            # Straight to the recorder: Application.save() adds per-event bookkeeping
            # (recordings, protocol checks) that nothing here uses, on the hot path.
            self.recorder.insert_events(stored, **{READ_MODEL_KEY: changes})
        except IntegrityError as error:
            for row in changes.rows.values():
                self._written.pop(row.state.key, None)
            raise StoreConflict(str(error)) from error
        for aggregate in aggregates:
            if isinstance(aggregate, Session):
                self._remember(aggregate)
        new_rows = sum(1 for row in changes.rows.values() if row.is_new)
        if new_rows:
            self._count_new_rows(new_rows)

    def _count_new_rows(self, count: int) -> None:
        # PostgreSQL plans sessions_list from table statistics; with autovacuum off (or
        # not yet run) a table that grew from empty looks empty, and the planner sorts
        # the whole table instead of reading the index. Refresh them as the table
        # doubles: at most log2(rows) ANALYZEs, none on the steady-state hot path.
        self._new_rows += count
        if self._new_rows >= self._analyze_at:
            self._analyze_at = self._new_rows * 2
            self.analyze()

    def analyze(self) -> None:
        """Refresh the database's statistics on the read-model tables (PostgreSQL only)."""
        if not isinstance(self.recorder, PostgresSessionRecorder):
            return
        with self._writing() as cursor:
            for table in (self.read_model.sessions, self.read_model.transcript):
                cursor.execute(f"ANALYZE {table}")

    def _remember(self, session: Session) -> None:
        key = session.state.key
        self._written[key] = StoredSession(
            id=session.id,
            version=session.version,
            created_on=session.created_on,
            modified_on=session.modified_on,
            state=session.state,
        )
        self._written.move_to_end(key)
        if len(self._written) > WRITE_CACHE_SIZE:
            self._written.popitem(last=False)

    def session_for_update(self, key: str) -> StoredSession | None:
        return self._written.get(key) or self.session(key)

    def session(self, key: str) -> StoredSession | None:
        with self._reading() as cursor:
            return self.read_model.session(cursor, session_uuid(key))

    def sessions_by_session_id(self, session_id: str) -> list[StoredSession]:
        with self._reading() as cursor:
            return self.read_model.sessions_where(cursor, "session_id", session_id)

    def sessions_by_label(self, label: str) -> list[StoredSession]:
        with self._reading() as cursor:
            return self.read_model.sessions_where(cursor, "label", label)

    def list_sessions(self, query: SessionQuery) -> list[StoredSession]:
        with self._reading() as cursor:
            return self.read_model.list_sessions(cursor, query)

    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]:
        if isinstance(self.recorder, PostgresSessionRecorder):
            return PostgresSessionLock(self.recorder, key)
        return super().session_lock(key)

    def work(self, aggregate_id: UUID) -> StoredWork | None:
        with self._reading() as cursor:
            return self.read_model.work(cursor, aggregate_id)

    def pending_work(self, kind: str, statuses: Sequence[str]) -> list[StoredWork]:
        with self._reading() as cursor:
            return self.read_model.pending_work(cursor, kind, statuses)

    def agent_ids(self) -> list[str]:
        with self._reading() as cursor:
            return self.read_model.agent_ids(cursor)

    def transcript(self, session: UUID, *, limit: int, include_tools: bool) -> list[str]:
        with self._reading() as cursor:
            return self.read_model.transcript_tail(
                cursor, session, limit=limit, include_tools=include_tools
            )

    def log_position(self) -> int:
        return self.recorder.max_notification_id() or 0

    def events(self, *, start: int = 1) -> Iterator[tuple[int, DomainEvent]]:
        position = start
        while True:
            page = self.recorder.select_notifications(position, LOG_PAGE)
            for notification in page:
                event = cast(DomainEvent, self.app.mapper.to_domain_event(notification))
                yield notification.id, event
            if len(page) < LOG_PAGE:
                return
            position = page[-1].id + 1

    def stream(
        self, aggregate_id: UUID, *, up_to_version: int | None = None
    ) -> Sequence[DomainEvent]:
        # lte is a bound in the query: an early version reads only its own events.
        events = self.app.events.get(aggregate_id, lte=up_to_version)
        return [cast(DomainEvent, event) for event in events]

    def rebuild_read_models(self) -> None:
        with self._writing() as cursor:
            for statement in self.read_model.drop_statements():
                cursor.execute(statement)
        replay = Replay()
        batch: list[DomainEvent] = []
        for _, event in self.events():
            batch.append(event)
            if len(batch) >= LOG_PAGE:
                self._write(replay.apply(batch))
                batch = []
        if batch:
            self._write(replay.apply(batch))
        self.analyze()

    def _write(self, changes: ReadModelChanges) -> None:
        with self._writing() as cursor:
            self.read_model.write(cursor, changes)

    def read_model_snapshot(self) -> dict[str, list[tuple[object, ...]]]:
        with self._reading() as cursor:
            return self.read_model.snapshot(cursor)

    def close(self) -> None:
        try:
            self.app.close()
        finally:
            self._release_writer_lock()

    def _release_writer_lock(self) -> None:
        if self._writer_lock is not None:
            self._writer_lock.release()
            self._writer_lock = None
