"""Runs claimed by lease on PostgreSQL (contract decision 24, ADR 0028).

A gateway owns a session's run through a row of ``sw_session_leases``: its owner (the
store's gateway id), a fencing token that grows with every claim of the session, and an
expiry. Claims, renewals and releases are each one short statement on a connection taken
for that statement only: no connection is held for the length of a run. Every time is
the database's (``clock_timestamp()``), never a gateway's, so a gateway whose clock is far
off still claims, fences and expires correctly.

Each store has one ``LeaseKeeper``: a thread with one connection of its own that

- holds, for as long as that connection lives, a session-level advisory lock whose key
  its heartbeat row names: the server lets go of it the instant the process dies, so
  another gateway's try-lock on that key tells a dead gateway from a live one without
  waiting for its lease (ADR 0049);
- renews, every ``lease/3`` seconds, the store's heartbeat row in ``sw_gateways`` and
  every lease the store holds (a lease found claimed by someone else is marked lost);
- LISTENs for releases (a release NOTIFYs its session key) and wakes the claimers
  waiting for that session, and wakes each waiter once more when the lease it waits for
  expires (its holder may be dead): no polling;
- and a small executor of its own for the claims and releases, so that neither a pool
  connection nor a round trip is ever waited for on the event loop's thread.

Saves made while a lease is held carry its fence (``Fence``, taken from this module's
context variable on the caller's side); the recorder checks it in the save's transaction
(``sw_hold_lease``, which also locks the lease row against a claim until the commit) and
refuses the whole save with ``LeaseLost`` when the lease has moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import itertools
import secrets
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

import psycopg
from eventsourcing.persistence import PersistenceError
from psycopg.sql import SQL, Identifier
from sessionwire.adapters.store.event_store import Fence
from sessionwire.adapters.store.in_order import store_executor
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.run_scope import run_scoped
from sessionwire.application.ports.session_locks import LeaseLost

DEFAULT_LEASE_SECONDS = 30.0
MIN_LEASE_SECONDS = 0.1
MAX_LEASE_SECONDS = 3600.0
LEASE_THREADS = 2
"""Claims and releases in progress at once per store (each one statement on a pooled
connection, for that statement only)."""
LEASE_LOST_STATE = "SWL01"
"""The SQLSTATE ``sw_hold_lease`` raises when a save's fence has moved on."""
RECONNECT_SECONDS = 1.0
TAKEOVER_CHECK_SECONDS = 1.0
"""How often a live gateway tries the liveness locks of the others (ADR 0049): a killed
gateway is found dead within this long, not a lease."""

# The server instance a liveness lock lives on: advisory locks are that instance's alone
# (a Citus node's, a restarted server's before the restart), and a gateway on another
# one cannot see them. A restart, or another node, changes it (ADR 0049).
_SERVER_INSTANCE = "extract(epoch FROM pg_postmaster_start_time())::text"

log = library_logger("sessionwire.store")


def _elapsed_clock() -> Callable[[], float]:
    # The keeper's own timing (renewals, waiters' expiries) is real time even under
    # freezegun's frozen time, which patches time.monotonic but not clock_gettime.
    if hasattr(time, "clock_gettime") and hasattr(time, "CLOCK_MONOTONIC"):
        clock_id = time.CLOCK_MONOTONIC
        return lambda: time.clock_gettime(clock_id)
    return time.monotonic  # pragma: no cover - not POSIX


_elapsed = _elapsed_clock()


# Tables ---------------------------------------------------------------------------------


