"""The PostgreSQL store on a Citus coordinator, its tables distributed by session key
(``?distribution=citus``, contract decision 39, ADR 0051 and 0052).

The write path is PostgreSQL's (one pipelined transaction, the save id, the fence), with
each event's shard key (``shard_keys.py``, given by the store with the save) in its row
and in its save id's: a save of one session's streams goes to one shard, on one worker,
in one transaction; Citus runs a save that spans sessions (an exchange, a spawn) as a
two-phase commit across their workers (ADR 0052).

The sealer keeps one log for the deployment, with PostgreSQL's finality rule applied
per worker: each worker's events carry that worker's own transaction ids (the trigger
of ``citus_schema.py``), and a pass reads, on every worker, the lowest id among its
writers of the events' shards still in flight (``run_command_on_workers``). A row is
final when its worker has no lower writer in flight. Each pass, under the sealer's lock
on the coordinator, seals one shard's final rows in (transaction id, position) order,
each with its next place in the log and in its shard's own log (ADR 0067), written by
one UPDATE routed to that shard: a one-phase commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from psycopg.rows import tuple_row
from sessionwire.adapters.store import citus_schema, postgres_search
from sessionwire.adapters.store.chain import PAGE as SEAL_BATCH
from sessionwire.adapters.store.chain import SqlChain
from sessionwire.adapters.store.event_store import SHARD_KEYS_KEY, Fence
from sessionwire.adapters.store.postgres import PostgresSessionRecorder, SavePlan
from sessionwire.adapters.store.postgres_functions import SEALER_LOCK_SPACE
from sessionwire.adapters.store.postgres_lease import hold_lease_statement
from sessionwire.adapters.store.postgres_save_ids import SaveIds
from sessionwire.adapters.store.shard_keys import shard_key_of
from sessionwire.adapters.store.sqlite_format import Progress
from sessionwire.adapters.store.sqlite_rows import history_columns
from sessionwire.adapters.store.transcript_search import SqlTranscriptSearch
from sessionwire.application.ports.audit_log import StoredRecord
from sessionwire.domain.hash_chain import (
    ChainLink,
    LogHead,
    ShardChains,
    ShardLink,
    seal,
    seal_in_shard,
)

if TYPE_CHECKING:
    from sessionwire.application.projection import ReadModelChanges
    from sessionwire.domain.checkpoint import ShardHead

# On one worker: the lowest transaction id that may still write events in this
# schema's shards there (``postgres._pg_final_bound``'s rule, over the shard tables).
_WORKER_BOUND = (
    "WITH s AS (SELECT pg_current_snapshot() AS snap), "
    "shards AS (SELECT oid FROM pg_class WHERE relnamespace = '{schema}'::regnamespace "
    "AND relname ~ '^{events}_[0-9]+$'), "
    "w AS (SELECT x.transactionid::text::bigint AS xid FROM pg_locks r "
    "JOIN pg_locks x ON x.virtualtransaction = r.virtualtransaction "
    "AND x.locktype = 'transactionid' AND x.mode = 'ExclusiveLock' "
    "WHERE r.locktype = 'relation' AND r.relation IN (SELECT oid FROM shards)) "
    "SELECT LEAST(pg_snapshot_xmax(s.snap), (SELECT MIN(i) FROM pg_snapshot_xip(s.snap) "
    "AS i WHERE i::text::bigint % 4294967296 IN (SELECT xid FROM w)))::text FROM s"
)

SHARD_JOIN = " AND {a}.shard_key = {b}.shard_key"

# Unsealed rows read per pass at most (several workers' finals among them).
_PENDING_READ = 4 * SEAL_BATCH

VALUES_ROWS = 64
"""Events a save inserts as VALUES rows at most (routed to their shards); more go as one
``unnest`` (a statement of a size that does not grow, committed in two phases)."""
_VALUES_ROW = (
    "(%s::uuid, %s::bigint, %s::text, %s::bytea, %s::text, %s::integer, %s::integer, "
    "%s::bytea, %s::text)"
)


class CitusChain(SqlChain):
    """The chain, its joins within a shard, each sealed row's place in its shard's own
    log (ADR 0067), and the live stream's reads of the log kept to its unbroken prefix."""

    def shard_columns(self, alias: str) -> str:
        return f", {alias}log_shard, {alias}shard_seq, {alias}shard_hash"

    def shard_link(self, row: Any) -> ShardLink | None:
        if row["shard_seq"] is None or row["log_shard"] is None:
            return None
        return ShardLink(
            shard=int(row["log_shard"]),
            seq=int(row["shard_seq"]),
            shard_hash=bytes(row["shard_hash"]),
        )

    def shard_heads(self, cursor: Any, size: int) -> list[ShardHead]:
        """One query: each shard's last row with ``log_seq <= size``."""
        from sessionwire.domain.checkpoint import ShardHead

        cursor.execute(
            f"SELECT DISTINCT ON (log_shard) log_shard, shard_seq, shard_hash FROM {self.t.events} "
            "WHERE log_seq <= %s AND shard_seq IS NOT NULL ORDER BY log_shard, shard_seq DESC",
            (size,),
        )
        return [
            ShardHead(
                shard=int(row["log_shard"]),
                size=int(row["shard_seq"]),
                shard_hash=bytes(row["shard_hash"]),
            )
            for row in cursor.fetchall()
        ]

    def imported(self, cursor: Any) -> None:
        """An import's sealed records get the copy's own shard chains, as the upgrade's
        backfill gives them (ADR 0067 §5): the trigger gave each row the shard it is on
        here, and each shard's log is the sealed log restricted to it, from its start.
        In the import's transaction, so a copy is never left with part of its chains."""
        self.fill_shard_chains(cursor.connection, None, page_transactions=False)

    def fill_shard_chains(
        self, connection: Any, progress: Progress | None, *, page_transactions: bool
    ) -> None:
        """Every sealed row's ``shard_seq`` and ``shard_hash``, from the sealed log in its
        order (``ShardChains``) and each row's ``log_shard``, a page of the log at a
        time: each page's rows written shard by shard with the routed UPDATE
        (``page_transactions``: each page committed on its own)."""
        chains = ShardChains()
        after = 0
        with connection.cursor(row_factory=tuple_row) as cursor:
            while True:
                rows = cursor.execute(
                    "SELECT notification_id, stream_hash, log_seq, log_shard, shard_key "
                    f"FROM {self.t.events} WHERE log_seq > %s ORDER BY log_seq LIMIT %s",
                    (after, SEAL_BATCH),
                ).fetchall()
                if not rows:
                    return
                by_shard: dict[int, list[tuple[int, ShardLink, str]]] = {}
                for n, own, _, shard, shard_key in rows:
                    link = chains.follow(int(shard), int(n), bytes(own))
                    by_shard.setdefault(int(shard), []).append((int(n), link, str(shard_key)))
                with connection.transaction() if page_transactions else nullcontext():
                    for links in by_shard.values():
                        cursor.execute(
                            f"UPDATE {self.t.events} AS c SET shard_seq = s.seq, "
                            "shard_hash = s.hash FROM unnest(%s::bigint[], %s::bigint[], "
                            "%s::bytea[]) AS s(n, seq, hash) "
                            "WHERE c.shard_key = ANY(%s::text[]) AND c.notification_id = s.n",
                            (
                                [n for n, _, _ in links],
                                [link.seq for _, link, _ in links],
                                [link.shard_hash for _, link, _ in links],
                                sorted({shard_key for _, _, shard_key in links}),
                            ),
                        )
                after = int(rows[-1][2])
                if progress is not None:
                    progress(f"distributing: shard chains of {after} sealed records")

    def records_after(
        self, cursor: Any, position: int, limit: int
    ) -> list[tuple[int, StoredRecord]]:
        # A sealing pass commits on its one shard, passes one after another; but a read
        # across shards reads each at its own moment (Citus takes no snapshot across
        # nodes): it may see a later pass's positions on one shard and not an earlier
        # pass's on another. The log has no gaps, so the records are kept up to the first
        # missing position; the rest come on a later read.
        found = super().records_after(cursor, position, limit)
        for index, (seq, _) in enumerate(found):
            if seq != position + index + 1:
                return found[:index]
        return found


