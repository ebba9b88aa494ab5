"""The PostgreSQL backend: one schema of a database, shared by any number of gateways.

Gateway processes on one schema write in parallel: a save takes no lock but its streams'
rows (eventsourcing's table lock and NOTIFY are left out), writing each event's stream
link; the log's order and log hashes are sealed behind the writers (ADR 0016, 0021).
They create the tables once between them, and claim a session's lease while a run
executes in it (``postgres_lease.py``). An awaited save runs on a worker thread
(``postgres_writer.py``), off the event loop.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit
from uuid import UUID, uuid4

import orjson
import psycopg
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
)
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import get_topic, retry
from psycopg.pq import TransactionStatus
from psycopg.sql import SQL
from sessionwire.adapters.store import (
    citus_schema,
    postgres_format,
    postgres_functions,
    postgres_search,
)
from sessionwire.adapters.store.chain import PAGE as SEAL_BATCH
from sessionwire.adapters.store.chain import SqlChain
from sessionwire.adapters.store.event_store import (
    FENCE_KEY,
    READ_MODEL_KEY,
    SAVE_ID_KEY,
    EventSourcedStore,
    Fence,
    RecordsReadModels,
    SessionwireApplication,
    StoreBackend,
    StoreUnavailable,
    StoreURLError,
    no_kind,
    record_contents,
)
from sessionwire.adapters.store.postgres_lease import (
    DEFAULT_LEASE_SECONDS,
    MAX_LEASE_SECONDS,
    MIN_LEASE_SECONDS,
    TAKEOVER_CHECK_SECONDS,
    LeaseKeeper,
    PostgresSessionLease,
    create_lease_tables,
    lease_lost,
    live_gateways,
)
from sessionwire.adapters.store.postgres_save_ids import SaveIds, save_ids_table_statement
from sessionwire.adapters.store.postgres_writer import PostgresWriter, save_threads
from sessionwire.adapters.store.read_models import Cursor, SqlReadModel
from sessionwire.adapters.store.sql_dialect import SqlDialect, as_uuid
from sessionwire.adapters.store.sqlite_format import Progress, stderr_progress
from sessionwire.adapters.store.sqlite_rows import history_columns, history_columns_of
from sessionwire.adapters.store.transcript_search import SqlTranscriptSearch
from sessionwire.application.library_logging import library_logger
from sessionwire.domain.hash_chain import ChainLink, stream_links

if TYPE_CHECKING:
    from sessionwire.application.projection import ReadModelChanges


@contextmanager
def rolled_back_on_failure(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A transaction begun by hand (``BEGIN`` in a pipeline) that fails is rolled back: a
    failed statement made the server skip the rest, ``COMMIT`` too, and it holds the
    failed transaction open until told."""
    try:
        yield
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            conn.rollback()
        raise


@contextmanager
def dropped_on_failure(conn: psycopg.Connection[Any], *, alone: bool) -> Iterator[None]:
    """A save of one statement (``alone``: no BEGIN) that fails after the statement was
    queued closes its connection: the pipeline's exit sends its Sync even when the block
    failed, and that Sync would commit the statement the caller is told failed. Closed
    first, the server drops the statement's implicit transaction."""
    try:
        yield
    except BaseException:
        if alone and not conn.closed:
            conn.close()
        raise


def _pg_final_bound(events: str) -> str:
    # The lowest transaction id that may still write events here: the lowest of this
    # table's writers in flight (a writer's first write is its events, so it holds a lock
    # on the table from before it has an id), else the snapshot's next id. Only this
    # table's writers count: the snapshot's xmin would wait on any transaction of the
    # server. The writers are read after the snapshot is taken: one that ended in
    # between is visible to the next statement's snapshot; one that began since has an
    # id above the bound.
    return (
        "WITH s AS (SELECT pg_current_snapshot() AS snap), "
        "w AS (SELECT x.transactionid::text::bigint AS xid FROM pg_locks r "
        "JOIN pg_locks x ON x.virtualtransaction = r.virtualtransaction "
        "AND x.locktype = 'transactionid' AND x.mode = 'ExclusiveLock' "
        f"WHERE r.locktype = 'relation' AND r.relation = '{events}'::regclass) "
        "SELECT LEAST(pg_snapshot_xmax(s.snap), (SELECT MIN(i) FROM pg_snapshot_xip(s.snap) "
        "AS i WHERE i::text::bigint % 4294967296 IN (SELECT xid FROM w)))::text AS bound "
        "FROM s"
    )


