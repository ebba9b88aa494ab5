"""The hash-chain table and the log queries of the audit commands, for SQLite and PostgreSQL.

``sw_chain`` holds one row per stored event, keyed by its notification id, and is written
on the cursor of the transaction that inserts the events (docs/adr/0008-hash-chain.md).
The hashing rule itself is sessionwire.domain.hash_chain; this module only moves rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any
from uuid import UUID

from sessionwire.adapters.store.read_models import Cursor
from sessionwire.application.ports.audit_log import CheckedRecord, StoredRecord
from sessionwire.domain.checkpoint import Checkpoint, Statement, StreamHead
from sessionwire.domain.hash_chain import GENESIS, ChainLink, RecordContent, chain

PAGE = 1_000


@dataclass(frozen=True)
class LogTables:
    """How one engine names the events table and its position column."""

    marker: str
    events: str
    position: str  # SQLite: the implicit rowid; PostgreSQL: the notification_id column
    chain: str
    checkpoints: str
    serial_key: str  # an id column numbered by the database
    id_type: str  # the chain's originator id column type (the events table's own)
    blob_type: str
    key_type: str
    to_db_id: Callable[[UUID], Any]
    from_db_id: Callable[[Any], UUID]


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def sqlite_tables() -> LogTables:
    return LogTables(
        marker="?",
        events="stored_events",
        position="rowid",
        chain="sw_chain",
        checkpoints="sw_checkpoints",
        serial_key="INTEGER PRIMARY KEY",
        id_type="TEXT",
        blob_type="BLOB",
        key_type="INTEGER",
        to_db_id=lambda value: value.hex,
        from_db_id=_uuid,
    )


def postgres_tables(schema: str, events_table: str) -> LogTables:
    return LogTables(
        marker="%s",
        events=f'"{schema}"."{events_table}"',
        position="notification_id",
        chain=f'"{schema}".sw_chain',
        checkpoints=f'"{schema}".sw_checkpoints',
        serial_key="BIGSERIAL PRIMARY KEY",
        id_type="uuid",
        blob_type="bytea",
        key_type="BIGINT",
        to_db_id=lambda value: value,
        from_db_id=_uuid,
    )


class SqlChain:
    def __init__(self, tables: LogTables, *, write_options: dict[str, Any]) -> None:
        self.t = tables
        self.write_options = write_options
        m = tables.marker
        self.insert_link = (
            f"INSERT INTO {tables.chain} (notification_id, originator_id, originator_version, "
            f"stream_hash, log_hash) VALUES ({m}, {m}, {m}, {m}, {m})"
        )
        self.select_head = (
            f"SELECT log_hash FROM {tables.chain} ORDER BY notification_id DESC LIMIT 1"
        )
        self.select_stream = (
            f"SELECT stream_hash FROM {tables.chain} "
            f"WHERE originator_id = {m} AND originator_version = {m}"
        )

    def create_statements(self) -> list[str]:
        t = self.t
        return [
            f"CREATE TABLE IF NOT EXISTS {t.chain} ("
            f"notification_id {t.key_type} PRIMARY KEY, originator_id {t.id_type} NOT NULL, "
            f"originator_version BIGINT NOT NULL, stream_hash {t.blob_type} NOT NULL, "
            f"log_hash {t.blob_type} NOT NULL)",
            f"CREATE UNIQUE INDEX IF NOT EXISTS sw_chain_stream ON {t.chain} "
            "(originator_id, originator_version)",
        ]

    def checkpoint_statements(self) -> list[str]:
        """The signed checkpoints (ADR 0016 §3): a table of their own, never rewritten."""
        t = self.t
        return [
            f"CREATE TABLE IF NOT EXISTS {t.checkpoints} (id {t.serial_key}, "
            f"log_size BIGINT NOT NULL, log_hash {t.blob_type} NOT NULL, "
            f"heads_root {t.blob_type} NOT NULL, time TEXT NOT NULL, key_id TEXT NOT NULL, "
            f"public_key {t.blob_type} NOT NULL, signature {t.blob_type} NOT NULL)"
        ]

    # Writes ---------------------------------------------------------------------------

    def append(self, cursor: Cursor, records: Sequence[tuple[int, RecordContent]]) -> None:
        """Chain events just inserted (in this transaction, under the writers' lock)."""
        execute: Any = partial(cursor.execute, **self.write_options)
        execute(self.select_head)
        head = cursor.fetchone()
        previous_log = bytes(head["log_hash"]) if head is not None else GENESIS
        previous_streams: dict[UUID, bytes] = {}
        firsts: dict[UUID, int] = {}
        for _, record in records:
            firsts.setdefault(record.originator_id, record.originator_version)
        for originator_id, version in firsts.items():
            if version <= 1:
                continue
            execute(self.select_stream, (self.t.to_db_id(originator_id), version - 1))
            found = cursor.fetchone()
            if found is not None:
                previous_streams[originator_id] = bytes(found["stream_hash"])
        links = chain(list(records), previous_log=previous_log, previous_streams=previous_streams)
        self.write_links(cursor, links)

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
                ),
            )

    def record_checkpoint(self, cursor: Cursor, checkpoint: Checkpoint) -> None:
        m = self.t.marker
        statement = checkpoint.statement
        cursor.execute(
            f"INSERT INTO {self.t.checkpoints} (log_size, log_hash, heads_root, time, key_id, "
            f"public_key, signature) VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m})",
            (
                statement.log_size,
                statement.log_hash,
                statement.heads_root,
                statement.time,
                statement.key_id,
                checkpoint.public_key,
                checkpoint.signature,
            ),
            **self.write_options,
        )

    # Reads ----------------------------------------------------------------------------

    def sealed_head(self, cursor: Cursor, size: int | None = None) -> tuple[int, bytes, int] | None:
        """The sealed log's head (or its head when it held ``size`` records): (size, log
        hash, position of its last record), or None for a log with no chain or fewer
        records. Chain v1: every chain row is sealed, in notification-id order. (The one
        place that knows how the log is sealed: ADR 0016 §2.)"""
        t, m = self.t, self.t.marker
        if size is None:
            cursor.execute(f"SELECT COUNT(*) AS size FROM {t.chain}")
            size = int(cursor.fetchone()["size"])
        if size < 1:
            return None
        cursor.execute(
            f"SELECT notification_id, log_hash FROM {t.chain} ORDER BY notification_id "
            f"LIMIT 1 OFFSET {m}",
            (size - 1,),
        )
        last = cursor.fetchone()
        if last is None:
            return None
        return size, bytes(last["log_hash"]), int(last["notification_id"])

    def stream_heads(self, cursor: Cursor, position: int) -> list[StreamHead]:
        """Every stream's last chained version at log ``position``, in no set order."""
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT c.originator_id, c.originator_version, c.stream_hash FROM {t.chain} c "
            f"JOIN (SELECT originator_id, MAX(originator_version) AS v FROM {t.chain} "
            f"WHERE notification_id <= {m} GROUP BY originator_id) h "
            "ON h.originator_id = c.originator_id AND h.v = c.originator_version",
            (position,),
        )
        return [
            StreamHead(
                originator_id=t.from_db_id(row["originator_id"]),
                version=int(row["originator_version"]),
                stream_hash=bytes(row["stream_hash"]),
            )
            for row in cursor.fetchall()
        ]

    def checkpoints(self, cursor: Cursor, *, limit: int) -> list[Checkpoint]:
        """The latest ``limit`` recorded checkpoints, newest first."""
        m = self.t.marker
        cursor.execute(
            "SELECT log_size, log_hash, heads_root, time, key_id, public_key, signature "
            f"FROM {self.t.checkpoints} ORDER BY id DESC LIMIT {m}",
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
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT e.{t.position} AS n, e.originator_id, e.originator_version, e.topic, "
            "e.state, c.notification_id AS c_n, c.originator_id AS c_id, "
            "c.originator_version AS c_version, c.stream_hash, c.log_hash, "
            f"p.stream_hash AS previous_hash, pe.{t.position} AS previous_n "
            f"FROM {t.events} e "
            f"LEFT JOIN {t.chain} c ON c.notification_id = e.{t.position} "
            f"LEFT JOIN {t.chain} p ON p.originator_id = e.originator_id "
            "AND p.originator_version = e.originator_version - 1 "
            f"LEFT JOIN {t.events} pe ON pe.originator_id = e.originator_id "
            "AND pe.originator_version = e.originator_version - 1 "
            f"WHERE e.{t.position} > {m} AND e.{t.position} <= {m} "
            f"ORDER BY e.{t.position} LIMIT {m}",
            (after, stop, PAGE),
        )
        return [
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

    def links_page(self, cursor: Cursor, after: int, stop: int) -> list[ChainLink]:
        m = self.t.marker
        cursor.execute(
            "SELECT notification_id AS c_n, originator_id AS c_id, originator_version AS "
            f"c_version, stream_hash, log_hash FROM {self.t.chain} "
            f"WHERE notification_id > {m} AND notification_id <= {m} "
            f"ORDER BY notification_id LIMIT {m}",
            (after, stop, PAGE),
        )
        return [self._link(row, prefix="c_") for row in cursor.fetchall()]

    def records_page(
        self, cursor: Cursor, after: int, stop: int
    ) -> list[tuple[StoredRecord, ChainLink | None]]:
        t, m = self.t, self.t.marker
        cursor.execute(
            f"SELECT e.{t.position} AS n, e.originator_id, e.originator_version, e.topic, "
            "e.state, c.notification_id AS c_n, c.originator_id AS c_id, "
            "c.originator_version AS c_version, c.stream_hash, c.log_hash "
            f"FROM {t.events} e LEFT JOIN {t.chain} c ON c.notification_id = e.{t.position} "
            f"WHERE e.{t.position} > {m} AND e.{t.position} <= {m} "
            f"ORDER BY e.{t.position} LIMIT {m}",
            (after, stop, PAGE),
        )
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

    def _record(self, row: Any) -> StoredRecord:
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
            log_hash=bytes(row["log_hash"]),
        )

    def insert_record(self, cursor: Cursor, record: StoredRecord) -> None:
        """An event at its original position (import into an empty store)."""
        t, m = self.t, self.t.marker
        content = record.content
        cursor.execute(
            f"INSERT INTO {t.events} ({t.position}, originator_id, originator_version, topic, "
            f"state) VALUES ({m}, {m}, {m}, {m}, {m})",
            (
                record.notification_id,
                t.to_db_id(content.originator_id),
                content.originator_version,
                content.topic,
                content.state,
            ),
            **self.write_options,
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


def pages(
    fetch: Callable[[int, int], Sequence[Any]], position: Callable[[Any], int], stop: int
) -> Iterator[Any]:
    """Every row from a keyset-paged query, one page in memory at a time."""
    after = 0
    while True:
        page = fetch(after, stop)
        yield from page
        if len(page) < PAGE:
            return
        after = position(page[-1])