def lease_create_statements(schema: str) -> dict[str, str]:
    """What each lease object is created by, by the name ``to_regclass`` or
    ``to_regprocedure`` finds it under once it exists."""
    s = f'"{schema}"'
    return {
        f"{s}.sw_gateways": (
            f"CREATE TABLE IF NOT EXISTS {s}.sw_gateways ("
            "gateway_id text PRIMARY KEY, expires_at timestamptz NOT NULL, "
            "liveness_key bigint, liveness_server text)"
        ),
        f"{s}.sw_session_leases": (
            f"CREATE TABLE IF NOT EXISTS {s}.sw_session_leases ("
            "session_key text PRIMARY KEY, owner text, fence bigint NOT NULL, "
            "expires_at timestamptz NOT NULL)"
        ),
        # Checked in a save's transaction: the row locked FOR SHARE holds off a claim (its
        # UPDATE) until the save has committed, so the fence cannot move in between.
        f"{s}.sw_hold_lease(text,text,bigint)": (
            f"CREATE OR REPLACE FUNCTION {s}.sw_hold_lease("
            "lease_key text, lease_owner text, lease_fence bigint) "
            "RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
            f"PERFORM 1 FROM {s}.sw_session_leases WHERE session_key = lease_key "
            "AND owner = lease_owner AND fence = lease_fence FOR SHARE; "
            "IF NOT FOUND THEN RAISE EXCEPTION "
            "'the lease of session % moved on from fence % (another gateway claimed it)', "
            f"lease_key, lease_fence USING ERRCODE = '{LEASE_LOST_STATE}'; "
            "END IF; END $$"
        ),
    }


def create_lease_tables(connection: psycopg.Connection[Any], schema: str) -> None:
    """Create what is missing (under the setup lock, as every other table): no DDL at
    all when everything exists, new schema or old."""
    for name, statement in lease_create_statements(schema).items():
        finder = "to_regprocedure" if name.endswith(")") else "to_regclass"
        found = connection.execute(f"SELECT {finder}(%s)", (name,)).fetchone()
        if found is None or found[0] is None:
            connection.execute(statement)
    # A heartbeat table made before the liveness locks (ADR 0049): its rows, and those of
    # gateways still running that version, leave the new columns NULL, so they are found
    # dead by their lease alone.
    liveness = connection.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name = 'sw_gateways' AND column_name = 'liveness_key'",
        (schema,),
    ).fetchone()
    if liveness is None:
        connection.execute(
            f'ALTER TABLE "{schema}".sw_gateways ADD COLUMN IF NOT EXISTS liveness_key bigint, '
            "ADD COLUMN IF NOT EXISTS liveness_server text"
        )


def hold_lease_statement(schema: str) -> str:
    """A save's fence check, first in its transaction."""
    return f'SELECT "{schema}".sw_hold_lease(%s, %s, %s)'


def live_gateways(cursor: Any, schema: str) -> list[str]:
    """The gateways whose heartbeat (ADR 0028) has not expired."""
    cursor.execute(
        f'SELECT gateway_id FROM "{schema}".sw_gateways WHERE expires_at > now() '
        "ORDER BY gateway_id"
    )
    return [
        str(row["gateway_id"] if isinstance(row, dict) else row[0]) for row in cursor.fetchall()
    ]


def lease_lost(error: BaseException) -> LeaseLost | None:
    """``error`` (a save's, as eventsourcing wraps it) as LeaseLost, if that is what it is."""
    cause = error.__cause__ if isinstance(error, PersistenceError) else error
    if isinstance(cause, psycopg.Error) and cause.sqlstate == LEASE_LOST_STATE:
        message = cause.diag.message_primary or "the session's lease moved on"
        return LeaseLost(f"save refused: {message}")
    return None


def _channel(schema: str) -> str:
    # A channel name is an identifier (63 bytes at most): long schema names are hashed.
    channel = f"sw_leases_{schema}"
    if len(channel.encode()) <= 63:
        return channel
    return "sw_leases_" + hashlib.sha256(schema.encode()).hexdigest()[:40]