def postgres_dialect(schema: str, events_table: str) -> SqlDialect:
    """How PostgreSQL spells the store's statements in ``schema`` (every backend
    difference of the SQL)."""
    return SqlDialect(
        marker="%s",
        prefix=f'"{schema}".',
        events=f'"{schema}"."{events_table}"',
        position="notification_id",
        chain=f'"{schema}".sw_chain',
        checkpoints=f'"{schema}".sw_checkpoints',
        serial_key="BIGSERIAL PRIMARY KEY",
        id_type="uuid",
        blob_type="bytea",
        key_type="BIGINT",
        to_db_id=lambda value: value,
        from_db_id=as_uuid,
        # SQLite's line (sqlite.py), where ``state`` is bytea (ADR 0036 §6).
        line=(
            "CASE WHEN provenance IS NULL THEN convert_from(substr(state, 12, body), 'UTF8') "
            "ELSE convert_from(substr(state, 12, body - 1), 'UTF8') || ',\"provenance\":' "
            "|| convert_from(substr(state, 26 + body, provenance), 'UTF8') || '}' END AS line"
        ),
        # Server-side prepared statements for every write (see PostgresSessionRecorder).
        write_options={"prepare": True},
        xact_column="xact_id xid8 DEFAULT pg_current_xact_id()",
        final=_pg_final_bound(f'"{schema}"."{events_table}"'),
        text_of=lambda blob: f"convert_from({blob}, 'UTF8')",
        byte_length=lambda text: f"octet_length({text})",
        joined=lambda text, order: f"string_agg({text}, ',' ORDER BY {order})",
        joined_in_order=True,
    )


@dataclass(frozen=True)
class SavePlan:
    """What one save sends in its pipeline: ``before`` (statements ahead of the insert),
    the insert (or the save function's call) and its values, and whether the read-model
    rows follow it; ``alone``: the insert is the whole save (no BEGIN and COMMIT)."""

    alone: bool
    insert: bytes
    values: tuple[Any, ...]
    writes_model: bool
    before: tuple[tuple[str, tuple[Any, ...]], ...] = ()


