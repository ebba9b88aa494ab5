"""The event store awaited from an event loop: its database work on threads of its own.

Decision 23 (ADR 0027): the loop only ever waits for the store. Reads run on reader
threads (SQLite: WAL readers beside the writer; PostgreSQL: pooled connections); saves
go to the store's writer (SQLite's group-commit thread, PostgreSQL's save threads). A
memory store is one shared-cache SQLite database private to the process: its reads and
writes all run on one thread, in the order asked, since a second connection writing
would take table locks against the first.

A bounded number of threads is the back-pressure: when every reader is busy, a read
waits in the queue (the loop turns on), never for a pooled connection on the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from sessionwire.adapters.store.damage import store_damage
from sessionwire.adapters.store.delegated import delegated
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.in_order import calls_in_order, store_executor
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.event_log import EventLog
from sessionwire.application.ports.session_locks import SessionLocks
from sessionwire.application.ports.session_read_model import StoredSession
from sessionwire.application.ports.store import Store, StoreDamaged
from sessionwire.application.ports.telemetry import Telemetry
from sessionwire.domain.base import Aggregate
from sessionwire.domain.errors import SessionwireError

T = TypeVar("T")

READER_THREADS = 4
"""Reads in progress at once, per store. PostgreSQL's pool (15 connections) keeps room
for these, its save threads (4), the sealer and lease statements."""


class StoreClosed(SessionwireError, RuntimeError):
    """A read asked for after the store was closed."""


class OffLoopStore(AsyncStore):
    def __init__(self, store: EventSourcedStore) -> None:
        self._store = store
        self.location = store.location
        # A memory store: one thread for everything (see the module's docstring); so for
        # a simulation's store, whose calls complete in the order asked (in_order.py).
        self._one_thread = store.writer is None or calls_in_order()
        threads = 1 if self._one_thread else READER_THREADS
        self._readers = store_executor(threads, "sessionwire-store")
        self._closed = False

    @property
    def telemetry(self) -> Telemetry:
        return self._store.telemetry

    @telemetry.setter
    def telemetry(self, value: Telemetry) -> None:
        self._store.telemetry = value

    @property
    def blocking(self) -> Store:
        return self._store

    @property
    def event_store(self) -> EventSourcedStore:
        """The store underneath with its backend-specific parts (adapters and tests)."""
        return self._store

    async def _off_loop(self, call: Callable[[], T], *, a_read: bool = True) -> T:
        if self._closed:
            raise StoreClosed("the store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._readers, call)
        except Exception as error:
            damage = store_damage(error)
            if damage is not None:
                raise StoreDamaged(str(damage)) from error
            # A read that met a connection the server dropped (a PostgreSQL restart)
            # runs once more when the backend mended its pool; reads change nothing.
            mended = partial(self._store.recovered_from, error)
            if self._closed or not a_read or not await loop.run_in_executor(self._readers, mended):
                raise
            return await loop.run_in_executor(self._readers, call)

    # Writing ----------------------------------------------------------------------------

    async def save(self, *aggregates: Aggregate) -> None:
        if self._one_thread:
            # In the caller's context: a run's save carries the fence of the lease the
            # run holds (a context variable), and run_in_executor copies no context; without
            # it a save by a gateway taken over since was not fenced (decision 24).
            save = partial(contextvars.copy_context().run, self._store.save, *aggregates)
            await self._off_loop(save, a_read=False)
            return
        try:
            await self._store.save_async(*aggregates)
        except Exception as error:
            damage = store_damage(error)
            if damage is not None:
                raise StoreDamaged(str(damage)) from error
            raise

    writes_in_flight = delegated(EventLog.writes_in_flight, to="_store")
    writes_settled = delegated(EventLog.writes_settled, to="_store")

    # Reading ----------------------------------------------------------------------------

    async def read(self, query: Callable[..., T], /, *args: Any) -> T:
        return await self._off_loop(partial(query, self._store, *args))

    async def answer(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        return await self._off_loop(partial(getattr(self._store, name), *args, **kwargs))

    async def session_for_update(self, key: str) -> StoredSession | None:
        # This process's own last write, when it has one, without leaving the loop.
        cached = self._store.cached_session(key)
        if cached is not None:
            return cached
        return await self.session(key)

    # Not I/O ----------------------------------------------------------------------------

    # Answered as the blocking store answers them (its own threads, or no I/O at all).
    on_log_grew = delegated(EventLog.on_log_grew, to="_store")
    others_may_write = delegated(EventLog.others_may_write, to="_store")
    session_lock = delegated(SessionLocks.session_lock, to="_store")
    take_over_dead_gateways = delegated(SessionLocks.take_over_dead_gateways, to="_store")

    @property
    def lease_seconds(self) -> float | None:
        return self._store.lease_seconds

    @property
    def takeover_check_seconds(self) -> float | None:
        return self._store.takeover_check_seconds

    async def close(self) -> None:
        # Closing twice is closing once (a test's, a server's and a finally's close).
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._close_after_reads)

    def close_now(self) -> None:
        """Close from outside any event loop (a loop that is gone, a script's exit)."""
        if self._closed:
            return
        self._closed = True
        self._close_after_reads()

    def _close_after_reads(self) -> None:
        # The reads already asked for end first (a cancelled caller's read runs on too):
        # closing the store closes its pooled connections, those a reader thread is using
        # included, and SQLite's driver crashes the process (SIGSEGV) on a statement
        # whose connection another thread closed. Never on a reader thread: it would wait
        # for itself.
        self._readers.shutdown(wait=True)
        self._store.close()


async def open_off_loop(open_store: Callable[[], EventSourcedStore]) -> OffLoopStore:
    """Open a store off the loop (opening creates tables, takes locks, analyzes), then wrap
    it. The opening thread runs in the caller's context: a store opened for calls in
    order (in_order.py) is so all through."""
    return OffLoopStore(await asyncio.to_thread(open_store))