class CitusSaveIds(SaveIds):
    """``sw_saves`` with the save's shard key: its row lives in the save's shard."""

    def __init__(
        self, schema: str, events_table: str, shard_keys: Callable[[], dict[UUID, str]]
    ) -> None:
        super().__init__(schema, events_table)
        self.shard_keys = shard_keys
        """The shard keys of the save being written (on this thread)."""

    def own_commit(
        self, cursor: Any, save_id: UUID, stored_events: Sequence[StoredEvent]
    ) -> list[int] | None:
        # Each read within one shard: the id by its save's key, the events by theirs.
        keys = self.shard_keys()
        cursor.execute(
            f"SELECT 1 FROM {self.table} WHERE shard_key = %s AND save_id = %s",
            (keys[UUID(str(stored_events[0].originator_id))], save_id),
        )
        if cursor.fetchone() is None:
            return None
        found = []
        for stored in stored_events:
            cursor.execute(
                f"SELECT notification_id FROM {self.events} WHERE shard_key = %s "
                "AND originator_id = %s AND originator_version = %s",
                (
                    keys[UUID(str(stored.originator_id))],
                    stored.originator_id,
                    stored.originator_version,
                ),
            )
            row = cursor.fetchone()
            if row is None:
                return None
            found.append(int(row["notification_id"]))
        return found

    def recording(self, insert_events: str, *, beside: str | None = None) -> bytes:
        """``insert_events`` that also records the save's id and shard key (its first
        parameters): one statement; ``beside``, a statement of the same save that runs
        within it (its parameters next). Encoded once."""
        also = "" if beside is None else f", model AS ({beside})"
        return (
            f"WITH saved AS (INSERT INTO {self.table} (save_id, shard_key) VALUES (%s, %s))"
            f"{also} {insert_events}"
        ).encode()