class PostgresSessionRecorder(RecordsReadModels, PostgresApplicationRecorder):
    keeps_history_views = True
    """Each message's history views rendered and stored by its save (ADR 0054)."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        # Server-side prepared statements for our writes, from their first run on each
        # connection: parsing and planning them every time cost the server more than
        # running them. Always prepare=True (never None or False for the same text on
        # a connection): psycopg loses track of a statement that first ran unprepared
        # and reaches its preparing threshold in a pipeline that aborts ("prepared
        # statement _pg3_N does not exist" on the next save). A failed save also rolls
        # back through conn.rollback(), which forgets every prepared statement on both
        # sides (DEALLOCATE ALL).
        events = f'"{self.datastore.schema}"."{self.events_table_name}"'
        self.events_table = events
        # Storage v3 (ADR 0036 §6): the message rows of the log are the transcript, the
        # session row's hot fields are columns (a narrow UPDATE per message).
        dialect = postgres_dialect(self.datastore.schema, self.events_table_name)
        self.read_model = SqlReadModel(
            dialect,
            kind_of=no_kind,
            transcript_in_log=True,
            session_columns=True,
            history_views=self.keeps_history_views,
        )
        self.chain = SqlChain(replace(dialect, history_columns=history_columns_of))
        self.save_ids = SaveIds(self.datastore.schema, self.events_table_name)
        self.transcript_search = SqlTranscriptSearch(
            self.read_model, postgres_search.search_sql(self.datastore.schema, events)
        )
        # One call a save (ADR 0058): the server-side function takes the save's id, its
        # fence, whether it makes a work row, its events with their history columns and
        # stream links, and a message's narrow session row (positions and seals come
        # from the sealer, behind the writers). Encoded once: psycopg encodes a ``str``
        # on every execute.
        s = f'"{self.datastore.schema}"'
        head = "%s::uuid, %s::text, %s::text, %s::bigint, %s::boolean, %s::jsonb"
        self.append_one_statement = (
            f"SELECT {s}.sw_append_one({head}, %s::uuid, %s::bigint, %s::text, %s::bytea, "
            "%s::text, %s::integer, %s::integer, %s::bytea) AS notification_id"
        ).encode()
        self.append_many_statement = (
            f"SELECT n AS notification_id FROM {s}.sw_append_many({head}, %s::uuid[], "
            "%s::bigint[], %s::text[], %s::bytea[], %s::text[], %s::integer[], "
            "%s::integer[], %s::bytea[]) AS n"
        ).encode()
        # One sealing pass's batch, one call (ADR 0058).
        self.seal_statement = f"SELECT {s}.sw_seal(%s, %s) AS sealed".encode()
        # The v3 views last: _postgres_setup takes the chain's presence to mean "all
        # created".
        for statement in [
            *postgres_format.column_statements(events),
            save_ids_table_statement(self.datastore.schema),
            *self.read_model.create_statements(),
            *self.chain.checkpoint_statements(),
            *postgres_search.create_statements(self.datastore.schema, events),
            *postgres_format.finish_statements(self.datastore.schema, events),
        ]:
            self.sql_create_statements.append(SQL(statement))  # type: ignore[arg-type]
        # No table lock: it ordered commits for eventsourcing's notification readers and
        # for chain v1's log hash, and serialised every writer of the schema. The sealer
        # gives the log its order instead, with no reader ever passing over a gap.
        self.lock_table_statements = []
        self.sealer = BackgroundSealer(self)

    def _notify_channel(self, curs: Any) -> None:
        # Nothing listens (no eventsourcing subscriptions here), and NOTIFY takes a
        # database-wide lock at commit that would serialise the writers again.
        pass

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Any, **kwargs: Any) -> Sequence[int] | None:
        """One transaction, one pipeline, one sync after the COMMIT: the events, the
        read models and the stream links. A conflicting save fails at that sync on the
        events' primary key (eventsourcing's IntegrityError, as before), and nothing is
        kept; unless the conflict is the save's own commit, met again by a retry after a
        dropped connection (the save's id, ``SaveIds``): that is a save that committed.

        eventsourcing's own shape syncs in the middle to read the notification ids back
        first; the stream links do not need them (the sealer reads them), so the save
        costs one round trip to the server.

        A save made under a session's lease checks its fence first in the transaction:
        one that moved on fails the statement, the server skips the rest, and the save
        is refused whole (``LeaseLost``)."""
        if not stored_events:
            return None
        changes: ReadModelChanges | None = kwargs.get(READ_MODEL_KEY)
        fence: Fence | None = kwargs.get(FENCE_KEY)
        # Without one from the store, a fresh id per attempt (no retry recognised).
        save_id: UUID = kwargs.get(SAVE_ID_KEY) or uuid4()
        records = record_contents([0] * len(stored_events), stored_events)
        try:
            return self._insert(stored_events, records, changes, fence, save_id)
        except IntegrityError:
            # eventsourcing's retry (a dropped connection) may run again a save the server
            # had committed: its own events are the conflict then, and its id is there.
            with self.datastore.get_connection() as conn, conn.cursor() as cursor:
                own = self.save_ids.own_commit(cursor, save_id, stored_events)
            if own is None:
                raise
            return own
        except PersistenceError as error:
            refused = lease_lost(error)
            if refused is not None:
                raise refused from None
            raise
        finally:
            # After the commit (or the rollback: a transaction that ended lets the
            # sealer pass what it held back).
            self.sealer.wanted()

    def _insert(
        self,
        stored_events: Any,
        records: Any,
        changes: ReadModelChanges | None,
        fence: Fence | None,
        save_id: UUID,
    ) -> list[int]:
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            # Before the transaction: the previous links are committed and immutable
            # (a stale one only feeds a save that fails on the primary key anyway).
            links = stream_links(
                records, previous_streams=self.chain.previous_streams(cursor, records)
            )
            plan = self._save_plan(save_id, fence, changes, stored_events, links)
            with conn.cursor() as insert_cursor:
                # BEGIN and COMMIT queued with the statements: one sync, one round
                # trip. (conn.transaction() inside a pipeline syncs after its BEGIN,
                # before its COMMIT and after it: with the pipeline's own, four.)
                with (
                    rolled_back_on_failure(conn),
                    conn.pipeline(),
                    dropped_on_failure(conn, alone=plan.alone),
                ):
                    if not plan.alone:
                        cursor.execute("BEGIN", prepare=False)
                    for statement, values in plan.before:
                        cursor.execute(statement, values, prepare=True)
                    insert_cursor.execute(plan.insert, plan.values, prepare=True)
                    if changes and plan.writes_model:
                        self.read_model.write(cursor, changes, stored_events)
                    self.before_commit(cursor, links)
                    if not plan.alone:
                        cursor.execute("COMMIT", prepare=False)
                ids = [int(found["notification_id"]) for found in insert_cursor.fetchall()]
        self.chain.committed(links)
        return ids

    def _save_plan(
        self,
        save_id: UUID,
        fence: Fence | None,
        changes: ReadModelChanges | None,
        stored_events: Any,
        links: Sequence[ChainLink],
    ) -> SavePlan:
        """The save function does the fixed part (ADR 0058); a message's read-model change
        (its session row's narrow update) goes within it, and the save is that one call,
        atomic without BEGIN and COMMIT (the server commits it at the Sync), fenced or
        not. Other read-model rows follow it in the call's transaction."""
        row = self.read_model.narrow_row(changes, stored_events) if changes else None
        alone = not changes or row is not None
        work_lock = changes is not None and any(work.is_new for work in changes.work.values())
        statement, values = self._append_call(save_id, fence, work_lock, row, stored_events, links)
        return SavePlan(alone=alone, insert=statement, values=values, writes_model=not alone)

    def _append_call(
        self,
        save_id: UUID,
        fence: Fence | None,
        work_lock: bool,
        row: dict[str, Any] | None,
        stored_events: Any,
        links: Sequence[ChainLink],
    ) -> tuple[bytes, tuple[Any, ...]]:
        """The call of the save function and its parameters: one event's values, or a
        column of values each (``unnest``) for several."""
        lease: tuple[Any, ...] = (None, None, None)
        if fence is not None:
            lease = (fence.session_key, fence.owner, fence.token)
        head = (
            save_id,
            *lease,
            work_lock,
            None if row is None else orjson.dumps(row).decode(),
        )
        if len(stored_events) == 1:
            (stored,) = stored_events
            return self.append_one_statement, (
                *head,
                stored.originator_id,
                stored.originator_version,
                stored.topic,
                stored.state,
                *history_columns(stored),
                links[0].stream_hash,
            )
        columns = [history_columns(stored) for stored in stored_events]
        return self.append_many_statement, (
            *head,
            [stored.originator_id for stored in stored_events],
            [stored.originator_version for stored in stored_events],
            [stored.topic for stored in stored_events],
            [stored.state for stored in stored_events],
            [column[0] for column in columns],
            [column[1] for column in columns],
            [column[2] for column in columns],
            [link.stream_hash for link in links],
        )

    def before_commit(self, cursor: Any, links: Sequence[ChainLink]) -> None:
        """Where a save's pipeline stands before its COMMIT, every statement queued: it
        sends nothing more (v3 writes the links with the rows). Fault injection and tests
        stop or break a save here (``adapters/testkit/simulator/faults.py``). A save of
        one statement (a message's, with no fence) has no BEGIN: a Sync sent from here
        commits it, and a COMMIT sent from here does too (with the server's warning)."""

    def ensure_search_index(self) -> None:
        """The transcript search's index (ADR 0050) on a schema made before it, built
        once over the log (under the setup lock)."""
        with self.datastore.transaction(commit=True) as cursor:
            postgres_search.ensure_index(cursor, self.datastore.schema, self.events_table_name)

    def ensure_history_views(self) -> None:
        """The session rows' span columns and the views table (ADR 0054) on a schema
        made before them, added once (under the setup lock). Looked up first: an
        ``ALTER TABLE`` takes its lock even when it finds nothing to do, and would
        queue behind the live writers' saves. Their sessions have no span: their
        messages are rendered on read until written."""
        model = self.read_model
        if not model.history_views:
            return
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'sw_sessions'",
                (self.datastore.schema,),
            )
            present = {str(found["column_name"]) for found in cursor.fetchall()}
            for statement in model.missing_view_columns(present):
                cursor.execute(statement)
            cursor.execute("SELECT to_regclass(%s) AS found", (model.views_table,))
            if cursor.fetchone()["found"] is None:
                for statement in model.views_create_statements():
                    cursor.execute(statement)

    def upgrade_chain(self) -> None:
        """Chain v1 (sealed as written, under the table lock) to v2, once."""
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'sw_chain' AND column_name = 'log_seq'",
                (self.datastore.schema,),
            )
            if cursor.fetchone() is not None:
                return
            for statement in [*self.chain.upgrade_statements(), *self.chain.index_statements()]:
                cursor.execute(statement)

    def upgrade_storage(
        self,
        *,
        allow_beside_live: bool,
        progress: Progress = stderr_progress,
        batch: int = postgres_format.UPGRADE_BATCH,
        fail_batch: int | None = None,
    ) -> bool:
        """Storage v2 to v3 (ADR 0036 §6), in place, under the schema's storage lock
        (a connection of its own holds it, so gateways opening meanwhile wait). A v2
        schema with live gateways is refused unless ``allow_beside_live``."""
        schema = self.datastore.schema
        # A v3 schema needs no lock: an upgrade in progress leaves ``sw_chain`` a table
        # until its last transaction, so an opener meanwhile comes to the lock and waits.
        with self.datastore.transaction(commit=False) as cursor:
            if not postgres_format.needs_upgrade(cursor, schema):
                return False
        with self.datastore.get_connection() as locking:
            locking.commit()
            locking.autocommit = True
            try:
                with postgres_format.storage_locked(locking, schema):
                    with self.datastore.transaction(commit=False) as cursor:
                        if not postgres_format.needs_upgrade(cursor, schema):
                            return False  # another gateway upgraded it while we waited
                        holders = live_gateways(cursor, schema)
                    if holders and not allow_beside_live:
                        raise postgres_format.refuse_beside_live(schema, holders)
                    return postgres_format.upgrade(
                        lambda: self.datastore.transaction(commit=True),
                        schema,
                        self.events_table,
                        progress=progress,
                        batch=batch,
                        fail_batch=fail_batch,
                    )
            finally:
                locking.autocommit = False

    def seal_log(self, *, wait: bool = True) -> int:
        """Seal every final record, one batch per transaction, one sealer at a time
        (``wait``: for the lock; otherwise leave it to the sealer holding it)."""
        sealed = 0
        while True:
            count = self._seal_batch(wait=wait)
            if count is None:
                return sealed  # another sealer holds the lock
            sealed += count
            if count and self.sealed_hook is not None:
                self.sealed_hook()  # committed: followers in this process may read them
            if count < SEAL_BATCH:
                return sealed

    def _seal_batch(self, *, wait: bool) -> int | None:
        """One batch (``SqlChain.seal_final``'s rule) in one call of the schema's
        ``sw_seal`` (ADR 0058): its lock (``wait``: waited for; otherwise tried, and a
        pass that finds another sealer holding it reads nothing more: the holder seals
        every gateway's final rows), the head, the bound, the final rows below it, their
        seals and, at the Sync, the commit (which does not wait for the disk: a seal
        lost in a crash is given again, identically, by the next pass, and WAL order
        keeps a later seal from outliving it). None: another sealer holds the lock."""
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(self.seal_statement, (wait, SEAL_BATCH), prepare=True)
            found = cursor.fetchone()
        sealed = None if found is None else found["sealed"]
        return None if sealed is None else int(sealed)

    def create_table(self) -> None:
        """The tables, then the save and sealing functions every save calls (ADR 0058): a
        recorder made on its own (eventsourcing's recorder contract) saves from the start."""
        super().create_table()
        self.ensure_functions()

    def ensure_functions(self) -> None:
        """The save and sealing functions (ADR 0058), created or replaced when the
        schema's recorded version differs (under the setup lock)."""
        with self.datastore.transaction(commit=True) as cursor:
            postgres_functions.ensure_functions(
                cursor,
                self.datastore.schema,
                self.events_table,
                _pg_final_bound(self.events_table),
            )

    def stop_sealing(self) -> None:
        self.sealer.stop()


