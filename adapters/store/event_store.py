"""The event store: eventsourcing 9.5 on one of its databases, with our read models.

What every backend shares lives here: the store itself (saving aggregates with their
read-model changes, reading the log and the read models) and what the recorder
subclasses have in common. What differs, a backend module holds (``sqlite.py``,
``postgres.py``), chosen from the store URL by the table in ``backends.py`` as
eventsourcing chooses its persistence module (by topic, so this module never imports
the backends that import it): each recorder subclass writes the read-model changes on the
cursor that inserts the events, so events and read models commit together or not at all.
"""

from __future__ import annotations

import asyncio
import threading
import time
from abc import ABC
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import (
    AbstractContextManager,
    contextmanager,
    nullcontext,
    suppress,
)
from dataclasses import dataclass
from functools import partial
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Concatenate,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
)
from uuid import UUID, uuid4

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.utils import get_topic, resolve_topic
from sessionwire.adapters.store.backends import backend_entry
from sessionwire.adapters.store.delegated import delegated
from sessionwire.adapters.store.loop_guard import check_off_loop
from sessionwire.adapters.store.loop_handoff import LoopHandoff
from sessionwire.adapters.store.read_models import Cursor, SqlReadModel
from sessionwire.adapters.store.serialisation import JSONBytesTranscoder, PydanticMapper
from sessionwire.adapters.store.transcript_search import SqlTranscriptSearch
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.generated_methods import GeneratedMethod
from sessionwire.application.ports.session_locks import SessionLocks
from sessionwire.application.ports.session_read_model import (
    StoredSession,
)
from sessionwire.application.ports.store import Store
from sessionwire.application.ports.transcript_search import TranscriptMatch, TranscriptSearchQuery
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.hash_chain import RecordContent

if TYPE_CHECKING:
    # Imported where they are used, not here: a store opened only to read (the CLI's
    # `sessions list`) needs none of them. The projection imports every aggregate (the
    # first write or replay imports it), the session aggregate loads with the first save
    # (issue 38 item 7); the chain table is the backend's, the stored records the reads'.
    from sessionwire.adapters.store.chain import SqlChain
    from sessionwire.application.ports.audit_log import StoredRecord
    from sessionwire.application.projection import ReadModelChanges
    from sessionwire.domain.session import Session, SessionState

log = library_logger("sessionwire.store")

P = ParamSpec("P")
T = TypeVar("T")

KindOf = Callable[["SessionState"], str]
# The keyword the store passes its read-model changes to the recorder under.
READ_MODEL_KEY = "read_model_changes"
# ... and the save's id under (a retried save recognises its own commit by it).
SAVE_ID_KEY = "save_id"
# ... and the fence of the session lease the save was made under, if any.
FENCE_KEY = "fence"
SHARD_KEYS_KEY = "shard_keys"
"""A sharded store's keyword: each saved stream's shard key (``shard_keys.py``)."""
LOG_PAGE = 500
BATCHES_AS_ROWS = True
"""Storage v3 (ADR 0036): a batch of messages is stored one row per message. False stores
it as v2 did, one record for the batch: tests of what an upgraded v2 store holds."""
WRITE_CACHE_SIZE = 10_000
ANALYZE_FIRST_AT = 1_000


class StoreURLError(SessionwireError, ValueError):
    """A store location that cannot be opened; the message shows the accepted forms."""


class NoStore(StoreURLError):
    """A command that only reads was pointed where there is no store; it makes none."""


class StoreUnavailable(StoreURLError):
    """A well-formed store location whose server cannot be reached or has no such database."""


def no_kind(state: SessionState) -> str:
    """Every session's kind until the store is given its key rules."""
    return "other"


def _guard_connections(datastore: Any) -> None:
    """Pass every connection the datastore hands out through the loop guard: its
    transactions and eventsourcing's own statements all take one here."""
    get_connection = datastore.get_connection

    def guarded(*args: Any, **kwargs: Any) -> Any:
        check_off_loop("a database connection taken")
        return get_connection(*args, **kwargs)

    datastore.get_connection = guarded


def _settle_future(written: Future[None]) -> Settle:
    def settle(outcome: BaseException | None) -> None:
        if outcome is None:
            written.set_result(None)
        else:
            written.set_exception(outcome)

    return settle