class _Statements:
    def __init__(self, schema: str) -> None:
        s = f'"{schema}"'
        # The row names the liveness lock its connection holds, and the server it is on.
        self.register = (
            f"INSERT INTO {s}.sw_gateways "
            "(gateway_id, expires_at, liveness_key, liveness_server) "
            "VALUES (%(owner)s, clock_timestamp() + %(lease)s * interval '1 second', "
            f"%(liveness)s, {_SERVER_INSTANCE}) "
            "ON CONFLICT (gateway_id) DO UPDATE SET expires_at = EXCLUDED.expires_at, "
            "liveness_key = EXCLUDED.liveness_key, liveness_server = EXCLUDED.liveness_server"
        )
        # The heartbeat and every lease of the store, in one statement (one transaction):
        # a gateway whose heartbeat row was taken over comes back (it lives), and its
        # leases nobody has claimed since are its own still.
        self.renew = (
            f"WITH heartbeat AS ({self.register}) "
            f"UPDATE {s}.sw_session_leases "
            "SET expires_at = clock_timestamp() + %(lease)s * interval '1 second' "
            "WHERE owner = %(owner)s RETURNING session_key, fence"
        )
        # Free (released) or expired: claimed, with the next fence. The row stays when
        # released, so a session's fence only ever grows.
        self.claim = (
            f"INSERT INTO {s}.sw_session_leases AS lease "
            "(session_key, owner, fence, expires_at) "
            "VALUES (%(key)s, %(owner)s, 1, clock_timestamp() + %(lease)s * interval '1 second') "
            "ON CONFLICT (session_key) DO UPDATE SET owner = EXCLUDED.owner, "
            "fence = lease.fence + 1, expires_at = EXCLUDED.expires_at "
            "WHERE lease.owner IS NULL OR lease.expires_at <= clock_timestamp() "
            "RETURNING fence"
        )
        self.holder = (
            "SELECT owner, extract(epoch FROM expires_at - clock_timestamp())::float8 "
            f"AS expires_in FROM {s}.sw_session_leases WHERE session_key = %(key)s"
        )
        self.release = (
            f"WITH released AS (UPDATE {s}.sw_session_leases "
            "SET owner = NULL, expires_at = clock_timestamp() "
            "WHERE session_key = %(key)s AND owner = %(owner)s AND fence = %(fence)s "
            "RETURNING session_key) "
            "SELECT pg_notify(%(channel)s, session_key) FROM released"
        )
        self.release_all = (
            f"WITH released AS (UPDATE {s}.sw_session_leases "
            "SET owner = NULL, expires_at = clock_timestamp() "
            "WHERE owner = %(owner)s RETURNING session_key), "
            f"gone AS (DELETE FROM {s}.sw_gateways WHERE gateway_id = %(owner)s) "
            "SELECT pg_notify(%(channel)s, session_key) FROM released"
        )
        # Dead: its heartbeat expired (a lease without renewal: a pause, a partition), or
        # its liveness lock is free on this server (its connection is gone: the process
        # died). The try-lock is the transaction's, let go at this statement's commit.
        # Each dead row goes to exactly one deleter (a concurrent DELETE waits on the
        # row, then finds it gone), and the dead one's leases expire with it, each
        # NOTIFYing its waiters: nothing waits for them to run out.
        self.take_over = (
            f"WITH dead AS (DELETE FROM {s}.sw_gateways "
            "WHERE gateway_id <> %(owner)s AND (expires_at < clock_timestamp() "
            f"OR (liveness_server = {_SERVER_INSTANCE} "
            "AND pg_try_advisory_xact_lock(liveness_key))) "
            "RETURNING gateway_id), "
            f"freed AS (UPDATE {s}.sw_session_leases SET expires_at = clock_timestamp() "
            "WHERE owner IN (SELECT gateway_id FROM dead) "
            "AND expires_at > clock_timestamp() "
            "RETURNING pg_notify(%(channel)s, session_key)) "
            "SELECT gateway_id FROM dead"
        )


def _hold_liveness_lock(conn: psycopg.Connection[Any]) -> int:
    """A fresh key, locked at session level on ``conn`` until it closes (the heartbeat's
    next write names it). Fresh for each connection: the key of one that dropped may be
    tried by a taker meanwhile; a key someone holds already (a collision) is skipped."""
    while True:
        key = secrets.randbits(63)  # a bigint, never negative
        locked = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if locked is not None and locked[0]:
            return key


# Held leases and their waiters ----------------------------------------------------------