class BackgroundSealer:
    """Seals the log behind this process's writers, in a thread of its own, paced by
    this process's saves (ADR 0058): a pass once every ``SAVES_PER_PASS`` saves, and no
    save waits longer than ``MAX_LAG`` for one; the first save after a spell of that
    long with no pass is sealed at once. No save ever waits for it.

    Why by count: a pass (one call of the schema's ``sw_seal``) costs about what a
    save's statement does, so what matters is passes per save. A pass every fixed
    interval of wall time ran once per 1–3 saves when the saves slowed under load (the
    slower they went, the more each paid), and once per interval per gateway however
    few saves came. By count, each gateway pays one pass per ``SAVES_PER_PASS`` of its
    own saves whatever the load; any gateway's pass seals every gateway's final rows,
    so the schema's passes per save do not grow with its gateways either, and nothing
    needs counting them. A save costs the pacing one counter increment (the lock it
    takes is uncontended: the sealer holds it only to read and reset the count).
    Readers that need the sealed log current (the audit commands, the event feed) seal
    first."""

    SAVES_PER_PASS = 16
    MAX_LAG = 0.2  # seconds a save waits for a pass, at most (plus the pass)

    def __init__(self, recorder: PostgresSessionRecorder) -> None:
        self.recorder = recorder
        self._pending = threading.Condition()
        self._saves = 0  # this process's saves since the sealer's last pass began
        self._last_pass = -self.MAX_LAG
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._log = library_logger("sessionwire.store").bind(schema=recorder.datastore.schema)

    def wanted(self) -> None:
        """A save ended (committed or not: one that ended lets the sealer pass what it
        held back)."""
        if self._thread is None:
            with self._starting:
                if self._thread is None and not self._stopping:
                    self._thread = threading.Thread(
                        target=self._run, name="sessionwire-sealer", daemon=True
                    )
                    self._thread.start()
        with self._pending:
            self._saves += 1
            # The first: the sealer starts its wait for the lag; the count's: at once.
            if self._saves == 1 or self._saves >= self.SAVES_PER_PASS:
                self._pending.notify()

    def due_in(self, now: float) -> float:
        """Seconds until a pass is due for the saves pending (≤ 0: due now)."""
        if self._saves >= self.SAVES_PER_PASS:
            return 0.0
        return self._last_pass + self.MAX_LAG - now

    def _run(self) -> None:
        while True:
            with self._pending:
                timed_out = False
                while not self._stopping:
                    if not self._saves:
                        self._pending.wait()
                        continue
                    # One wait of at most the lag, whatever the clock did (frozen or
                    # set back in tests): a save that waited it is due.
                    wait = self.due_in(time.monotonic())
                    if timed_out or wait <= 0:
                        break
                    timed_out = not self._pending.wait(min(self.MAX_LAG, wait))
                if self._stopping:
                    return  # the store stops: its last pass is stop()'s
                self._saves = 0
                self._last_pass = time.monotonic()
            try:
                self.recorder.seal_log(wait=False)
                self.recorder.save_ids.prune_if_due(self.recorder.datastore)
            except OperationalError as error:
                if self._stopping or "closed" in str(error):
                    return  # the store closed under it; nothing left to seal for
                self._log.warning("sealing failed", error=str(error))
            except Exception as error:
                self._log.warning("sealing failed", error=str(error))

    def stop(self) -> None:
        with self._pending:
            self._stopping = True
            self._pending.notify()
        with self._starting:
            thread = self._thread
        if thread is not None:
            thread.join()
            # A last pass for this process's last saves: a one-shot command's events are
            # then in the sealed log when it exits, unless another writer is in flight.
            with contextlib.suppress(psycopg.Error, PersistenceError):
                self.recorder.seal_log(wait=False)