def record_contents(
    notification_ids: Sequence[int], stored_events: Sequence[StoredEvent]
) -> list[tuple[int, RecordContent]]:
    """What the hash chain hashes of each event just inserted, at its log position."""
    return [
        (
            notification_id,
            RecordContent(
                originator_id=stored.originator_id
                if isinstance(stored.originator_id, UUID)
                else UUID(str(stored.originator_id)),
                originator_version=stored.originator_version,
                topic=stored.topic,
                state=stored.state,
            ),
        )
        for notification_id, stored in zip(notification_ids, stored_events, strict=True)
    ]


class RecordsReadModels:
    """What our recorder subclasses add to eventsourcing's: the tables they also write."""

    read_model: SqlReadModel
    chain: SqlChain
    datastore: Any
    transcript_search: SqlTranscriptSearch

    def seal_log(self, *, wait: bool = True) -> int:
        """Seal the records that are final and not sealed yet; how many. A store whose one
        writer seals as it writes (SQLite) has none."""
        return 0

    def stop_sealing(self) -> None:
        """Stop any sealing behind the writers (the store is closing)."""

    sealed_hook: Callable[[], None] | None = None
    """Called after a seal pass that gave positions (from the sealer's thread)."""


class SessionwireApplication(Application):  # type: ignore[type-arg]
    name = "sessionwire"
    env: ClassVar[dict[str, str]] = {
        "MAPPER_TOPIC": get_topic(PydanticMapper),
        "TRANSCODER_TOPIC": get_topic(JSONBytesTranscoder),
    }


def _save_options(
    changes: ReadModelChanges,
    fence: Fence | None,
    save_id: UUID | None,
    shard_keys: dict[UUID, str] | None = None,
) -> dict[str, Any]:
    """The recorder's keywords for one save (a fence or shard keys only where there are
    some: the recorders of stores without them never see the keyword)."""
    options: dict[str, Any] = {READ_MODEL_KEY: changes, SAVE_ID_KEY: save_id}
    if fence is not None:
        options[FENCE_KEY] = fence
    if shard_keys is not None:
        options[SHARD_KEYS_KEY] = shard_keys
    return options


class WriterClosed(SessionwireError, RuntimeError):
    """A save submitted after the store was closed."""


Settle = Callable[[BaseException | None], None]
"""Told a save's outcome on its writer's thread, once: None when committed, else the error."""


@dataclass(frozen=True)
class Fence:
    """The session lease a save was made under: the save commits only while that lease
    still has this owner and token (a lease claimed since has a larger one)."""

    session_key: str
    owner: str
    token: int


@dataclass(frozen=True)
class PendingSave:
    """One save's rows, prepared on the caller's thread, written on a writer's."""

    stored: Sequence[StoredEvent]
    changes: ReadModelChanges | None
    settle: Settle
    save_id: UUID | None = None
    """Made with the save; a backend that may run a save again after a dropped
    connection records it with the events, to know its own commit (PostgreSQL)."""
    fence: Fence | None = None
    """Taken on the caller's side (the lease is the caller's context, not the writer's)."""
    shard_keys: dict[UUID, str] | None = None
    """A sharded store's: each saved stream's shard key (``SHARD_KEYS_KEY``)."""


class SavesWriter(Protocol):
    """Writes prepared saves on its own thread(s); each one's ``settle`` is called from
    there once it is committed (None) or failed (the error). ``settle`` must not raise."""

    blocking_saves_in_place: bool
    """A blocking ``save`` may write through the recorder on its caller's thread (True),
    or must be submitted and waited for (False: the writer's connection is the one that
    writes, SQLite)."""

    def submit(self, save: PendingSave) -> None: ...

    def paused(self) -> AbstractContextManager[None]: ...

    def close(self) -> None: ...


