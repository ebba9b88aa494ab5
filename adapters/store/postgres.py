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
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit
from uuid import UUID, uuid4

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
from sessionwire.adapters.store import citus_schema, postgres_format, postgres_search
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
    hold_lease_statement,
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
    )


class PostgresSessionRecorder(RecordsReadModels, PostgresApplicationRecorder):
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
            dialect, kind_of=no_kind, transcript_in_log=True, session_columns=True
        )
        self.chain = SqlChain(replace(dialect, history_columns=history_columns_of))
        self.save_ids = SaveIds(self.datastore.schema, self.events_table_name)
        self.transcript_search = SqlTranscriptSearch(
            self.read_model, postgres_search.search_sql(self.datastore.schema, events)
        )
        # One statement a save: its id, and each event with its history columns and its
        # stream link (positions and seals come from the sealer, behind the writers).
        columns = (
            f"INSERT INTO {events} (originator_id, originator_version, topic, state, "
            "role, body, provenance, stream_hash) "
        )
        self.insert_many_statement = (
            f"{columns}SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], "
            "%s::bytea[], %s::text[], %s::integer[], %s::integer[], %s::bytea[]) "
            "RETURNING notification_id"
        )
        # A save of one event (a message: most saves) with plain values: psycopg adapts
        # eight lists element by element on every save, a quarter of its CPU.
        self.insert_one_statement = (
            f"{columns}VALUES (%s::uuid, %s::bigint, %s::text, %s::bytea, %s::text, "
            "%s::integer, %s::integer, %s::bytea) RETURNING notification_id"
        )
        # The save's statement (encoded), by its number of events and the read-model
        # statement it carries (a session row's narrow UPDATE, one per changed fields).
        self._insert_statements: dict[tuple[bool, str | None], bytes] = {}
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
        self.hold_lease_statement = hold_lease_statement(self.datastore.schema)
        # Two 32-bit keys: a space apart from the liveness locks' one 64-bit key.
        self.work_order_lock = "SELECT pg_advisory_xact_lock(hashtext(%s), 1)"
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
        # A message's read-model change (its session row's narrow UPDATE) goes within
        # the insert: with no fence to check first, the save is that one statement,
        # atomic without BEGIN and COMMIT (the server commits it at the Sync).
        model = self.read_model.narrow_only(changes) if changes else None
        alone = model is not None and fence is None
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            # Before the transaction: the previous links are committed and immutable
            # (a stale one only feeds a save that fails on the primary key anyway).
            links = stream_links(
                records, previous_streams=self.chain.previous_streams(cursor, records)
            )
            statement, rows = self._insert_rows(save_id, stored_events, links, model)
            with conn.cursor() as insert_cursor:
                # BEGIN and COMMIT queued with the statements: one sync, one round
                # trip. (conn.transaction() inside a pipeline syncs after its BEGIN,
                # before its COMMIT and after it: with the pipeline's own, four.)
                with (
                    rolled_back_on_failure(conn),
                    conn.pipeline(),
                    dropped_on_failure(conn, alone=alone),
                ):
                    if not alone:
                        cursor.execute("BEGIN", prepare=False)
                    if fence is not None:
                        cursor.execute(
                            self.hold_lease_statement,
                            (fence.session_key, fence.owner, fence.token),
                            prepare=True,
                        )
                    if changes and any(row.is_new for row in changes.work.values()):
                        # A new work row takes the next position (MAX + 1) in its
                        # transaction: saves that make one go one at a time, so their
                        # positions follow their events' order in the log, as a rebuild
                        # numbers them (two announces saved at once had swapped).
                        cursor.execute(self.work_order_lock, (self.datastore.schema,), prepare=True)
                    insert_cursor.execute(statement, rows, prepare=True)
                    if changes and model is None:
                        self.read_model.write(cursor, changes)
                    self.before_commit(cursor, links)
                    if not alone:
                        cursor.execute("COMMIT", prepare=False)
                ids = [int(row["notification_id"]) for row in insert_cursor.fetchall()]
        self.chain.committed(links)
        return ids

    def _insert_rows(
        self,
        save_id: UUID,
        stored_events: Any,
        links: Sequence[ChainLink],
        model: tuple[str, tuple[Any, ...]] | None,
    ) -> tuple[bytes, tuple[Any, ...]]:
        """The insert of a save's events (with ``model``, a read-model statement and its
        parameters, if given) and its parameters: one row's values, or a column of
        values each (``unnest``) for several."""
        single = len(stored_events) == 1
        beside, model_values = (None, ()) if model is None else model
        statement = self._insert_statements.get((single, beside))
        if statement is None:
            insert = self.insert_one_statement if single else self.insert_many_statement
            statement = self.save_ids.recording(insert, beside=beside)
            self._insert_statements[(single, beside)] = statement
        if single:
            (stored,) = stored_events
            return statement, (
                save_id,
                *model_values,
                stored.originator_id,
                stored.originator_version,
                stored.topic,
                stored.state,
                *history_columns(stored),
                links[0].stream_hash,
            )
        columns = [history_columns(stored) for stored in stored_events]
        return statement, (
            save_id,
            *model_values,
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
        """One batch (``SqlChain.seal_final``) in three round trips: the lock, the head and
        the bound; the final records below the bound; their seals and the commit. Without
        ``wait``, the lock is a round trip of its own: a pass that finds another sealer
        holding it reads nothing more (the holder seals every gateway's final rows)."""
        key = (_SEALER_LOCK_SPACE, self.datastore.schema)
        with (
            self.datastore.get_connection() as conn,
            conn.cursor() as cursor,
            conn.cursor() as locked,
            conn.cursor() as head,
            conn.cursor() as bound,
            rolled_back_on_failure(conn),
            conn.pipeline(),
        ):
            cursor.execute("BEGIN", prepare=False)
            # Seals need not wait for the disk: one lost in a crash is given again,
            # identically, by the next pass (the sealed log is always a prefix of
            # the same order), and WAL order keeps a later seal from outliving it.
            cursor.execute("SET LOCAL synchronous_commit = off", prepare=False)
            if wait:
                locked.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", key, prepare=True)
            else:
                locked.execute(
                    "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s)) AS locked",
                    key,
                    prepare=True,
                )
                # With N gateways, most tries met a pass in progress, and the head and
                # the bound (a scan of ``pg_locks``) they read for nothing cost the
                # server as much as a pass.
                if not locked.fetchone()["locked"]:
                    cursor.execute("COMMIT", prepare=False)
                    return None
            # Statements after the lock's: read under it.
            head.execute(self.chain.select_head, prepare=True)
            assert self.chain.t.final is not None
            bound.execute(self.chain.t.final, prepare=True)
            count = self.chain.seal_below(
                cursor, self.chain.head_of(head.fetchone()), bound.fetchone()["bound"]
            )
            cursor.execute("COMMIT", prepare=False)
        return count

    def stop_sealing(self) -> None:
        self.sealer.stop()


class BackgroundSealer:
    """Seals the log behind this process's writers, in a thread of its own: woken after
    a save ends, it seals whatever is final then, in batches, and no save ever waits for
    it. It starts a pass at most once every ``PACE`` seconds times the schema's live
    gateways: saves that end in between are covered by the next pass, its own or
    another gateway's.

    The pace: a pass costs the server and this process about as much CPU as a save
    (a lock, the head, the bound over ``pg_locks``, the pending rows, their update), and
    woken by every save it ran once per save. Any gateway's pass seals every gateway's
    final rows, so the schema needs one pass per ``PACE``, not one per gateway: N
    gateways each passing every ``PACE`` cost N times the passes for the same seals
    (docs/benchmarks.md, "PostgreSQL scale-out: where 4 gateways wait"). The first save
    after a quiet spell is sealed at once; under load the sealed log lags the commits by
    about ``PACE``, and at most ``MAX_PACE`` plus one pass when this gateway alone
    writes. Readers that need it current (the audit commands, the event feed) seal
    first."""

    PACE = 0.02  # seconds between the starts of two passes in the schema
    MAX_PACE = 0.2  # seconds between the starts of two passes of one gateway, at most
    COUNT_EVERY = 5.0  # seconds between two counts of the schema's live gateways

    def __init__(self, recorder: PostgresSessionRecorder) -> None:
        self.recorder = recorder
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._last_pass = -self.MAX_PACE
        self._gateways = 1
        self.counted_at: float | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._log = library_logger("sessionwire.store").bind(schema=recorder.datastore.schema)

    def wanted(self) -> None:
        if self._thread is None:
            with self._starting:
                if self._thread is None and not self._stopping:
                    self._thread = threading.Thread(
                        target=self._run, name="sessionwire-sealer", daemon=True
                    )
                    self._thread.start()
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            # At most the pace, whatever the clock did (frozen or set back in tests);
            # returns at once when the store stops (its last pass is stop()'s).
            pace = self.PACE if self._stopping else self.pace()
            self._stopped.wait(min(pace, self._last_pass + pace - time.monotonic()))
            self._wanted.clear()
            if self._stopping:
                return
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

    def pace(self) -> float:
        """``PACE`` times the live gateways (their heartbeats, ADR 0028), counted again
        every ``COUNT_EVERY`` seconds; at most ``MAX_PACE``."""
        now = time.monotonic()
        counted = self.counted_at
        if counted is None or not counted <= now < counted + self.COUNT_EVERY:
            self.counted_at = now
            try:
                with self.recorder.datastore.transaction(commit=False) as cursor:
                    self._gateways = len(live_gateways(cursor, self.recorder.datastore.schema))
            except Exception as error:  # the pace alone: sealing goes on at one gateway's
                self._gateways = 1
                self._log.warning("counting the live gateways failed", error=str(error))
        return min(self.MAX_PACE, self.PACE * max(1, self._gateways))

    def stop(self) -> None:
        self._stopping = True
        self._stopped.set()
        self._wanted.set()
        with self._starting:
            thread = self._thread
        if thread is not None:
            thread.join()
            # A last pass for this process's last saves: a one-shot command's events are
            # then in the sealed log when it exits, unless another writer is in flight.
            with contextlib.suppress(psycopg.Error, PersistenceError):
                self.recorder.seal_log(wait=False)


# The advisory lock of the schema's one sealer (any fixed number).
_SEALER_LOCK_SPACE = 7252


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
        )
        missing = citus_schema.missing_steps(connection, steps)
        if not missing:
            return
        if existing and not self.upgrade_beside_live:
            raise citus_schema.NotDistributed(
                f"{self.location} is not distributed on Citus ({len(missing)} of "
                f"{len(steps)} steps to go, first: {missing[0].name}); stop its gateways and "
                f"distribute it (resumable, with progress): "
                f"{citus_schema.distribute_command(self.location)}"
            )
        citus_schema.distribute(connection, steps, progress=stderr_progress if existing else None)

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