# By topic: the Citus module builds on this one (ADR 0037's acyclic store package).
_CITUS_RECORDER = "sessionwire.adapters.store.citus:CitusSessionRecorder"

# Any fixed number: the advisory lock that serialises creating sessionwire's tables.
_SETUP_LOCK = 7_251_030_117


def _connect(env: dict[str, str]) -> psycopg.Connection[Any]:
    """A connection of its own (not the pool's), in autocommit."""
    return psycopg.connect(
        dbname=env["POSTGRES_DBNAME"],
        host=env["POSTGRES_HOST"],
        port=int(env["POSTGRES_PORT"]),
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"] or None,
        connect_timeout=5,
        autocommit=True,
    )


def _reach(env: dict[str, str]) -> psycopg.Connection[Any]:
    """``_connect``, or StoreUnavailable with the server's or the network's reason in one
    line, not the driver's traceback."""
    where = f"{env['POSTGRES_HOST']}:{env['POSTGRES_PORT']}/{env['POSTGRES_DBNAME']}"
    try:
        return _connect(env)
    except psycopg.OperationalError as error:
        reason = " ".join(str(error).split()).removeprefix("connection failed: ")
        raise StoreUnavailable(f"cannot open PostgreSQL store {where}: {reason}") from None


def _holds_store(connection: psycopg.Connection[Any], schema: str) -> bool:
    """Does ``schema`` hold a store (its chain table, made with the store's first DDL)?"""
    found = connection.execute("SELECT to_regclass(%s)", (f'"{schema}".sw_chain',)).fetchone()
    return found is not None and found[0] is not None