class StoreBackend(SessionLocks, ABC):
    """What differs between databases: settings, opening, locks, planner statistics."""

    env: dict[str, str]
    """The eventsourcing application's settings for this store."""
    location: str
    """Where the store is, printable (no password)."""
    seals_as_it_writes: bool = False
    """A save's records are in the sealed log when it returns (one writer, ADR 0016)."""
    records_save_ids: bool = True
    """Its writes record each save's id, to know a save's own commit when one runs again
    after a dropped connection (PostgreSQL, ADR 0021); False: no save runs twice (SQLite's
    one writer thread), and saves are given no id."""
    shards_by_session: bool = False
    """Its tables are distributed by session key (Citus, ADR 0051): each save carries
    its streams' shard keys (``SHARD_KEYS_KEY``)."""
    writes_v3_records: bool = False
    """Short topics and messages stored message first (ADR 0036); False keeps the v2
    encoding (both engines write v3 now; the flag stays for a backend that may not)."""

    def exists(self) -> bool:
        """Is there a store here to read? A read-only command opens none where there is
        none (it would make one: a file, a schema). Blocking (it may ask the server)."""
        return True

    def open_application(self) -> SessionwireApplication:
        return SessionwireApplication(env=self.env)

    def analyze(self, store: EventSourcedStore) -> None:
        """Refresh the planner's statistics on the read models, if it plans by them."""

    def follow_explicit_ids(self, cursor: Cursor, chain: SqlChain) -> None:
        """After events were written at explicit positions: let new ones follow them."""

    def hold_writer(self) -> None:
        """Become the store's one writer if the database admits only one (decision 20);
        raise StoreInUse naming the live writer otherwise."""

    def release_writer(self) -> None:
        """Stop being the one writer (``hold_writer``'s undo; nothing if not held)."""

    def admits_many_writers(self) -> bool:
        """Any opener may write (no one-writer lock to take, decision 20)."""
        return True

    def recovered_from(self, error: BaseException) -> bool:
        """After a read failed with ``error``: whether the backend mended what broke (a
        server's restart left dead connections in a pool), so the read may run again.
        Blocking (it may talk to the server): called off the event loop."""
        return False

    def others_may_write(self) -> bool:
        """Can another process append to this store now (``EventLog.others_may_write``)?"""
        return True

    def open_writer(self, store: EventSourcedStore) -> SavesWriter | None:
        """A writer that takes saves off the caller's thread (SQLite's commits them in
        groups, ADR 0020), if this backend has one; None: saves go through the recorder
        on the caller's thread, an event loop's included."""
        return None

    def current_fence(self) -> Fence | None:
        """The lease the current context holds on this store, which its saves carry;
        None where saves are not fenced."""
        return None

    def close(self) -> None:
        """Give back what the backend holds beside the application (leases, threads)."""


def backend_for(url: str) -> StoreBackend:
    """The backend a store URL names (``backends.BACKENDS``); only its module is imported
    (no PostgreSQL driver for a SQLite store), and by topic: the backends import this
    module, so it never imports them (ADR 0037)."""
    entry = backend_entry(url)
    if entry is None:
        raise StoreURLError(
            f"unknown store {url!r}: use 'memory', 'sqlite:///path/to/file.db' "
            "or 'postgresql://user@host:port/db'"
        )
    if unknown := entry.unknown_options(url):
        known = ", ".join(entry.options) if entry.options else "none"
        raise StoreURLError(
            f"unknown store URL option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; the options this store takes: {known}"
        )
    if repeated := entry.repeated_options(url):
        raise StoreURLError(
            "store URL option"
            f"{'s' if len(repeated) > 1 else ''} given more than once: "
            + "; ".join(
                f"{name!r} ({', '.join(map(repr, values))})" for name, values in repeated.items()
            )
            + "; give each once"
        )
    open_backend: Callable[[str], StoreBackend] = resolve_topic(entry.topic)
    return open_backend(url)


class ReadModelQuery(GeneratedMethod[P, T]):
    """A port's query on the store: the read model's method (its SQL) run on the cursor
    of one read transaction, with the caller's arguments. The store's method is this,
    not a forward written out per query (ADR 0044)."""

    def __init__(self, query: Callable[Concatenate[SqlReadModel, Cursor, P], T]) -> None:
        super().__init__(None)  # served under the port's name (``transcript``: ``_tail``)
        self.query = query

    def bind(self, instance: Any) -> Callable[P, T]:
        bound = partial(_in_read_transaction, instance, self.query)
        # Named as the port's query it answers (a trace, a log line, a read count).
        bound.__name__ = self.attribute  # type: ignore[attr-defined]
        return bound


