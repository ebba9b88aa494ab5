"""The SQLite backend: a database file, or a private in-memory database ("memory").

The in-memory store is SQLite too (a shared-cache memory database, one per store), so
it runs exactly the code a file store runs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder
from eventsourcing.utils import get_topic
from sessionwire.adapters.store import sqlite_format, sqlite_search
from sessionwire.adapters.store.chain import CHECKPOINT_COLUMNS_ADDED, SqlChain
from sessionwire.adapters.store.event_store import (
    READ_MODEL_KEY,
    EventSourcedStore,
    RecordsReadModels,
    SessionwireApplication,
    StoreBackend,
    StoreURLError,
    no_kind,
    record_contents,
)
from sessionwire.adapters.store.read_models import SqlReadModel
from sessionwire.adapters.store.sql_dialect import SqlDialect, as_uuid
from sessionwire.adapters.store.sqlite_rows import history_columns_of, insert_rows
from sessionwire.adapters.store.sqlite_writer import SQLiteWriter
from sessionwire.adapters.store.transcript_search import SqlTranscriptSearch
from sessionwire.adapters.store.writer_lock import SQLiteWriterLock
from sessionwire.domain.hash_chain import chain

if TYPE_CHECKING:
    from sessionwire.application.projection import ReadModelChanges


def sqlite_dialect() -> SqlDialect:
    """How SQLite spells the store's statements (every backend difference of the SQL)."""
    return SqlDialect(
        marker="?",
        prefix="",
        events="stored_events",
        position="rowid",
        chain="sw_chain",
        checkpoints="sw_checkpoints",
        serial_key="INTEGER PRIMARY KEY",
        id_type="TEXT",
        blob_type="BLOB",
        key_type="INTEGER",
        to_db_id=lambda value: value.hex,
        from_db_id=as_uuid,
        # The message's JSON at offset 11 (1-based 12) of ``body`` bytes, with its
        # provenance (stored after it, in the reader's shape) appended as the line's
        # last field when it has one.
        line=(
            "CASE WHEN provenance IS NULL THEN CAST(substr(state, 12, body) AS TEXT) "
            "ELSE CAST(substr(state, 12, body - 1) AS TEXT) || ',\"provenance\":' "
            "|| CAST(substr(state, 26 + body, provenance) AS TEXT) || '}' END AS line"
        ),
        write_options={},
        keyed_table=" WITHOUT ROWID",
    )