@contextmanager
def _postgres_setup(env: dict[str, str]) -> Iterator[psycopg.Connection[Any]]:
    """Create the schema and tables once, with no DDL at all when they exist.

    Gateways starting together would otherwise run CREATE ... IF NOT EXISTS against
    each other's writes: the DDL's table locks deadlock with a writer's row and table
    locks, and concurrent catalog updates fail ("tuple concurrently updated").
    """
    schema = env["POSTGRES_SCHEMA"]
    with _reach(env) as connection:
        connection.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
        try:
            connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            # The lease tables stand apart from eventsourcing's: made here for a new
            # schema and an old one alike (ADR 0028).
            create_lease_tables(connection, schema)
            if _holds_store(connection, schema):
                env["CREATE_TABLE"] = "n"
                # A table added since this schema was made (ADR 0016): created here, under
                # the setup lock, as the others were when the schema was new.
                dialect = postgres_dialect(schema, "")
                for statement in SqlChain(dialect).checkpoint_statements():
                    connection.execute(statement)
                connection.execute(save_ids_table_statement(schema))
                runs = connection.execute(
                    "SELECT to_regclass(%s)", (f'"{schema}".sw_runs',)
                ).fetchone()
                if runs is None or runs[0] is None:
                    # The runs read model (ADR 0017); filled from the work rows on open.
                    model = SqlReadModel(dialect, kind_of=no_kind)
                    for statement in model.runs_create_statements():
                        connection.execute(statement)
            yield connection
        finally:
            connection.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))