@dataclass(eq=False)
class HeldLease:
    key: str
    owner: str
    fence: int
    released: bool = False
    """Given back: a save made since (by a task that shares the run's context) is
    unfenced."""
    lost: bool = False
    """A renewal found the session claimed by another gateway since."""


# The leases the current context holds, innermost last (one per store in practice; a
# test may hold two stores' leases at once). The current run's: a task started inside
# it to drive work on its own (a spawn's driver, ``outside_any_run``) holds none, so
# none of its saves, however late written, is fenced by the run's lease.
_held: ContextVar[tuple[HeldLease, ...]] = run_scoped(
    ContextVar("sessionwire_held_leases", default=()), ()
)


@dataclass(eq=False)
class _Waiter:
    key: str
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    forgotten: bool = False


@dataclass(frozen=True)
class _Claim:
    lease: HeldLease | None
    expires_in: float = 0.0
    """Not claimed: seconds until the holder's lease expires, by the database's clock."""


def _wake(waiter: _Waiter) -> None:
    def wake() -> None:
        if not waiter.future.done():
            waiter.future.set_result(None)

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
        waiter.loop.call_soon_threadsafe(wake)


@dataclass
class _KeeperState:
    held: dict[str, HeldLease] = field(default_factory=dict)
    waiters: dict[str, set[_Waiter]] = field(default_factory=dict)
    due: list[tuple[float, int, _Waiter]] = field(default_factory=list)