def _in_read_transaction(
    store: EventSourcedStore,
    query: Callable[Concatenate[SqlReadModel, Cursor, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    with store.reading() as cursor:
        return query(store.read_model, cursor, *args, **kwargs)


def read_model_query(
    query: Callable[Concatenate[SqlReadModel, Cursor, P], T],
) -> ReadModelQuery[P, T]:
    """The store's method that answers ``query`` (a ``SqlReadModel`` method) in one read
    transaction."""
    return ReadModelQuery(query)


class _AwaitedSave:
    """One save awaited on an event loop, from its submission to its settlement there.

    It is the save's ``settle`` (called on the writer's thread) and what the loop runs
    then: one object per save instead of three closures and a record of them (the
    hand-off was 12% of an append's CPU, ADR 0055). The writer's thread wakes the loop
    once, through ``LoopHandoff`` (one ``call_soon_threadsafe`` per batch), and nothing
    else crosses threads.
    """

    __slots__ = (
        "aggregates",
        "changes",
        "done",
        "events",
        "handoff",
        "outcome",
        "started",
        "store",
    )

    def __init__(
        self,
        store: EventSourcedStore,
        loop: asyncio.AbstractEventLoop,
        aggregates: Sequence[Aggregate],
        changes: ReadModelChanges,
        events: int,
        started: float,
    ) -> None:
        self.store = store
        self.handoff = store._handoff_to(loop)
        self.aggregates = aggregates
        self.changes = changes
        self.events = events
        self.started = started
        self.done: asyncio.Future[None] = loop.create_future()
        self.outcome: BaseException | None = None

    def __call__(self, outcome: BaseException | None) -> None:
        # The writer thread's hand-off: settled on the loop, one save per loop turn.
        self.outcome = outcome
        self.handoff.put(self)

    def settled(self, outcome: BaseException | None) -> None:
        # On the loop, once the writer thread is done with the save: the cache follows
        # the commit here, whether or not the caller still waits (a cancelled caller
        # cancelled ``done``, not the save).
        store = self.store
        store._settling -= 1
        try:
            if outcome is None:
                store.telemetry.appended(time.perf_counter() - self.started, self.events)
                store._saved(self.aggregates, self.changes)
            else:
                store._failed(self.changes)
        except Exception as error:  # what the caller would have heard, it hears
            outcome = error
        finally:
            if not store._settling:
                store._wake_settled()
        done = self.done
        if not done.done():
            if outcome is None:
                done.set_result(None)
            else:
                done.set_exception(outcome)
        elif outcome is not None and not isinstance(outcome, StoreConflict):
            # Nobody waits (the caller was cancelled): the loop reports it instead.
            done.get_loop().call_exception_handler(
                {
                    "message": "a save failed after its caller was cancelled",
                    "exception": outcome,
                }
            )

    def abandoned(self) -> None:
        # The loop closed meanwhile: nobody waits, nothing runs on it any more; the save
        # is no longer in flight (the cache, unchanged, is only stale: the next save over
        # it conflicts and reads the row again). Called from a writer's thread;
        # PostgreSQL's has several, so the count is guarded.
        with self.store._guard:
            self.store._settling -= 1


class EventSourcedStore(Store):
    def __init__(
        self, url: str, *, kind_of: KindOf, writer: bool = False, existing: bool = False
    ) -> None:
        """``writer``: this store carries on the work it holds (a resuming gateway); an
        SQLite file then admits no other writer (decision 20). ``existing``: open only a
        store that is there (NoStore otherwise), creating nothing."""
        self.backend = backend_for(url)
        self.location = self.backend.location
        if existing and not self.backend.exists():
            raise NoStore(f"no store at {self.location} (a command that only reads creates none)")
        if writer:
            self.backend.hold_writer()
        try:
            self.app = self.backend.open_application()
        except BaseException:
            self.backend.release_writer()
            raise
        # Storage v3's records where the backend's tables are v3 (ADR 0036).
        self.app.mapper.short_topics = self.backend.writes_v3_records  # type: ignore[attr-defined]
        recorder = self.app.recorder
        assert isinstance(recorder, RecordsReadModels)
        self.recorder = recorder
        self.read_model = recorder.read_model
        self.chain = recorder.chain
        self.datastore: Any = recorder.datastore
        _guard_connections(self.datastore)
        self.read_model.kind_of = kind_of
        # Sessions as this process last wrote them: saves one read per append.
        self._written: OrderedDict[str, StoredSession] = OrderedDict()
        self._new_rows = 0
        self._analyzing: list[threading.Thread] = []
        self._analyze_at = ANALYZE_FIRST_AT
        self.writer: SavesWriter | None = None
        # Saves handed to the writer and not yet settled (ADR 0012: the gateway knows its
        # in-flight work exactly): those awaited on the event loop count until their
        # settlement ran there (loop thread only); blocking ones, by their futures.
        self._settling = 0
        self._settled_waiters: list[asyncio.Future[None]] = []
        self._handoff: LoopHandoff | None = None
        self._guard = threading.Lock()
        self._blocking: set[Future[None]] = set()
        if writer or self.backend.admits_many_writers():
            self._backfill_runs()
        # Told when the sealed log may have grown here (the live event stream, ADR 0023).
        self._log_listeners: list[Callable[[], None]] = []
        recorder.sealed_hook = self._log_grew
        self.analyze()
        self.writer = self.backend.open_writer(self)

    def _backfill_runs(self) -> None:
        """A store recorded before the runs read model fills it once, when opened by a
        writer (a reader beside an SQLite file's writer leaves it to that writer)."""
        with self.reading() as cursor:
            if not self.read_model.runs_missing(cursor):
                return
        with self.writing() as cursor:
            self.read_model.backfill_runs(cursor)

    def reading(self) -> Any:
        """A transaction that reads (its cursor); nothing is committed."""
        return self.datastore.transaction(commit=False)

    @contextmanager
    def writing(self) -> Iterator[Any]:
        """A transaction that writes (its cursor), committed at the end of ``with``.

        With a writer thread, that thread is paused meanwhile: its commits would otherwise
        race this connection's (SQLite refuses to upgrade a read snapshot that another
        connection's commit made stale: "database is locked")."""
        self.hold_writer()
        paused = self.writer.paused() if self.writer is not None else nullcontext()
        with paused, self.datastore.transaction(commit=True) as cursor:
            yield cursor

    def hold_writer(self) -> None:
        """Every write holds the store's one writer's lock (decision 20): a store opened
        to read takes it at its first write, and keeps it until closed; while another
        gateway holds it, the write is refused with StoreInUse naming the holder."""
        self.backend.hold_writer()

    def save(self, *aggregates: Aggregate) -> None:
        started = time.perf_counter()
        prepared = self._prepare(aggregates)
        if prepared is None:
            return
        stored, changes, save_id = prepared
        fence = self.backend.current_fence()
        if self.writer is None or self.writer.blocking_saves_in_place:
            try:
                # Straight to the recorder: Application.save() adds per-event bookkeeping
                # (recordings, protocol checks) that nothing here uses, on the hot path.
                self.recorder.insert_events(
                    stored, **_save_options(changes, fence, save_id, self._shard_keys(aggregates))
                )
            except IntegrityError as error:
                self._failed(changes)
                raise StoreConflict(str(error)) from error
        else:
            written: Future[None] = Future()
            with self._guard:
                self._blocking.add(written)
            try:
                self.writer.submit(
                    PendingSave(
                        stored,
                        changes,
                        _settle_future(written),
                        save_id,
                        fence,
                        self._shard_keys(aggregates),
                    )
                )
                written.result()
            except StoreConflict:
                self._failed(changes)
                raise
            finally:
                with self._guard:
                    self._blocking.discard(written)
        self.telemetry.appended(time.perf_counter() - started, len(stored))
        self._saved(aggregates, changes)

    async def save_async(self, *aggregates: Aggregate) -> None:
        if self.writer is None:
            self.save(*aggregates)
            return
        started = time.perf_counter()
        prepared = self._prepare(aggregates)
        if prepared is None:
            return
        stored, changes, save_id = prepared
        loop = asyncio.get_running_loop()
        awaited = _AwaitedSave(self, loop, aggregates, changes, len(stored), started)
        self.writer.submit(
            PendingSave(
                stored,
                changes,
                awaited,
                save_id,
                self.backend.current_fence(),
                self._shard_keys(aggregates),
            )
        )
        self._settling += 1
        await awaited.done

    def _handoff_to(self, loop: asyncio.AbstractEventLoop) -> LoopHandoff:
        if self._handoff is None or self._handoff.loop is not loop:
            self._handoff = LoopHandoff(loop)
        return self._handoff

    def writes_in_flight(self) -> int:
        with self._guard:
            blocking = len(self._blocking)
        return self._settling + blocking

    async def writes_settled(self) -> None:
        while True:
            with self._guard:
                blocking = [asyncio.wrap_future(written) for written in self._blocking]
            if blocking:
                await asyncio.wait(blocking)
            elif self._settling:
                waiter = asyncio.get_running_loop().create_future()
                self._settled_waiters.append(waiter)
                await waiter
            else:
                return

    def _wake_settled(self) -> None:
        waiters, self._settled_waiters = self._settled_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _prepare(
        self, aggregates: Sequence[Aggregate]
    ) -> tuple[list[StoredEvent], ReadModelChanges, UUID | None] | None:
        """The save's rows and its id (the same for every attempt at writing it), where
        the backend records save ids."""
        events: list[DomainEvent] = []
        for aggregate in aggregates:
            events.extend(cast(Sequence[DomainEvent], aggregate.collect_events()))
        if not events:
            return None
        self.hold_writer()
        from sessionwire.application.projection import project
        from sessionwire.domain.session import Session

        changes = project(list(aggregates), events)
        to_stored = self.app.mapper.to_stored_event
        stored: list[StoredEvent] = []
        for event in events:
            if BATCHES_AS_ROWS and isinstance(event, Session.MessagesAppended):
                # Storage v3 (ADR 0036): one row per message. The batch is one domain
                # event, saved all or nothing; it is stored as the single appends it
                # stands for (ADR 0025), so each message has its own row, hash and line.
                stored.extend(to_stored(single) for single in event.as_single_appends())
            else:
                stored.append(to_stored(event))
        # A random id costs a system call (urandom): made only where it is written.
        return stored, changes, uuid4() if self.backend.records_save_ids else None

    def _shard_keys(self, aggregates: Sequence[Aggregate]) -> dict[UUID, str] | None:
        """Each saved stream's shard key, on a store sharded by session (else None)."""
        if not self.backend.shards_by_session:
            return None
        from sessionwire.adapters.store.shard_keys import shard_keys_of

        return shard_keys_of(aggregates)

    def _failed(self, changes: ReadModelChanges) -> None:
        for row in changes.rows.values():
            self._written.pop(row.state.key, None)

    def on_log_grew(self, listener: Callable[[], None]) -> Callable[[], None]:
        self._log_listeners.append(listener)

        def remove() -> None:
            with suppress(ValueError):
                self._log_listeners.remove(listener)

        return remove

    others_may_write = delegated(StoreBackend.others_may_write, to="backend")

    def _log_grew(self) -> None:
        for listener in list(self._log_listeners):
            listener()

    def _saved(self, aggregates: Sequence[Aggregate], changes: ReadModelChanges) -> None:
        if self.backend.seals_as_it_writes:
            # Committed and sealed in one transaction: followers may read it now. (A
            # store that seals behind its writers tells them from its sealer.)
            self._log_grew()
        from sessionwire.domain.session import Session

        for aggregate in aggregates:
            if isinstance(aggregate, Session):
                self._remember(aggregate)
        new_rows = 0
        for row in changes.rows.values():
            new_rows += row.is_new
        for run in changes.runs.values():
            new_rows += run.is_new
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
            if asyncio._get_running_loop() is None:
                self.analyze()
            else:
                # Counted where an awaited save settles: on the event loop, which must
                # not wait for the server (decision 23). A statistics refresh may land
                # a little later, on a thread of its own; close waits for it.
                analyzing = threading.Thread(
                    target=self._analyze_quietly, name="sessionwire-analyze", daemon=True
                )
                self._analyzing.append(analyzing)
                analyzing.start()

    def _analyze_quietly(self) -> None:
        try:
            self.analyze()
        except Exception as error:  # statistics only: the next doubling tries again
            log.warning("read-model statistics not refreshed", error=str(error))

    def analyze(self) -> None:
        """Refresh the database's statistics on the read-model tables, where it plans by them."""
        self.backend.analyze(self)

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

    def cached_session(self, key: str) -> StoredSession | None:
        """The session as this process last wrote it, if it is in the write cache."""
        return self._written.get(key)

    # The read models' queries: each the SqlReadModel method (its SQL) in one read
    # transaction; their signatures and meaning are on the ports (ADR 0044).
    session = read_model_query(SqlReadModel.session)
    sessions_by_session_id = read_model_query(SqlReadModel.sessions_by_session_id)
    sessions_by_label = read_model_query(SqlReadModel.sessions_by_label)
    list_sessions = read_model_query(SqlReadModel.list_sessions)
    session_page = read_model_query(SqlReadModel.session_page)
    list_listings = read_model_query(SqlReadModel.list_listings)
    listing_page = read_model_query(SqlReadModel.listing_page)
    listings_by_label = read_model_query(SqlReadModel.listings_by_label)
    agent_ids = read_model_query(SqlReadModel.agent_ids)
    transcript = read_model_query(SqlReadModel.transcript_tail)
    transcript_page = read_model_query(SqlReadModel.transcript_page)
    session_transcript = read_model_query(SqlReadModel.session_transcript)
    session_streams = read_model_query(SqlReadModel.session_streams)
    run = read_model_query(SqlReadModel.run)
    list_runs = read_model_query(SqlReadModel.list_runs)
    work = read_model_query(SqlReadModel.work)
    pending_work = read_model_query(SqlReadModel.pending_work)
    recent_work = read_model_query(SqlReadModel.recent_work)
    read_model_snapshot = read_model_query(SqlReadModel.snapshot)

    # The session locks are the backend's (none for a store one process writes).
    session_lock = delegated(SessionLocks.session_lock, to="backend")
    take_over_dead_gateways = delegated(SessionLocks.take_over_dead_gateways, to="backend")
    recovered_from = delegated(StoreBackend.recovered_from, to="backend")

    @property
    def lease_seconds(self) -> float | None:  # type: ignore[override]
        return self.backend.lease_seconds

    @property
    def takeover_check_seconds(self) -> float | None:  # type: ignore[override]
        return self.backend.takeover_check_seconds

    # Full-text search (ADR 0050): the recorder's index, not a read-model query.
    def search_transcripts(self, query: TranscriptSearchQuery) -> list[TranscriptMatch]:
        with self.reading() as cursor:
            return self.recorder.transcript_search.search(cursor, query)

    def messages_before(self, match: TranscriptMatch) -> int:
        with self.reading() as cursor:
            return self.recorder.transcript_search.messages_before(cursor, match)

    def log_position(self) -> int:
        return self.recorder.max_notification_id() or 0

    def seal(self) -> int:
        """Seal every final record now (the audit commands do, before reading the head)."""
        return self.recorder.seal_log(wait=True)

    def sealed_position(self) -> int:
        with self.reading() as cursor:
            return self.chain.head(cursor).seq

    def records_after(self, position: int, limit: int) -> list[tuple[int, DomainEvent]]:
        with self.reading() as cursor:
            found = self.chain.records_after(cursor, position, limit)
        return [(seq, self._decode(record)) for seq, record in found]

    def _decode(self, record: StoredRecord) -> DomainEvent:
        content = record.content
        stored = StoredEvent(
            originator_id=content.originator_id,
            originator_version=content.originator_version,
            topic=content.topic,
            state=content.state,
        )
        return cast(DomainEvent, self.app.mapper.to_domain_event(stored))

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

    def stream_hash(self, aggregate_id: UUID, version: int) -> bytes | None:
        # The chain's own lookup of a stream's link (its primary key): one indexed read.
        with self.reading() as cursor:
            cursor.execute(self.chain.select_stream, (self.chain.t.to_db_id(aggregate_id), version))
            found = cursor.fetchone()
        return None if found is None else bytes(found["stream_hash"])

    def streams_events(self, ids: Sequence[UUID]) -> list[tuple[int, DomainEvent]]:
        with self.reading() as cursor:
            records = self.chain.stream_records(cursor, ids)
        return [(record.notification_id, self._decode(record)) for record in records]

    def rebuild_read_models(self) -> None:
        with self.writing() as cursor:
            for statement in self.read_model.drop_statements():
                cursor.execute(statement)
        from sessionwire.application.projection import Replay

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
        with self.writing() as cursor:
            self.read_model.write(cursor, changes)

    def close(self) -> None:
        try:
            for analyzing in self._analyzing:
                analyzing.join()
            if self.writer is not None:
                self.writer.close()
            self.recorder.stop_sealing()
            self.backend.close()
            self.app.close()
        finally:
            self.backend.release_writer()