class SQLiteSessionRecorder(RecordsReadModels, SQLiteApplicationRecorder):
    """Storage v3 (ADR 0036): one row per event, with its chain link and, for a message,
    its history columns; a v2 file is upgraded in place when opened."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dialect = sqlite_dialect()
        self.read_model = SqlReadModel(
            dialect,
            kind_of=no_kind,
            transcript_in_log=True,
            session_columns=True,
            history_views=True,
        )
        self.chain = SqlChain(replace(dialect, history_columns=history_columns_of))
        self.transcript_search = SqlTranscriptSearch(self.read_model, sqlite_search.SEARCH_SQL)
        super().__init__(*args, **kwargs)
        # eventsourcing's positional INSERT would not fit the v3 row.
        self.insert_events_statement = sqlite_format.INSERT_EVENT

    def construct_create_table_statements(self) -> list[str]:
        return [
            *sqlite_format.create_statements(),
            *self.read_model.create_statements(),
            *self.chain.checkpoint_statements(),
        ]

    def create_table(self) -> None:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT type FROM sqlite_master WHERE name = 'sw_chain'")
            found = c.fetchone()
        chain_kind = None if found is None else found[0]
        super().create_table()
        if chain_kind == "table":
            with self.datastore.transaction(commit=True) as c:
                # A chain written before sealing existed (v1): its rows take their order
                # as their log_seq, before the upgrade moves them into the events.
                c.execute("SELECT 1 FROM pragma_table_info('sw_chain') WHERE name = 'log_seq'")
                if c.fetchone() is None:
                    for statement in self.chain.upgrade_statements():
                        c.execute(statement)
            sqlite_format.upgrade(lambda: self.datastore.transaction(commit=True))
        elif chain_kind is None:
            with self.datastore.transaction(commit=True) as c:
                for statement in sqlite_format.finish_statements():
                    c.execute(statement)
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT name FROM pragma_table_info('sw_sessions')")
            altered = self.read_model.missing_view_columns({row[0] for row in c.fetchall()})
        if altered:
            # A file made before history views (ADR 0054): its messages' views are
            # rendered on read until they are written again.
            with self.datastore.transaction(commit=True) as c:
                for statement in altered:
                    c.execute(statement)
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT name FROM pragma_table_info('sw_checkpoints')")
            present = {row[0] for row in c.fetchall()}
        missing = [
            column for column in CHECKPOINT_COLUMNS_ADDED if column.split()[0] not in present
        ]
        if missing:
            # A table made before checkpoints signed the sessions' membership (ADR 0036
            # §7), or their trees' sizes (ADR 0041).
            with self.datastore.transaction(commit=True) as c:
                for column in missing:
                    c.execute(f"ALTER TABLE sw_checkpoints ADD COLUMN {column}")
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT 1 FROM sw_format WHERE name = 'search'")
            indexed = c.fetchone() is not None or sqlite_format.needs_upgrade(c)
        if not indexed:
            # The transcript search's index (ADR 0050), filled once for a store made
            # before it; an upgrade from v2 that stopped midway fills it when it ends.
            with self.datastore.transaction(commit=True) as c:
                sqlite_search.ensure_index(c)

    def _insert_events(
        self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        # The caller's connection (a memory store, or a write outside the writer thread):
        # positions and heads are read here, under this transaction's write lock.
        c.execute("SELECT COALESCE(MAX(rowid), 0) FROM stored_events")
        last = int(c.fetchone()[0])
        records = record_contents(range(last + 1, last + 1 + len(stored_events)), stored_events)
        links = chain(
            records,
            head=self.chain.head(c),
            previous_streams=self.chain.previous_streams(c, records),
        )
        insert_rows(c, stored_events, links)
        changes: ReadModelChanges | None = kwargs.get(READ_MODEL_KEY)
        if changes:
            self.read_model.write(c, changes, stored_events)
        return [link.notification_id for link in links]


class SQLiteBackend(StoreBackend):
    """``memory`` or ``sqlite:///path/to/file.db``; sessions get the default no-op lock."""

    def __init__(self, url: str) -> None:
        self._writer_lock: SQLiteWriterLock | None = None
        self._file: Path | None = None
        if url == "memory":
            name = f"file:sessionwire-{uuid.uuid4().hex}?mode=memory&cache=shared"
            self.env, self.location = _settings(name), "memory"
            return
        file = sqlite_file(url)
        self._url = url
        self._file = file
        self.env, self.location = _settings(str(file)), str(file)
        self._writer_lock = SQLiteWriterLock(file)

    seals_as_it_writes = True
    writes_v3_records = True
    records_save_ids = False  # its one writer thread runs each save once (sqlite_writer)

    def exists(self) -> bool:
        # An empty file is what ``create_private`` leaves before the first open's tables.
        return self._file is None or (self._file.is_file() and self._file.stat().st_size > 0)

    def open_application(self) -> SessionwireApplication:
        # Made here, not when the URL is read: a command that only reads asks ``exists``
        # first and makes nothing.
        if self._file is not None:
            self._check_directory()
            create_private(self._file)
        return super().open_application()

    def _check_directory(self) -> None:
        if self._file is not None and not self._file.parent.is_dir():
            raise StoreURLError(
                f"directory {self._file.parent} of store {self._url!r} does not exist"
            )

    def others_may_write(self) -> bool:
        # A memory database is this process's; a file is written only by the holder of
        # its writer's lock, which is either this store or another process.
        return self._writer_lock is not None and not self._writer_lock.held

    def hold_writer(self) -> None:
        # A memory store is private to its process: only a file has other writers.
        # Held already (every save after the first): nothing to ask the file system; a
        # stat per save was a blocking call on the event loop, 8% of an append's CPU.
        if self._writer_lock is not None and not self._writer_lock.held:
            self._check_directory()
            self._writer_lock.acquire()

    def release_writer(self) -> None:
        if self._writer_lock is not None:
            self._writer_lock.release()

    def admits_many_writers(self) -> bool:
        return self._writer_lock is None

    def open_writer(self, store: EventSourcedStore) -> SQLiteWriter | None:
        # A memory database is shared-cache and private to this process: its writes stay
        # on the caller's connection (a second connection would take table locks).
        if self.location == "memory":
            return None
        recorder = store.recorder
        assert isinstance(recorder, SQLiteSessionRecorder)
        return SQLiteWriter(
            self.location, read_model=recorder.read_model, chain_table=recorder.chain
        )


def create_private(file: Path) -> None:
    """Create a new SQLite file readable by its owner only (0600; SQLite gives its -wal
    and -shm files the same mode). The sessions hold every conversation; a world-readable
    default store leaked them to every local user. An existing file is left as it is."""
    try:
        os.close(os.open(file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as error:
        raise StoreURLError(f"cannot create store {file}: {error.strerror}") from None


def sqlite_file(url: str) -> Path:
    """The file an ``sqlite:`` URL names: ``sqlite:///abs/path.db`` (or four slashes), or
    ``sqlite:~/path.db``. A relative path is refused rather than guessed at: three slashes
    already mean the root, so ``sqlite:///relative.db`` would quietly be ``/relative.db``."""
    raw = url[len("sqlite:") :]
    if not raw.strip("/"):
        raise StoreURLError(f"no file in store URL {url!r}; use sqlite:///path/to/file.db")
    if raw.startswith("///") or (raw.startswith("/") and not raw.startswith("//")):
        path = "/" + raw.lstrip("/")
    elif raw.startswith("~"):
        path = raw
    else:
        name = raw.lstrip("/")
        raise StoreURLError(
            f"store {url!r} has a relative path; write it absolute, e.g. "
            f"sqlite:///{(Path.cwd() / (name or 'sessions.db')).as_posix().lstrip('/')}"
        )
    file = Path(path).expanduser()
    if file.parent == Path("/") and not file.exists():
        # Almost always a relative path written with three slashes.
        raise StoreURLError(
            f"store {url!r} would create {file} at the filesystem root; for a file in this "
            f"directory write sqlite:///{(Path.cwd() / file.name).as_posix().lstrip('/')}"
        )
    return file


def _settings(name: str) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "APPLICATION_RECORDER_TOPIC": get_topic(SQLiteSessionRecorder),
        "SQLITE_DBNAME": name,
        "SQLITE_LOCK_TIMEOUT": "30",
    }
