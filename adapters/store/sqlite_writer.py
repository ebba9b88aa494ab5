"""The SQLite file store's writer: one connection on its own thread, with group commit.

Saves are queued. The thread takes everything queued (up to ``MAX_BATCH`` saves) and
writes it in one transaction, each save inside its own SAVEPOINT, then commits once:

- one fsync (WAL, ``synchronous=FULL``) covers the whole batch, and a save is settled
  (its ``settle`` called) only after that commit, so every save is durable when its
  caller goes on;
- a save that fails (a version conflict, a broken row) rolls back to its savepoint and
  fails alone; the others in the batch commit;
- the event loop never waits on SQLite for a write (``EventSourcedStore.save_async``).

The hash chain (ADR 0016, chain v2) is extended and sealed here, in the transaction that
writes the events, from heads kept in memory: the sealed log's head (sequence and hash)
and each recently written stream's last link. That is safe because
this connection is the only one that writes through them, and ``PRAGMA data_version``
(which changes when any *other* connection commits) is read inside every write
transaction: a commit from elsewhere (another process beside a reader gateway, an audit
import, a rebuild) drops the cached heads, and they are read again. See ADR 0020.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from sessionwire.adapters.store.chain import SqlChain
from sessionwire.adapters.store.event_store import (
    PendingSave,
    WriterClosed,
    record_contents,
)
from sessionwire.adapters.store.loop_handoff import settling_together
from sessionwire.adapters.store.read_models import SqlReadModel
from sessionwire.adapters.store.sqlite_rows import insert_rows
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.domain.hash_chain import ChainLink, LogHead, chain, first_version, is_batch

MAX_BATCH = 256
STREAM_HEADS = 10_000  # streams whose last link is kept (bounded: RSS flat)
LOCK_TIMEOUT_SECONDS = 30.0


class SQLiteWriter:
    # Every write of this process goes through the one connection below (group commit).
    blocking_saves_in_place = False

    def __init__(
        self,
        database: str,
        *,
        read_model: SqlReadModel,
        chain_table: SqlChain,
    ) -> None:
        self.database = database
        self.read_model = read_model
        self.chain = chain_table
        self._queue: queue.SimpleQueue[PendingSave | None] = queue.SimpleQueue()
        self._guard = threading.Lock()
        # Held by the thread for each batch, and by ``paused`` for another connection's
        # write: never two writing transactions of this process at once.
        self._writing = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Heads cached between transactions (valid while data_version is unchanged).
        self._data_version: int | None = None
        self._log_head: LogHead | None = None
        self._last_position: int | None = None
        self._streams: OrderedDict[UUID, tuple[int, bytes]] = OrderedDict()
        self.commits = 0
        """Transactions committed (a batch is one): how well saves were grouped."""
        self.saves = 0

    # The caller's side ------------------------------------------------------------------

    def submit(self, save: PendingSave) -> None:
        """Queue one save; ``settle`` is called from the writer thread once the save is
        committed (None) or failed (the error), never before. The caller keeps count of
        what it submitted: a save is its caller's work until settled (an event loop's
        caller settles on its loop, after this thread is done with it).

        Its ``save_id`` is not written: this thread runs each save once (a failed batch
        settles its error, and nothing retries it), so no save meets its own commit as
        a conflict (ADR 0021, "Saves are idempotent")."""
        with self._guard:
            if self._closed:
                raise WriterClosed("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"sessionwire-writer:{self.database}", daemon=True
                )
                self._thread.start()
        self._queue.put(save)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No batch is written until the block ends (another connection writes meanwhile;
        the heads are read again after it, through data_version)."""
        with self._writing:
            yield

    def close(self) -> None:
        """Finish what is queued, then stop the thread and close its connection."""
        with self._guard:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()

    # The writer thread ------------------------------------------------------------------

    def _run(self) -> None:
        connection = sqlite3.connect(
            self.database,
            isolation_level=None,  # explicit BEGIN/COMMIT below
            check_same_thread=False,
            timeout=LOCK_TIMEOUT_SECONDS,
        )
        connection.row_factory = sqlite3.Row
        # The durability every caller is promised: fsync of the WAL on each commit.
        connection.execute("PRAGMA synchronous=FULL")
        try:
            stopping = False
            while not stopping:
                first = self._queue.get()
                if first is None:
                    break
                batch = [first]
                while len(batch) < MAX_BATCH:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stopping = True
                        break
                    batch.append(more)
                with self._writing:
                    self._write_batch(connection, batch)
        finally:
            connection.close()

    def _write_batch(self, connection: sqlite3.Connection, batch: list[PendingSave]) -> None:
        cursor = connection.cursor()
        outcomes: list[BaseException | None] = []
        try:
            cursor.execute("BEGIN IMMEDIATE")
            version = cursor.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:
                self._forget_heads()
                self._data_version = version
            grouped = len(batch) > 1
            for save in batch:
                if grouped:
                    cursor.execute("SAVEPOINT member")
                try:
                    links = self._write(cursor, save)
                except Exception as error:
                    if not grouped:
                        raise
                    cursor.execute("ROLLBACK TO member")
                    cursor.execute("RELEASE member")
                    outcomes.append(_conflict(error))
                    continue
                if grouped:
                    cursor.execute("RELEASE member")
                self._advance_heads(links)
                outcomes.append(None)
            cursor.execute("COMMIT")
        except Exception as error:
            with contextlib.suppress(sqlite3.Error):
                connection.rollback()
            self._forget_heads()
            failure = _conflict(error)
            outcomes = [failure] * len(batch)
        finally:
            cursor.close()
        self.commits += 1
        self.saves += len(batch)
        # One wake-up of the loop for the batch, not one per save (loop_handoff).
        with settling_together():
            for save, outcome in zip(batch, outcomes, strict=True):
                save.settle(outcome)

    def _write(self, cursor: Any, save: PendingSave) -> list[ChainLink]:
        # Storage v3 (ADR 0036): the links are made first, at the positions the rows will
        # take (this connection is the file's one writer, in its write transaction), so
        # each event is one INSERT carrying its chain hashes and history columns.
        first = self._position(cursor) + 1
        records = record_contents(range(first, first + len(save.stored)), save.stored)
        previous_streams: dict[UUID, bytes] = {}
        seen: set[UUID] = set()
        for _, record in records:
            originator, version = record.originator_id, record.originator_version
            if originator in seen:
                continue  # chained to its own earlier event in this save
            seen.add(originator)
            # A batch of messages takes several versions: its predecessor is before them.
            first_of = first_version(record) if is_batch(record.topic) else version
            if first_of <= 1:
                continue
            previous = self._stream_head(cursor, originator, first_of - 1)
            if previous is not None:
                previous_streams[originator] = previous
        links = chain(records, head=self._head(cursor), previous_streams=previous_streams)
        insert_rows(cursor, save.stored, links)
        if save.changes:
            self.read_model.write(cursor, save.changes, save.stored)
        return links

    def _position(self, cursor: Any) -> int:
        if self._last_position is None:
            cursor.execute("SELECT COALESCE(MAX(rowid), 0) FROM stored_events")
            self._last_position = int(cursor.fetchone()[0])
        return self._last_position

    def _head(self, cursor: Any) -> LogHead:
        if self._log_head is None:
            self._log_head = self.chain.head(cursor)
        return self._log_head

    def _stream_head(self, cursor: sqlite3.Cursor, originator: UUID, version: int) -> bytes | None:
        cached = self._streams.get(originator)
        if cached is not None and cached[0] == version:
            return cached[1]
        cursor.execute(self.chain.select_stream, (originator.hex, version))
        found = cursor.fetchone()
        return bytes(found["stream_hash"]) if found is not None else None

    def _advance_heads(self, links: list[ChainLink]) -> None:
        if not links:
            return
        last = links[-1]
        assert last.log_seq is not None
        assert last.log_hash is not None
        self._log_head = LogHead(last.log_seq, last.log_hash)
        self._last_position = last.notification_id
        for link in links:
            self._streams[link.originator_id] = (link.originator_version, link.stream_hash)
            self._streams.move_to_end(link.originator_id)
        while len(self._streams) > STREAM_HEADS:
            self._streams.popitem(last=False)

    def _forget_heads(self) -> None:
        self._log_head = None
        self._last_position = None
        self._streams.clear()


def _conflict(error: BaseException) -> BaseException:
    # eventsourcing raised its IntegrityError for any constraint; the store maps that to
    # StoreConflict (reload and retry). Anything else goes to the caller as it is.
    if isinstance(error, sqlite3.IntegrityError):
        return StoreConflict(str(error))
    return error