class CitusSessionRecorder(PostgresSessionRecorder):
    keeps_history_views = False
    """Not on Citus (ADR 0054): its saves are statements routed to a shard, not the save
    function that writes the views, and the views table would need distributing by
    session key; its history reads render on read."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        events = self.events_table
        self._save = threading.local()
        self.citus_save_ids = CitusSaveIds(
            self.datastore.schema, self.events_table_name, lambda: self._save.keys
        )
        self.save_ids = self.citus_save_ids
        # Joins of one stream's rows within its shard (Citus joins distributed tables
        # only on their distribution column).
        self.chain: CitusChain = CitusChain(replace(self.chain.t, shard_join=SHARD_JOIN))
        self.transcript_search = SqlTranscriptSearch(
            self.read_model,
            postgres_search.search_sql(self.datastore.schema, events, by_shard=True),
        )
        columns = (
            f"INSERT INTO {events} (originator_id, originator_version, topic, state, "
            "role, body, provenance, stream_hash, shard_key) "
        )
        # A save of a few events: one VALUES row each, which Citus routes to the shards
        # of their keys (one shard: one phase). An INSERT ... SELECT (unnest) is run by
        # the coordinator through COPY, and committed in two phases even when all its
        # rows go to one shard (ADR 0062); only larger saves take it.
        self.insert_values = f"{columns}VALUES "
        self.insert_many_statement = (
            f"{columns}SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], "
            "%s::bytea[], %s::text[], %s::integer[], %s::integer[], %s::bytea[], %s::text[]) "
            "RETURNING notification_id"
        )
        self._insert_statements: dict[tuple[int, str | None], bytes] = {}
        self.hold_lease_statement = hold_lease_statement(self.datastore.schema)
        # Two 32-bit keys: a space apart from the liveness locks' one 64-bit key.
        self.work_order_lock = "SELECT pg_advisory_xact_lock(hashtext(%s), 1)"
        # A new work row's position: Citus takes no subquery in an INSERT, so the next
        # number comes from a counter on the coordinator (``citus_schema``), drawn in the
        # save's transaction under the work-order lock, as MAX + 1 was: no gap where a
        # save failed, so a rebuild numbers the rows the same.
        model, m = self.read_model, self.read_model.m
        model.insert_work = (
            f"INSERT INTO {model.work_table} (id, kind, status, session_key, position, "
            f"version, created_on, modified_on, state) VALUES ({m}, {m}, {m}, {m}, "
            f"{citus_schema.next_work_position(self.datastore.schema)}, "
            f"{m}, {m}, {m}, {m})"
        )
        model.follow_work_positions = [citus_schema.follow_work_positions(self.datastore.schema)]
        # Session, work and run rows updated within their shard (else Citus sends the
        # UPDATE to every shard, and the save becomes a multi-shard transaction).
        model.route_by_session_key()
        # The runs' primary key takes their session's key first (the distribution column).
        model.insert_run = model.insert_run.replace(
            "ON CONFLICT (run_id)", "ON CONFLICT (session_key, run_id)"
        )
        schema = self.datastore.schema
        self.worker_bound = (
            "SELECT nodename, nodeport, success, result FROM run_command_on_workers(%s)"
        )
        self.worker_bound_command = _WORKER_BOUND.format(
            schema=schema, events=self.events_table_name
        )
        # A shard's head: its last row in its own log (read on every shard: log_shard
        # is not the distribution column; the index sw_shard_seq finds it).
        self.select_shard_head = (
            f"SELECT shard_seq, shard_hash FROM {events} WHERE log_shard = %s "
            "AND shard_seq IS NOT NULL ORDER BY shard_seq DESC LIMIT 1"
        )
        # A pass's seals, global and within the shard, in one UPDATE that the rows' shard
        # keys route to their one shard: a one-phase commit (ADR 0067 §2).
        self.write_shard_seals = (
            f"UPDATE {events} AS c SET log_seq = s.seq, log_hash = s.hash, "
            "shard_seq = s.shard_seq, shard_hash = s.shard_hash "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::bytea[], %s::bigint[], %s::bytea[]) "
            "AS s(n, seq, hash, shard_seq, shard_hash) "
            "WHERE c.shard_key = ANY(%s::text[]) AND c.notification_id = s.n"
        )
        # Which worker holds each shard key's rows (the shard by the key's hash).
        self.shard_nodes = (
            "SELECT s.shardminvalue::int AS low, s.shardmaxvalue::int AS high, "
            "n.nodename || ':' || n.nodeport AS node FROM pg_dist_shard s "
            "JOIN pg_dist_placement p ON p.shardid = s.shardid "
            "JOIN pg_dist_node n ON n.groupid = p.groupid "
            f"WHERE s.logicalrelid = '{events}'::regclass AND n.noderole = 'primary'"
        )

    # Saves ----------------------------------------------------------------------------

    def insert_events(self, stored_events: Any, **kwargs: Any) -> Sequence[int] | None:
        keys: dict[UUID, str] | None = kwargs.get(SHARD_KEYS_KEY)
        if stored_events and keys is None:
            raise ValueError(
                "a save on a store distributed by session needs its streams' shard keys"
            )
        self._save.keys = keys
        try:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            # The coordinator numbers the rows in their order, but rows of several shards
            # come back in the order their shards answered.
            return None if ids is None else sorted(ids)
        finally:
            self._save.keys = None

    def ensure_functions(self) -> None:
        """None here: a save on Citus is statements routed to its shard (below), not
        PostgreSQL's server-side call (ADR 0058), and the sealer reads every worker's
        bound itself (``_seal_batch``)."""

    def _save_plan(
        self,
        save_id: UUID,
        fence: Fence | None,
        changes: ReadModelChanges | None,
        stored_events: Any,
        links: Sequence[ChainLink],
    ) -> SavePlan:
        """Statements, each routed by its shard key: the fence and the work-order lock
        (on coordinator-local tables and locks), the events with the save id, and the
        read-model rows. A message's narrow session-row update goes within the insert:
        with no fence, the save is that one statement, atomic without BEGIN and COMMIT."""
        model = self.read_model.narrow_only(changes) if changes else None
        before: list[tuple[str, tuple[Any, ...]]] = []
        if fence is not None:
            before.append(
                (self.hold_lease_statement, (fence.session_key, fence.owner, fence.token))
            )
        if changes and any(row.is_new for row in changes.work.values()):
            # A new work row's position in log order (ADR 0021 amended).
            before.append((self.work_order_lock, (self.datastore.schema,)))
        statement, values = self._insert_rows(save_id, stored_events, links, model)
        return SavePlan(
            alone=model is not None and fence is None,
            insert=statement,
            values=values,
            writes_model=model is None,
            before=tuple(before),
        )

    def _insert_rows(
        self,
        save_id: UUID,
        stored_events: Any,
        links: Sequence[ChainLink],
        model: tuple[str, tuple[Any, ...]] | None,
    ) -> tuple[bytes, tuple[Any, ...]]:
        """The insert of a save's events (with ``model``, a read-model statement and its
        parameters, if given) and its parameters: the save id and its shard key first,
        then each event's values as a row (up to ``VALUES_ROWS`` events), or a column of
        values each (``unnest``) for more."""
        keys: dict[UUID, str] = self._save.keys
        shard_keys = [keys[stored.originator_id] for stored in stored_events]
        count = len(stored_events)
        rows = count if count <= VALUES_ROWS else 0  # 0: unnest
        beside, model_values = (None, ()) if model is None else model
        statement = self._insert_statements.get((rows, beside))
        if statement is None:
            insert = (
                self.insert_values + ", ".join([_VALUES_ROW] * rows) + " RETURNING notification_id"
                if rows
                else self.insert_many_statement
            )
            statement = self.citus_save_ids.recording(insert, beside=beside)
            self._insert_statements[(rows, beside)] = statement
        if rows:
            values: list[Any] = [save_id, shard_keys[0], *model_values]
            for stored, link, key in zip(stored_events, links, shard_keys, strict=True):
                values += (
                    stored.originator_id,
                    stored.originator_version,
                    stored.topic,
                    stored.state,
                    *history_columns(stored),
                    link.stream_hash,
                    key,
                )
            return statement, tuple(values)
        columns = [history_columns(stored) for stored in stored_events]
        return statement, (
            save_id,
            shard_keys[0],
            *model_values,
            [stored.originator_id for stored in stored_events],
            [stored.originator_version for stored in stored_events],
            [stored.topic for stored in stored_events],
            [stored.state for stored in stored_events],
            [column[0] for column in columns],
            [column[1] for column in columns],
            [column[2] for column in columns],
            [link.stream_hash for link in links],
            shard_keys,
        )

    # Sealing --------------------------------------------------------------------------

    def seal_log(self, *, wait: bool = True) -> int:
        """Seal every final record, one shard per pass (ADR 0067), one sealer at a time
        (``wait``: for the lock; otherwise leave it to the sealer holding it): passes
        follow one another while final rows are left, in any shard."""
        sealed = 0
        while True:
            found = self._seal_shard(wait=wait)
            if found is None:
                return sealed  # another sealer holds the lock
            count, more = found
            sealed += count
            if count and self.sealed_hook is not None:
                self.sealed_hook()  # committed: followers in this process may read them
            if not count or not more:
                return sealed

    def _seal_batch(self, *, wait: bool) -> int | None:
        found = self._seal_shard(wait=wait)
        return None if found is None else found[0]

    def _seal_shard(self, *, wait: bool) -> tuple[int, bool] | None:
        """One pass, one shard's one-phase transaction (ADR 0067 §2): the lock (on the
        coordinator), the global head, every worker's bound, the unsealed rows (later
        statements, so later snapshots on every worker), then the shard of the final
        row with the lowest position (so no shard starves), its head, and the seals of
        its final rows in (transaction id, position) order, global and within the shard,
        in one UPDATE routed to that shard by the rows' keys. How many were sealed and
        whether final rows are left (None: another sealer holds the lock). Synchronous
        commit: a seal lost with its worker's commit record would take back seals
        readers may have seen."""
        key = (SEALER_LOCK_SPACE, self.datastore.schema)
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as cursor:
            if wait:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", key)
            else:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s, hashtext(%s)) AS locked", key)
                if not cursor.fetchone()["locked"]:
                    return None
            cursor.execute(self.chain.select_head)
            head = self.chain.head_of(cursor.fetchone())
            cursor.execute(self.worker_bound, (self.worker_bound_command,))
            bounds: dict[str, int] = {}
            for row in cursor.fetchall():
                if not row["success"]:
                    raise RuntimeError(f"a worker's sealing bound failed: {row['result']}")
                bounds[f"{row['nodename']}:{row['nodeport']}"] = int(row["result"])
            cursor.execute(self.shard_nodes)
            shards = [(int(r["low"]), int(r["high"]), str(r["node"])) for r in cursor.fetchall()]
            cursor.execute(
                "SELECT notification_id, stream_hash, shard_key, log_shard, "
                f"xact_id::text::bigint AS xact, worker_hash(shard_key) AS h "
                f"FROM {self.events_table} WHERE log_seq IS NULL AND stream_hash IS NOT NULL "
                "ORDER BY xact_id, notification_id LIMIT %s",
                (_PENDING_READ,),
            )
            read = cursor.fetchall()
            final = [
                row
                for row in read
                if int(row["xact"]) < bounds.get(_node_of(int(row["h"]), shards), 0)
            ]
            if not final:
                return 0, False
            shard = int(min(final, key=lambda row: int(row["notification_id"]))["log_shard"])
            own = sorted(
                (row for row in final if int(row["log_shard"]) == shard),
                key=lambda row: (int(row["xact"]), int(row["notification_id"])),
            )
            sealing = own[:SEAL_BATCH]
            more = len(final) > len(sealing) or len(read) == _PENDING_READ
            cursor.execute(self.select_shard_head, (shard,))
            found = cursor.fetchone()
            shard_head = (
                LogHead()
                if found is None
                else LogHead(int(found["shard_seq"]), bytes(found["shard_hash"]))
            )
            pending = [(int(row["notification_id"]), bytes(row["stream_hash"])) for row in sealing]
            seals = seal(head, pending)
            in_shard = seal_in_shard(shard_head, pending)
            cursor.execute(
                self.write_shard_seals,
                (
                    [x.notification_id for x in seals],
                    [x.log_seq for x in seals],
                    [x.log_hash for x in seals],
                    [x.log_seq for x in in_shard],
                    [x.log_hash for x in in_shard],
                    sorted({str(row["shard_key"]) for row in sealing}),
                ),
            )
        return len(seals), more

    def fill_shard_chains(self, connection: Any, progress: Progress) -> None:
        """The shard chains of rows sealed before the store kept them (a schema
        distributed by ADR 0051's build), each page of the log in its own transaction
        (``CitusChain.fill_shard_chains``). Idempotent, so an interrupted run is done
        again from the start."""
        self.chain.fill_shard_chains(connection, progress, page_transactions=True)

    # Distributing ---------------------------------------------------------------------

    def fill_shard_keys(self, connection: Any, progress: Progress, *, decode: Any) -> None:
        """Every stream's shard key on an existing schema's rows, from its first event
        (``decode``: a stored event to its domain event), in batches."""
        events = self.events_table
        filled = 0
        while True:
            rows = connection.execute(
                f"SELECT originator_id, topic, state FROM {events} "
                "WHERE originator_version = 1 AND shard_key IS NULL LIMIT 1000"
            ).fetchall()
            if not rows:
                break
            ids, keys = [], []
            for originator_id, topic, state in rows:
                event = decode(StoredEvent(originator_id, 1, topic, bytes(state)))
                ids.append(originator_id)
                keys.append(shard_key_of(originator_id, event))
            connection.execute(
                f"UPDATE {events} AS e SET shard_key = k.key FROM unnest(%s::uuid[], "
                "%s::text[]) AS k(id, key) WHERE e.originator_id = k.id",
                (ids, keys),
            )
            filled += len(ids)
            progress(f"distributing: shard keys of {filled} streams")
        orphans = connection.execute(
            f"SELECT count(*) FROM {events} WHERE shard_key IS NULL"
        ).fetchone()
        if orphans is not None and orphans[0]:
            raise citus_schema.NotDistributed(
                f"{orphans[0]} event rows belong to no stream with a first event; "
                "they cannot be given a shard key"
            )


def _node_of(hashed: int, shards: list[tuple[int, int, str]]) -> str:
    for low, high, node in shards:
        if low <= hashed <= high:
            return node
    raise RuntimeError(f"no shard holds hash {hashed}")