class LeaseKeeper:
    """One store's gateway heartbeat, leases and waits for leases (the module's doc)."""

    def __init__(
        self,
        *,
        datastore: Any,
        connect: Callable[[], psycopg.Connection[Any]],
        schema: str,
        lease_seconds: float,
    ) -> None:
        self.datastore = datastore
        self.connect = connect
        self.schema = schema
        self.lease_seconds = lease_seconds
        self.renew_every = lease_seconds / 3
        self.owner = uuid.uuid4().hex
        self.liveness_key = 0
        """The advisory lock the keeper's connection holds (``_listening``)."""
        self.channel = _channel(schema)
        self.sql = _Statements(schema)
        self.executor = store_executor(LEASE_THREADS, "sessionwire-lease")
        self._state = _KeeperState()
        self._lock = threading.Lock()
        self._order = itertools.count()
        self._stopping = threading.Event()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._log = log.bind(schema=schema, gateway=self.owner)
        self._conn: psycopg.Connection[Any] | None = self._listening()
        self._conn.execute(self.sql.register, self._params())
        self._thread = threading.Thread(target=self._run, name="sessionwire-leases", daemon=True)
        self._thread.start()

    def _params(self, **more: Any) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "lease": self.lease_seconds,
            "channel": self.channel,
            "liveness": self.liveness_key,
            **more,
        }

    def _listening(self) -> psycopg.Connection[Any]:
        conn = self.connect()
        self.liveness_key = _hold_liveness_lock(conn)
        conn.execute(SQL("LISTEN {}").format(Identifier(self.channel)))
        return conn

    # On the event loop ------------------------------------------------------------------

    def waiter(self, key: str, loop: asyncio.AbstractEventLoop) -> _Waiter:
        """Registered before the claim it follows: a release between that claim and the
        wait still wakes it."""
        waiter = _Waiter(key, loop, loop.create_future())
        with self._lock:
            self._state.waiters.setdefault(key, set()).add(waiter)
        return waiter

    def wake_at(self, waiter: _Waiter, seconds: float) -> None:
        """Wake ``waiter`` after ``seconds`` (when the lease it waits for expires), unless
        a release wakes it first."""
        with self._lock:
            heapq.heappush(self._state.due, (_elapsed() + seconds, next(self._order), waiter))
        self._poke()

    def forget(self, waiter: _Waiter) -> None:
        waiter.forgotten = True
        with self._lock:
            waiters = self._state.waiters.get(waiter.key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._state.waiters[waiter.key]

    def fence_here(self) -> Fence | None:
        for lease in reversed(_held.get()):
            if lease.owner == self.owner and not lease.released:
                return Fence(lease.key, lease.owner, lease.fence)
        return None

    async def take_over(self) -> list[str]:
        return await asyncio.wrap_future(self.executor.submit(self._take_over))

    # On the executor's threads ------------------------------------------------------------

    def claim(self, key: str) -> _Claim:
        holder = None
        with self.datastore.get_connection() as conn:
            claimed = conn.execute(self.sql.claim, self._params(key=key)).fetchone()
            if claimed is None:
                holder = conn.execute(self.sql.holder, {"key": key}).fetchone()
        if claimed is not None:
            lease = HeldLease(key, self.owner, int(claimed["fence"]))
            with self._lock:
                replaced = self._state.held.get(key)
                if replaced is not None:
                    replaced.lost = True  # ours, expired and claimed again
                self._state.held[key] = lease
            return _Claim(lease)
        # Released between the two statements (no row: never, rows stay): try again now.
        expires_in = 0.0 if holder is None else max(0.0, float(holder["expires_in"]))
        return _Claim(None, expires_in)

    def release(self, lease: HeldLease) -> None:
        with self._lock:
            if self._state.held.get(lease.key) is lease:
                del self._state.held[lease.key]  # no longer renewed, whatever follows
        try:
            with self.datastore.get_connection() as conn:
                conn.execute(self.sql.release, self._params(key=lease.key, fence=lease.fence))
        except (psycopg.Error, PersistenceError) as error:
            # Not renewed any more: it expires within a lease, and a claim then takes it.
            self._log.warning("lease not released", session_key=lease.key, error=str(error))

    def _take_over(self) -> list[str]:
        with self.datastore.get_connection() as conn:
            rows = conn.execute(self.sql.take_over, self._params()).fetchall()
        return [str(row["gateway_id"]) for row in rows]

    # On the keeper's thread ---------------------------------------------------------------

    def _run(self) -> None:
        renew_at = _elapsed() + self.renew_every
        while not self._stopping.is_set():
            try:
                if self._conn is None:
                    self._conn = self._listening()
                    self._renew()  # the heartbeat may have lapsed meanwhile
                    renew_at = _elapsed() + self.renew_every
                    self._wake_all()  # a release may have passed unheard
                self._turn(self._conn, renew_at)
                if _elapsed() >= renew_at:
                    self._renew()
                    renew_at = _elapsed() + self.renew_every
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as error:
                # The schema is gone (dropped under a store never closed): nothing is left
                # to keep, and reconnecting would fail the same way forever.
                self._log.warning("lease keeper stopped: its schema is gone", error=str(error))
                self._drop_connection()
                return
            except Exception as error:  # a dropped connection, mostly: the keeper lives on
                if self._stopping.is_set():
                    return
                self._log.warning("lease keeper lost its connection", error=str(error))
                self._drop_connection()
                self._stopping.wait(RECONNECT_SECONDS)

    def _turn(self, conn: psycopg.Connection[Any], renew_at: float) -> None:
        """Wait for a notification, a waiter's expiry, the next renewal or a poke."""
        with self._lock:
            next_due = self._state.due[0][0] if self._state.due else renew_at
        timeout = max(0.0, min(renew_at, next_due) - _elapsed())
        poked = self._wake_reader.fileno()
        readable, _, _ = select.select([conn.fileno(), poked], [], [], timeout)
        if poked in readable:
            with contextlib.suppress(BlockingIOError):
                while self._wake_reader.recv(4096):
                    pass
        for notify in conn.notifies(timeout=0):
            self._released(notify.payload)
        self._fire_due()

    def _released(self, key: str) -> None:
        with self._lock:
            waiters = list(self._state.waiters.get(key, ()))
        for waiter in waiters:
            _wake(waiter)

    def _fire_due(self) -> None:
        now = _elapsed()
        fired = []
        with self._lock:
            due = self._state.due
            while due and (due[0][0] <= now or due[0][2].forgotten):
                fired.append(heapq.heappop(due)[2])
        for waiter in fired:
            if not waiter.forgotten:
                _wake(waiter)

    def _wake_all(self) -> None:
        with self._lock:
            waiters = [w for found in self._state.waiters.values() for w in found]
        for waiter in waiters:
            _wake(waiter)

    def _renew(self) -> None:
        assert self._conn is not None
        rows = self._conn.execute(self.sql.renew, self._params()).fetchall()
        renewed = {(str(key), int(fence)) for key, fence in rows}
        with self._lock:
            held = list(self._state.held.values())
        for lease in held:
            if (lease.key, lease.fence) not in renewed and not lease.released:
                if not lease.lost:
                    self._log.warning(
                        "session lease lost to another gateway",
                        session_key=lease.key,
                        fence=lease.fence,
                    )
                lease.lost = True

    def _poke(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    # Closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop renewing, give back every lease held (waking their waiters anywhere) and
        leave the heartbeat table: a closed gateway is not taken for dead."""
        self._stopping.set()
        self._poke()
        self._thread.join()
        self.executor.shutdown(wait=True)
        try:
            conn = self._conn if self._conn is not None else self.connect()
            conn.execute(self.sql.release_all, self._params())
        except psycopg.Error as error:
            # Its leases and heartbeat then expire on their own, and are taken over.
            self._log.warning("leases not given back at close", error=str(error))
        finally:
            self._drop_connection()
            self._wake_reader.close()
            self._wake_writer.close()
        self._wake_all()


# The lock itself --------------------------------------------------------------------------


class PostgresSessionLease(AbstractAsyncContextManager[None]):
    """A session's lease, held while a run executes in it, across every gateway process.

    Claimed off the event loop; while another live gateway holds it, the claimer waits
    for its release (NOTIFY) or its expiry, holding no connection. Its holder's saves
    carry its fence until it is given back.
    """

    def __init__(self, keeper: LeaseKeeper, key: str) -> None:
        self.keeper = keeper
        self.key = key
        self.lease: HeldLease | None = None
        self._token: Token[tuple[HeldLease, ...]] | None = None

    async def __aenter__(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            waiter = self.keeper.waiter(self.key, loop)
            try:
                claim = await self._claim()
                if claim.lease is not None:
                    self.lease = claim.lease
                    self._token = _held.set((*_held.get(), claim.lease))
                    return
                self.keeper.wake_at(waiter, claim.expires_in)
                await waiter.future
            finally:
                self.keeper.forget(waiter)

    async def _claim(self) -> _Claim:
        submitted: Future[_Claim] = self.keeper.executor.submit(self.keeper.claim, self.key)
        try:
            return await asyncio.wrap_future(submitted)
        except asyncio.CancelledError:
            # Cancelled while the claim ran: a lease it took is given back once it ends.
            submitted.add_done_callback(self._give_back_unwanted)
            raise

    def _give_back_unwanted(self, submitted: Future[_Claim]) -> None:
        if submitted.cancelled() or submitted.exception() is not None:
            return
        lease = submitted.result().lease
        if lease is not None:
            lease.released = True
            # On the keeper's executor: when the claim had already ended, this callback
            # runs at once, on the thread that cancelled (the event loop's).
            # The store closed meanwhile (RuntimeError): the lease expires instead.
            with contextlib.suppress(RuntimeError):
                self.keeper.executor.submit(self.keeper.release, lease)

    async def __aexit__(self, *_: object) -> None:
        lease, self.lease = self.lease, None
        if lease is None:
            return
        lease.released = True
        token, self._token = self._token, None
        if token is not None:
            try:
                _held.reset(token)
            except ValueError:  # exited in another context than entered
                _held.set(tuple(held for held in _held.get() if held is not lease))
        # Shielded: a cancelled caller still gives the lease back (else only its expiry
        # would, a lease later).
        released = self.keeper.executor.submit(self.keeper.release, lease)
        await asyncio.shield(asyncio.wrap_future(released))


__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "TAKEOVER_CHECK_SECONDS",
    "HeldLease",
    "LeaseKeeper",
    "PostgresSessionLease",
    "create_lease_tables",
    "hold_lease_statement",
    "lease_lost",
]