def _lease_seconds(query: dict[str, list[str]]) -> float:
    """``?lease_seconds=N``: how long a session's lease outlives its holder's last
    renewal (ADR 0028); a dead gateway's runs resume about this long after it died."""
    given = query.get("lease_seconds", [str(DEFAULT_LEASE_SECONDS)])[0]
    try:
        seconds = float(given)
    except ValueError:
        seconds = float("nan")
    if not MIN_LEASE_SECONDS <= seconds <= MAX_LEASE_SECONDS:  # NaN fails both
        raise StoreURLError(
            f"lease_seconds {given!r} must be a number of seconds from "
            f"{MIN_LEASE_SECONDS:g} to {MAX_LEASE_SECONDS:g} (default {DEFAULT_LEASE_SECONDS:g})"
        )
    return seconds


class PostgresBackend(StoreBackend):
    """``postgresql://user@host:port/db`` (``?schema=name`` picks a schema,
    ``?lease_seconds=N`` the length of a session's lease, ``?upgrade=yes`` upgrades a v2
    schema to storage v3 even while v2 gateways hold leases on it: ADR 0036 §6)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        database = parts.path.lstrip("/")
        if not database:
            raise StoreURLError(f"no database in store URL {url!r}; use postgresql://user@host/db")
        query = parse_qs(parts.query)
        schema = query.get("schema", ["public"])[0]
        if not schema.replace("_", "").isalnum():
            raise StoreURLError(f"schema {schema!r} must be letters, digits and underscores")
        self.lease_seconds: float = _lease_seconds(parse_qs(parts.query, keep_blank_values=True))
        # ``?distribution=citus``: the tables distributed by session key (ADR 0051).
        self.distribution = citus_schema.distribution_of(query)
        self.shards_by_session = self.distribution == citus_schema.CITUS
        # A killed gateway is found by its free liveness lock (ADR 0049), not its lease.
        self.takeover_check_seconds: float = min(TAKEOVER_CHECK_SECONDS, self.lease_seconds / 2)
        self.env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "APPLICATION_RECORDER_TOPIC": (
                _CITUS_RECORDER if self.shards_by_session else get_topic(PostgresSessionRecorder)
            ),
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
        self.location = f"postgresql://{unquote(parts.username or 'postgres')}@{host}/{database}"
        if schema != "public":
            self.location += f"?schema={schema}"
        # ``?upgrade=yes``: upgrade a v2 schema even while v2 gateways hold leases on it
        # (ADR 0036 §6; they are refused from then on).
        self.upgrade_beside_live = query.get("upgrade", ["no"])[0].lower() in ("yes", "true", "1")
        self._keeper: LeaseKeeper | None = None
        self._pool: Any = None

    writes_v3_records = True

    def exists(self) -> bool:
        with _reach(self.env) as connection:
            return _holds_store(connection, self.env["POSTGRES_SCHEMA"])

    def open_application(self) -> SessionwireApplication:
        if self.shards_by_session:
            # Before anything is made: a server without Citus is refused with no schema
            # left behind.
            with _reach(self.env) as connection:
                citus_schema.require_citus(connection, self._server())
        with _postgres_setup(self.env) as setup:
            existing = self.env.get("CREATE_TABLE") == "n"
            if existing:
                self._refuse_unmatched_distribution(setup)
            app = SessionwireApplication(env=self.env)
            assert isinstance(app.recorder, PostgresSessionRecorder)
            app.recorder.upgrade_chain()
            app.recorder.ensure_search_index()
            app.recorder.ensure_history_views()
            app.recorder.ensure_functions()
            if self.shards_by_session:
                try:
                    self._distribute(setup, app, existing=existing)
                except BaseException:
                    app.close()
                    raise
        try:
            app.recorder.upgrade_storage(allow_beside_live=self.upgrade_beside_live)
        except BaseException:
            app.close()
            raise
        self._pool = app.recorder.datastore.pool
        try:
            self._keeper = LeaseKeeper(
                datastore=app.recorder.datastore,
                connect=lambda: _connect(self.env),
                schema=self.env["POSTGRES_SCHEMA"],
                lease_seconds=self.lease_seconds,
            )
        except BaseException:
            app.close()
            raise
        return app

    def _server(self) -> str:
        return f"the server at {self.env['POSTGRES_HOST']}:{self.env['POSTGRES_PORT']}"

    def _refuse_unmatched_distribution(self, connection: psycopg.Connection[Any]) -> None:
        """An existing schema distributed on Citus, opened without the option, is
        refused: it would write rows with no shard key."""
        events = f'"{self.env["POSTGRES_SCHEMA"]}".{SessionwireApplication.name.lower()}_events'
        distributed = citus_schema.is_distributed(connection, events)
        if distributed and not self.shards_by_session:
            raise citus_schema.NotDistributed(
                f"{self.location} is distributed on Citus; open it with distribution=citus"
            )

    def _distribute(
        self, connection: psycopg.Connection[Any], app: SessionwireApplication, *, existing: bool
    ) -> None:
        """Distribute a new schema's tables (ADR 0051); an existing schema not fully
        distributed is refused, with the command that finishes it, unless the URL says
        ``upgrade=yes``."""
        recorder: Any = app.recorder
        steps = citus_schema.steps(
            self.env["POSTGRES_SCHEMA"],
            recorder.events_table_name,
            lambda conn, progress: recorder.fill_shard_keys(
                conn, progress, decode=app.mapper.to_domain_event
            ),
            recorder.fill_shard_chains,
        )
        missing = citus_schema.missing_steps(connection, steps)
        if not missing:
            return
        if existing and not self.upgrade_beside_live:
            raise citus_schema.NotDistributed(
                f"{self.location} is not distributed on Citus ({len(missing)} of "
                f"{len(steps)} steps to go, first: {missing[0].name}"
                f"{self._before_distributing(connection)}); stop its gateways and "
                f"distribute it (resumable, with progress): "
                f"{citus_schema.distribute_command(self.location)}"
            )
        if existing:
            # The steps distribute storage v3's tables and columns (``log_seq``, the
            # links on the rows): a v2 schema is upgraded first, under its storage lock,
            # as ``upgrade=yes`` asks (ADR 0036 §6), then distributed.
            recorder.upgrade_storage(allow_beside_live=True)
        citus_schema.distribute(connection, steps, progress=stderr_progress if existing else None)

    def _before_distributing(self, connection: psycopg.Connection[Any]) -> str:
        """What the refusal of an undistributed schema adds: that it is storage v2 (the
        command upgrades it first), and the gateways whose leases are live, as the v2
        refusal names them (``postgres_format.refuse_beside_live``)."""
        schema = self.env["POSTGRES_SCHEMA"]
        cursor = connection.cursor()
        v2 = (
            "; storage v2, upgraded to v3 first"
            if postgres_format.needs_upgrade(cursor, schema)
            else ""
        )
        holders = live_gateways(cursor, schema)
        live = f"; in use by gateway(s) {', '.join(holders)}" if holders else ""
        return v2 + live

    @property
    def keeper(self) -> LeaseKeeper:
        assert self._keeper is not None, "the leases of a store not opened yet"
        return self._keeper

    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]:
        return PostgresSessionLease(self.keeper, key)

    def recovered_from(self, error: BaseException) -> bool:
        """A read that met a dropped connection (the server restarted, or cut it):
        every idle connection of the pool is checked and the dead ones replaced, once,
        so the read's second try does not take another dead one."""
        if not isinstance(error, (OperationalError, InterfaceError)) or self._pool is None:
            return False
        self._pool.check()
        return True

    async def take_over_dead_gateways(self) -> list[str]:
        return await self.keeper.take_over()

    def current_fence(self) -> Fence | None:
        return None if self._keeper is None else self._keeper.fence_here()

    def close(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.close()

    def analyze(self, store: EventSourcedStore) -> None:
        with store.writing() as cursor:
            model = store.read_model
            for table in (model.sessions, model.events, model.runs_table):
                cursor.execute(f"ANALYZE {table}")

    def follow_explicit_ids(self, cursor: Cursor, chain: SqlChain) -> None:
        # Explicit ids leave the id sequence behind; the next event must follow.
        chain.advance_sequence(cursor)

    def open_writer(self, store: EventSourcedStore) -> PostgresWriter:
        # An awaited save runs on a worker thread: the event loop goes on meanwhile.
        recorder = store.recorder
        assert isinstance(recorder, PostgresSessionRecorder)
        threads = save_threads(recorder.datastore.pool.max_size)
        return PostgresWriter(recorder, threads=threads)
