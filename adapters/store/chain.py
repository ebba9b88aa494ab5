"""The hash-chain table, its one sealer and the log queries of the audit commands, for
SQLite and PostgreSQL.

``sw_chain`` holds one row per stored event, keyed by its notification id. Its stream
link is written on the cursor of the transaction that inserts the events; its place in
the sealed log (``log_seq``, ``log_hash``) is written by the sealer, in that same
transaction on SQLite (one writer) and behind the writers on PostgreSQL, once the record
is final (docs/adr/0016, 0021). The hashing rule itself is sessionwire.domain.hash_chain;
this module only moves rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sessionwire.adapters.store.read_models import Cursor
from sessionwire.adapters.store.sql_dialect import SqlDialect, same_shard
from sessionwire.domain.hash_chain import (
    ChainLink,
    LogHead,
    RecordContent,
    Seal,
    ShardLink,
    first_version,
    is_batch,
    seal,
    stream_links,
)

if TYPE_CHECKING:
    # The audit port's records and the checkpoints' code load with the first record read
    # (a replay, the live stream, an audit command): a store opened to list sessions
    # reads none (issue 38 item 7).
    from sessionwire.application.ports.audit_log import CheckedRecord, StoredRecord
    from sessionwire.domain.checkpoint import Checkpoint, ShardHead, StreamHead

PAGE = 1_000
STREAM_HEADS = 10_000


# Columns of the checkpoints table added after it was first made, for older tables.
CHECKPOINT_COLUMNS_ADDED = (
    "sessions_root BLOB",
    "heads_count BIGINT",
    "sessions_count BIGINT",
    "shards_root BLOB",
    "shards_count BIGINT",
)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


class SqlChain:
    def __init__(self, tables: SqlDialect) -> None:
        self.t = tables
        self.write_options = tables.write_options
        # A distributed store's stream heads group by shard as well (``shard_join``).
        self._shard_column = ", shard_key" if tables.shard_join else ""
        m = tables.marker
        self.insert_link = (
            f"INSERT INTO {tables.chain} (notification_id, originator_id, originator_version, "
            f"stream_hash, log_hash, log_seq) VALUES ({m}, {m}, {m}, {m}, {m}, {m})"
        )
        self.select_head = (
            f"SELECT log_seq, log_hash FROM {tables.chain} WHERE log_seq IS NOT NULL "
            "ORDER BY log_seq DESC LIMIT 1"
        )
        self.select_stream = (
            f"SELECT stream_hash FROM {tables.chain} "
            f"WHERE originator_id = {m} AND originator_version = {m}"
        )
        # The last committed link of streams this process wrote (id -> version, hash): a
        # save that continues one needs no read. Filled by committed(), after the commit.
        self._heads: OrderedDict[UUID, tuple[int, bytes]] = OrderedDict()
        self._heads_lock = threading.Lock()
        self._record_columns = self._RECORD_COLUMNS + self.shard_columns("c.")

    def create_statements(self) -> list[str]:
        return [self.table_statement(), *self.index_statements()]

    def table_statement(self) -> str:
        t = self.t
        xact = f", {t.xact_column}" if t.xact_column else ""
        return (
            f"CREATE TABLE IF NOT EXISTS {t.chain} ("
            f"notification_id {t.key_type} PRIMARY KEY, originator_id {t.id_type} NOT NULL, "
            f"originator_version BIGINT NOT NULL, stream_hash {t.blob_type} NOT NULL, "
            f"log_hash {t.blob_type}, log_seq BIGINT{xact})"
        )

    def index_statements(self) -> list[str]:
        t = self.t
        statements = [
            f"CREATE UNIQUE INDEX IF NOT EXISTS sw_chain_stream ON {t.chain} "
            "(originator_id, originator_version)",
            f"CREATE UNIQUE INDEX IF NOT EXISTS sw_chain_seq ON {t.chain} (log_seq) "
            "WHERE log_seq IS NOT NULL",
        ]
        if t.xact_column:
            # Small: only the rows the sealer has still to seal, in the order it seals them.
            statements.append(
                f"CREATE INDEX IF NOT EXISTS sw_chain_unsealed ON {t.chain} "
                "(xact_id, notification_id) WHERE log_seq IS NULL"
            )
        return statements

    def upgrade_statements(self) -> list[str]:
        """Chain v1 (every row sealed as written, in notification order) to v2: the rows
        keep their hashes and take their order as their ``log_seq``."""
        t = self.t
        statements = [f"ALTER TABLE {t.chain} ADD COLUMN log_seq BIGINT"]
        if t.xact_column:
            statements += [
                # No default while adding: v1 rows are sealed, they need no transaction id.
                f"ALTER TABLE {t.chain} ADD COLUMN xact_id xid8",
                f"ALTER TABLE {t.chain} ALTER COLUMN xact_id SET DEFAULT pg_current_xact_id()",
                f"ALTER TABLE {t.chain} ALTER COLUMN log_hash DROP NOT NULL",
            ]
        statements.append(
            f"UPDATE {t.chain} SET log_seq = ranked.seq FROM (SELECT notification_id AS n, "
            "row_number() OVER (ORDER BY notification_id) AS seq "
            f"FROM {t.chain}) AS ranked WHERE {t.chain}.notification_id = ranked.n"
        )
        return statements

    def checkpoint_statements(self) -> list[str]:
        """The signed checkpoints (ADR 0016 §3): a table of their own, never rewritten."""
        t = self.t
        statements = [
            f"CREATE TABLE IF NOT EXISTS {t.checkpoints} (id {t.serial_key}, "
            f"log_size BIGINT NOT NULL, log_hash {t.blob_type} NOT NULL, "
            f"heads_root {t.blob_type} NOT NULL, time TEXT NOT NULL, key_id TEXT NOT NULL, "
            f"public_key {t.blob_type} NOT NULL, signature {t.blob_type} NOT NULL, "
            f"sessions_root {t.blob_type}, heads_count BIGINT, sessions_count BIGINT, "
            f"shards_root {t.blob_type}, shards_count BIGINT)"
        ]
        if t.xact_column:
            # PostgreSQL: a table made before the sessions' membership was signed (ADR
            # 0036 §7), before the statement signed its trees' sizes (ADR 0041) or the
            # shards' heads (ADR 0067), gets the columns (SQLite: sqlite.py adds them when
            # missing).
            statements += [
                f"ALTER TABLE {t.checkpoints} ADD COLUMN IF NOT EXISTS "
                + column.replace("BLOB", t.blob_type)
                for column in CHECKPOINT_COLUMNS_ADDED
            ]
        return statements

    # Writes ---------------------------------------------------------------------------

    def append(
        self, cursor: Cursor, records: Sequence[tuple[int, RecordContent]], *, sealing: bool
    ) -> list[ChainLink]:
        """Link events just inserted to their streams, in this transaction; ``sealing``
        (the store's one writer, holding its write lock) also seals them at once."""
        previous_streams = self.previous_streams(cursor, records)
        links = stream_links(list(records), previous_streams=previous_streams)
        if sealing:
            seals = seal(self.head(cursor), [(lk.notification_id, lk.stream_hash) for lk in links])
            links = [
                replace(link, log_seq=sealed.log_seq, log_hash=sealed.log_hash)
                for link, sealed in zip(links, seals, strict=True)
            ]
        self.write_links(cursor, links)
        return links

    def previous_streams(
        self, cursor: Cursor, records: Sequence[tuple[int, RecordContent]]
    ) -> dict[UUID, bytes]:
        """The stream hash before the first of these records, for each stream that has
        one: from the committed heads this process remembers, else one indexed read."""
        execute: Any = partial(cursor.execute, **self.write_options)
        previous_streams: dict[UUID, bytes] = {}
        firsts: dict[UUID, int] = {}
        for _, record in records:
            # A batch of messages takes several versions: its predecessor is before them.
            firsts.setdefault(record.originator_id, first_version(record))
        for originator_id, version in firsts.items():
            if version <= 1:
                continue
            with self._heads_lock:
                known = self._heads.get(originator_id)
            if known is not None and known[0] == version - 1:
                previous_streams[originator_id] = known[1]
                continue
            execute(self.select_stream, (self.t.to_db_id(originator_id), version - 1))
            found = cursor.fetchone()
            if found is not None:
                previous_streams[originator_id] = bytes(found["stream_hash"])
        return previous_streams

    def committed(self, links: Iterable[ChainLink]) -> None:
        """Remember the stream heads of links whose transaction committed."""
        with self._heads_lock:
            for link in links:
                self._heads[link.originator_id] = (link.originator_version, link.stream_hash)
                self._heads.move_to_end(link.originator_id)
            while len(self._heads) > STREAM_HEADS:
                self._heads.popitem(last=False)

    def write_links(self, cursor: Cursor, links: Iterable[ChainLink]) -> None:
        execute: Any = partial(cursor.execute, **self.write_options)
        for link in links:
            execute(
                self.insert_link,
                (
                    link.notification_id,
                    self.t.to_db_id(link.originator_id),
                    link.originator_version,
                    link.stream_hash,
                    link.log_hash,
                    link.log_seq,
                ),
            )

    def write_links_many(self, cursor: Cursor, links: Sequence[ChainLink]) -> None:
        """``write_links`` in one statement (an import's batch)."""
        to_db_id = self.t.to_db_id
        if self.t.xact_column:
            # PostgreSQL storage v3: links written to the view are a v3 import's, even
            # unsealed ones (its trigger refuses a v2 gateway's unsealed links).
            cursor.execute("SELECT set_config('sessionwire.writer', 'v3', true)")
        cursor.executemany(
            self.insert_link,
            [
                (
                    link.notification_id,
                    to_db_id(link.originator_id),
                    link.originator_version,
                    link.stream_hash,
                    link.log_hash,
                    link.log_seq,
                )
                for link in links
            ],
        )

    def head(self, cursor: Cursor) -> LogHead:
        """The sealed log's last record (read under the sealer's lock or the writer's)."""
        cursor.execute(self.select_head, **self.write_options)
        return self.head_of(cursor.fetchone())

    @staticmethod
    def head_of(found: Any) -> LogHead:
        """The head from the row ``select_head`` found (None: an empty sealed log)."""
        if found is None:
            return LogHead()
        return LogHead(int(found["log_seq"]), bytes(found["log_hash"]))

    def seal_final(self, cursor: Cursor, *, limit: int = PAGE) -> int:
        """PostgreSQL's sealer, one batch: seal up to ``limit`` final records after the
        head, in (transaction id, notification id) order. The caller holds the sealer's
        lock, in this transaction. Returns how many were sealed."""
        assert self.t.final is not None, "only a store with writers in parallel seals behind them"
        head = self.head(cursor)
        cursor.execute(self.t.final, **self.write_options)
        return self.seal_below(cursor, head, cursor.fetchone()["bound"], limit=limit)

    def seal_below(self, cursor: Cursor, head: LogHead, bound: str, *, limit: int = PAGE) -> int:
        """``seal_final`` after its head and its bound (``t.final``) were read, in that
        order, in earlier statements of this transaction."""
        t, m = self.t, self.t.marker
        # A later statement, so a later snapshot: every transaction below the bound has
        # ended, and what it committed is visible here.
        cursor.execute(
            f"SELECT notification_id, stream_hash FROM {t.chain} "
            f"WHERE log_seq IS NULL AND xact_id < {m}::xid8 "
            f"ORDER BY xact_id, notification_id LIMIT {m}",
            (bound, limit),
            **self.write_options,
        )
        pending = [
            (int(row["notification_id"]), bytes(row["stream_hash"])) for row in cursor.fetchall()
        ]
        seals = seal(head, pending)
        self.write_seals(cursor, seals)
        return len(seals)

    def write_seals(
        self, cursor: Cursor, seals: Sequence[Seal], *, into: str | None = None
    ) -> None:
        """The seals' positions and log hashes on their rows of the chain, or of ``into``
        (the events table itself: Citus updates no view over its tables)."""
        if not seals:
            return
        cursor.execute(
            f"UPDATE {into or self.t.chain} AS c SET log_seq = s.seq, log_hash = s.hash "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::bytea[]) AS s(n, seq, hash) "
            "WHERE c.notification_id = s.n",
            (
                [x.notification_id for x in seals],
                [x.log_seq for x in seals],
                [x.log_hash for x in seals],
            ),
            **self.write_options,
        )

    def record_checkpoint(self, cursor: Cursor, checkpoint: Checkpoint) -> None:
        m = self.t.marker
        statement = checkpoint.statement
        cursor.execute(
            f"INSERT INTO {self.t.checkpoints} (log_size, log_hash, heads_root, time, key_id, "
            f"public_key, signature, sessions_root, heads_count, sessions_count, "
            f"shards_root, shards_count) "
            f"VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m})",
            (
                statement.log_size,
                statement.log_hash,
                statement.heads_root,
                statement.time,
                statement.key_id,
                checkpoint.public_key,
                checkpoint.signature,
                statement.sessions_root,
                statement.heads_count,
                statement.sessions_count,
                statement.shards_root,
                statement.shards_count,
            ),
            **self.write_options,
        )

    def unsealed_count(self, cursor: Cursor) -> int:
        cursor.execute(f"SELECT COUNT(*) AS n FROM {self.t.chain} WHERE log_seq IS NULL")
        return int(cursor.fetchone()["n"])

    # Reads ----------------------------------------------------------------------------

    def sealed_head(self, cursor: Cursor, size: int | None = None) -> tuple[int, bytes, int] | None:
        """The sealed log's head (or its head when it held ``size`` records): (size, log
        hash, position of its last record), or None for a log with nothing sealed or
        fewer records. The sealed log is the chain rows with a ``log_seq`` (ADR 0016 §2)."""
        t, m = self.t, self.t.marker
        columns = f"SELECT log_seq, log_hash, notification_id FROM {t.chain} "
        if size is None:
            cursor.execute(columns + "WHERE log_seq IS NOT NULL ORDER BY log_seq DESC LIMIT 1")
        else:
            cursor.execute(columns + f"WHERE log_seq = {m}", (size,))
        found = cursor.fetchone()
        if found is None:
            return None
        return int(found["log_seq"]), bytes(found["log_hash"]), int(found["notification_id"])

    def stream_heads(self, cursor: Cursor, size: int) -> list[StreamHead]:
        """Every stream's last version among the first ``size`` records of the sealed log,
        in no set order."""
        from sessionwire.domain.checkpoint import StreamHead

        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT c.originator_id, c.originator_version, c.stream_hash FROM {t.chain} c "
            f"JOIN (SELECT originator_id{self._shard_column}, MAX(originator_version) AS v "
            f"FROM {t.chain} "
            f"WHERE log_seq <= {m} GROUP BY originator_id{self._shard_column}) h "
            "ON h.originator_id = c.originator_id AND h.v = c.originator_version"
            f"{same_shard(t, 'h', 'c')}",
            (size,),
        )
        return [
            StreamHead(
                originator_id=t.from_db_id(row["originator_id"]),
                version=int(row["originator_version"]),
                stream_hash=bytes(row["stream_hash"]),
            )
            for row in cursor.fetchall()
        ]

    def shard_heads(self, cursor: Cursor, size: int) -> list[ShardHead]:
        """Each shard's head among the first ``size`` records of the sealed log, in no
        set order: none for a store of one log (ADR 0067: Citus keeps one per shard)."""
        return []

    def checkpoints(self, cursor: Cursor, *, limit: int) -> list[Checkpoint]:
        """The latest ``limit`` recorded checkpoints, newest first."""
        from sessionwire.domain.checkpoint import Checkpoint, Statement

        m = self.t.marker
        cursor.execute(
            "SELECT log_size, log_hash, heads_root, time, key_id, public_key, signature, "
            f"sessions_root, heads_count, sessions_count, shards_root, shards_count "
            f"FROM {self.t.checkpoints} "
            f"ORDER BY id DESC LIMIT {m}",
            (limit,),
        )
        return [
            Checkpoint(
                statement=Statement(
                    log_size=int(row["log_size"]),
                    log_hash=bytes(row["log_hash"]),
                    heads_root=bytes(row["heads_root"]),
                    time=row["time"],
                    key_id=row["key_id"],
                    sessions_root=(
                        None if row["sessions_root"] is None else bytes(row["sessions_root"])
                    ),
                    # Both or neither: a version-3 statement (ADR 0041).
                    heads_count=_count(row["heads_count"]),
                    sessions_count=_count(row["sessions_count"]),
                    # Both or neither: a version-4 statement (ADR 0067).
                    shards_root=(None if row["shards_root"] is None else bytes(row["shards_root"])),
                    shards_count=_count(row["shards_count"]),
                ),
                public_key=bytes(row["public_key"]),
                signature=bytes(row["signature"]),
            )
            for row in cursor.fetchall()
        ]

    def bounds(self, cursor: Cursor) -> tuple[int, int, int | None]:
        """Last event position, last chained position and first chained position."""
        t = self.t
        cursor.execute(f"SELECT MAX({t.position}) AS last FROM {t.events}")
        last_event = cursor.fetchone()["last"] or 0
        cursor.execute(
            f"SELECT MAX(notification_id) AS last, MIN(notification_id) AS first FROM {t.chain}"
        )
        found = cursor.fetchone()
        return last_event, found["last"] or 0, found["first"]

    def checked_page(self, cursor: Cursor, after: int, stop: int) -> list[CheckedRecord]:
        from sessionwire.application.ports.audit_log import CheckedRecord

        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT e.{t.position} AS n, e.originator_id, e.originator_version, e.topic, "
            "e.state, c.notification_id AS c_n, c.originator_id AS c_id, "
            "c.originator_version AS c_version, c.stream_hash, c.log_hash, c.log_seq"
            f"{self.shard_columns('c.')}, "
            f"p.stream_hash AS previous_hash, pe.{t.position} AS previous_n "
            f"FROM {t.events} e "
            f"LEFT JOIN {t.chain} c ON c.notification_id = e.{t.position}"
            f"{same_shard(t, 'c', 'e')} "
            f"LEFT JOIN {t.chain} p ON p.originator_id = e.originator_id "
            f"AND p.originator_version = e.originator_version - 1{same_shard(t, 'p', 'e')} "
            f"LEFT JOIN {t.events} pe ON pe.originator_id = e.originator_id "
            f"AND pe.originator_version = e.originator_version - 1{same_shard(t, 'pe', 'e')} "
            f"WHERE e.{t.position} > {m} AND e.{t.position} <= {m} "
            f"ORDER BY e.{t.position} LIMIT {m}",
            (after, stop, PAGE),
        )
        checked = [
            CheckedRecord(
                record=self._record(row),
                link=None if row["c_n"] is None else self._link(row, prefix="c_"),
                previous_stream_hash=(
                    None if row["previous_hash"] is None else bytes(row["previous_hash"])
                ),
                previous_position=row["previous_n"],
            )
            for row in cursor.fetchall()
        ]
        # A batch of messages takes several versions: its predecessor is the event before
        # its first one, not the version before its own (the join above).
        return [
            self._batch_predecessor(cursor, found)
            if is_batch(found.record.content.topic)
            else found
            for found in checked
        ]

    def _batch_predecessor(self, cursor: Cursor, checked: CheckedRecord) -> CheckedRecord:
        t, m = self.t, self.t.marker
        content = checked.record.content
        previous = first_version(content) - 1
        cursor.execute(
            f"SELECT e.{t.position} AS n, c.stream_hash FROM {t.events} e "
            f"LEFT JOIN {t.chain} c ON c.notification_id = e.{t.position}"
            f"{same_shard(t, 'c', 'e')} "
            f"WHERE e.originator_id = {m} AND e.originator_version = {m}",
            (t.to_db_id(content.originator_id), previous),
        )
        found = cursor.fetchone()
        hashed = found is not None and found["stream_hash"] is not None
        return replace(
            checked,
            previous_stream_hash=bytes(found["stream_hash"]) if hashed else None,
            previous_position=None if found is None else found["n"],
        )

    def links_page(self, cursor: Cursor, after: int, stop: int) -> list[ChainLink]:
        m = self.t.marker
        cursor.execute(
            "SELECT notification_id AS c_n, originator_id AS c_id, originator_version AS "
            f"c_version, stream_hash, log_hash, log_seq{self.shard_columns('')} "
            f"FROM {self.t.chain} "
            f"WHERE notification_id > {m} AND notification_id <= {m} "
            f"ORDER BY notification_id LIMIT {m}",
            (after, stop, PAGE),
        )
        return [self._link(row, prefix="c_") for row in cursor.fetchall()]

    def sealed_bounds(self, cursor: Cursor) -> tuple[int, int]:
        """The sealed log's last sequence number and the count of unsealed chain rows."""
        return self.head(cursor).seq, self.unsealed_count(cursor)

    def sealed_links_page(self, cursor: Cursor, after: int, stop: int) -> list[ChainLink]:
        """Sealed chain rows with ``after < log_seq <= stop``, in log order."""
        m = self.t.marker
        cursor.execute(
            "SELECT notification_id AS c_n, originator_id AS c_id, originator_version AS "
            f"c_version, stream_hash, log_hash, log_seq{self.shard_columns('')} "
            f"FROM {self.t.chain} "
            f"WHERE log_seq > {m} AND log_seq <= {m} ORDER BY log_seq LIMIT {m}",
            (after, stop, PAGE),
        )
        return [self._link(row, prefix="c_") for row in cursor.fetchall()]

    _RECORD_COLUMNS = (
        "e.originator_id, e.originator_version, e.topic, e.state, c.notification_id AS c_n, "
        "c.originator_id AS c_id, c.originator_version AS c_version, c.stream_hash, "
        "c.log_hash, c.log_seq"
    )

    def unchained_page(
        self, cursor: Cursor, after: int, stop: int
    ) -> list[tuple[StoredRecord, ChainLink | None]]:
        """Events with no chain row, by position, up to ``stop``: those written before the
        chain began come first in the log (and any slipped in since, for the importer to
        refuse)."""
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT e.{t.position} AS n, {self._record_columns} "
            f"FROM {t.events} e LEFT JOIN {t.chain} c ON c.notification_id = e.{t.position}"
            f"{same_shard(t, 'c', 'e')} "
            f"WHERE c.notification_id IS NULL AND e.{t.position} > {m} "
            f"AND e.{t.position} <= {m} ORDER BY e.{t.position} LIMIT {m}",
            (after, stop, PAGE),
        )
        return self._records(cursor)

    def sealed_records_page(
        self, cursor: Cursor, after: int, stop: int
    ) -> list[tuple[StoredRecord, ChainLink | None]]:
        """Sealed events with ``after < log_seq <= stop``, in log order."""
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT e.{t.position} AS n, {self._record_columns} "
            f"FROM {t.chain} c JOIN {t.events} e ON e.{t.position} = c.notification_id"
            f"{same_shard(t, 'c', 'e')} "
            f"WHERE c.log_seq > {m} AND c.log_seq <= {m} ORDER BY c.log_seq LIMIT {m}",
            (after, stop, PAGE),
        )
        return self._records(cursor)

    def unsealed_records_page(
        self, cursor: Cursor, after: int, stop: int, sealed: int
    ) -> list[tuple[StoredRecord, ChainLink | None]]:
        """Chained events not sealed (by ``sealed``, the head when reading began), by
        position: the log's tail, checked by their stream links alone."""
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT e.{t.position} AS n, {self._record_columns} "
            f"FROM {t.chain} c JOIN {t.events} e ON e.{t.position} = c.notification_id"
            f"{same_shard(t, 'c', 'e')} "
            f"WHERE (c.log_seq IS NULL OR c.log_seq > {m}) AND e.{t.position} > {m} "
            f"AND e.{t.position} <= {m} ORDER BY e.{t.position} LIMIT {m}",
            (sealed, after, stop, PAGE),
        )
        return [
            (
                record,
                None if link is None else replace(link, log_seq=None, log_hash=None, shard=None),
            )
            for record, link in self._records(cursor)
        ]

    def records_after(
        self, cursor: Cursor, position: int, limit: int
    ) -> list[tuple[int, StoredRecord]]:
        """Sealed records after log position ``position``, in log order, with their
        positions: final ones only, so a reader never skips one committed later."""
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT c.log_seq, e.{t.position} AS n, e.originator_id, e.originator_version, "
            f"e.topic, e.state FROM {t.chain} c "
            f"JOIN {t.events} e ON e.{t.position} = c.notification_id"
            f"{same_shard(t, 'c', 'e')} "
            f"WHERE c.log_seq > {m} ORDER BY c.log_seq LIMIT {m}",
            (position, limit),
        )
        return [(int(row["log_seq"]), self._record(row)) for row in cursor.fetchall()]

    def _records(self, cursor: Cursor) -> list[tuple[StoredRecord, ChainLink | None]]:
        return [
            (self._record(row), None if row["c_n"] is None else self._link(row, prefix="c_"))
            for row in cursor.fetchall()
        ]

    def stream_records(self, cursor: Cursor, ids: Sequence[UUID]) -> list[StoredRecord]:
        """Every event of these streams, in log order: read through the events' primary
        key (originator id, version), so the cost follows these streams, not the log."""
        t, m = self.t, self.t.marker
        found: list[StoredRecord] = []
        for start in range(0, len(ids), PAGE):
            chunk = ids[start : start + PAGE]
            cursor.execute(
                f"SELECT {t.position} AS n, originator_id, originator_version, topic, state "
                f"FROM {t.events} WHERE originator_id IN ({', '.join([m] * len(chunk))})",
                [t.to_db_id(i) for i in chunk],
            )
            found.extend(self._record(row) for row in cursor.fetchall())
        found.sort(key=lambda record: record.notification_id)
        return found

    def stream_records_linked(
        self, cursor: Cursor, ids: Sequence[UUID]
    ) -> list[tuple[StoredRecord, ChainLink | None]]:
        """Every event of these streams with its chain row, through the events' primary
        key: the cost follows these streams, not the log. In no set order."""
        t, m = self.t, self.t.marker
        found: list[tuple[StoredRecord, ChainLink | None]] = []
        for start in range(0, len(ids), PAGE):
            chunk = ids[start : start + PAGE]
            cursor.execute(
                f"SELECT e.{t.position} AS n, {self._record_columns} FROM {t.events} e "
                f"LEFT JOIN {t.chain} c ON c.notification_id = e.{t.position}"
                f"{same_shard(t, 'c', 'e')} "
                f"WHERE e.originator_id IN ({', '.join([m] * len(chunk))})",
                [t.to_db_id(i) for i in chunk],
            )
            found.extend(self._records(cursor))
        return found

    def _record(self, row: Any) -> StoredRecord:
        from sessionwire.application.ports.audit_log import StoredRecord

        return StoredRecord(
            notification_id=int(row["n"]),
            content=RecordContent(
                originator_id=self.t.from_db_id(row["originator_id"]),
                originator_version=int(row["originator_version"]),
                topic=row["topic"],
                state=bytes(row["state"]),
            ),
        )

    def _link(self, row: Any, *, prefix: str) -> ChainLink:
        return ChainLink(
            notification_id=int(row[f"{prefix}n"]),
            originator_id=self.t.from_db_id(row[f"{prefix}id"]),
            originator_version=int(row[f"{prefix}version"]),
            stream_hash=bytes(row["stream_hash"]),
            log_hash=None if row["log_hash"] is None else bytes(row["log_hash"]),
            log_seq=None if row["log_seq"] is None else int(row["log_seq"]),
            shard=self.shard_link(row),
        )

    def shard_columns(self, alias: str) -> str:
        """The chain row's shard columns in a read (``alias``: the chain's, with its dot):
        none for a store of one log."""
        return ""

    def shard_link(self, row: Any) -> ShardLink | None:
        """The row's place in its shard's log (read by ``shard_columns``)."""
        return None

    def insert_record(self, cursor: Cursor, record: StoredRecord) -> None:
        """An event at its original position (import into an empty store)."""
        self.insert_records(cursor, [record])

    def insert_records(
        self,
        cursor: Cursor,
        records: Sequence[StoredRecord],
        *,
        shard_keys: Mapping[UUID, str] | None = None,
    ) -> None:
        """Events at their original positions (an import's batch), in one statement; on
        a store distributed by session key, each under its stream's key in
        ``shard_keys``."""
        t, m = self.t, self.t.marker
        columns = "originator_id, originator_version, topic, state"
        if t.history_columns is not None:
            columns += ", role, body, provenance"
        keyed = bool(self._shard_column)
        if keyed:
            assert shard_keys is not None, "a distributed store's rows need their shard keys"
            columns += ", shard_key"
        marks = ", ".join([m] * (2 + columns.count(",")))
        history = t.history_columns
        cursor.executemany(
            f"INSERT INTO {t.events} ({t.position}, {columns}) VALUES ({marks})",
            [
                (
                    record.notification_id,
                    t.to_db_id(record.content.originator_id),
                    record.content.originator_version,
                    record.content.topic,
                    record.content.state,
                    *(
                        ()
                        if history is None
                        else history(record.content.topic, record.content.state)
                    ),
                    *((shard_keys[record.content.originator_id],) if shard_keys and keyed else ()),
                )
                for record in records
            ],
        )

    def advance_sequence(self, cursor: Cursor) -> None:
        """PostgreSQL: move the id sequence past ids written explicitly."""
        t = self.t
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence({t.marker}, 'notification_id'), "
            f"(SELECT MAX(notification_id) FROM {t.events}))",
            (t.events,),
        )

    def is_empty(self, cursor: Cursor) -> bool:
        cursor.execute(f"SELECT 1 AS found FROM {self.t.events} LIMIT 1")
        return cursor.fetchone() is None

    def imported(self, cursor: Cursor) -> None:
        """What the store adds to an import's records once they are all in, in the
        import's transaction: nothing on a store of one log (Citus: their shard chains)."""


def pages(
    fetch: Callable[[int, int], Sequence[Any]],
    position: Callable[[Any], int],
    stop: int,
    *,
    after: int = 0,
) -> Iterator[Any]:
    """Every row after ``after`` from a keyset-paged query, one page in memory at a time."""
    while True:
        page = fetch(after, stop)
        yield from page
        if len(page) < PAGE:
            return
        after = position(page[-1])
