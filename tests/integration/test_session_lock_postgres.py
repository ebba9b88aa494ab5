"""PostgreSQL's session lock is a lease (contract decision 24, ADR 0028): claimed and given
back in short statements, waited for by LISTEN/NOTIFY, taken over once its holder's expiry
passes, and fencing its holder's saves.

The stores here are opened on one schema as two gateway processes would be (each its own
gateway id). A lease "whose owner died" is made so by SQL, moving its expiry (and its
gateway's heartbeat) into the past by the database's clock: no test waits for a lease.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any

import psycopg
import pytest
from freezegun import freeze_time
from postgres_server import POSTGRES_URL, schema_of, schema_url
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.event_store import EventSourcedStore, StoreURLError
from sessionwire.adapters.store.postgres import PostgresBackend
from sessionwire.adapters.store.postgres_lease import LeaseKeeper
from sessionwire.adapters.testkit.simulator.faults import die_without_goodbye
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.application.ports.session_locks import LeaseLost
from sessionwire.domain.session import Session, session_uuid
from store_sessions import opened, with_message

KEY = "agent:main:main"
# Renewals far apart: no renewal runs (and moves an expiry back) while a test looks.
QUIET = "lease_seconds=3600"
# Only a bound on a broken test: a wake-up that never came fails instead of hanging.
HANG_SECONDS = 60


def _with(url: str, query: str) -> str:
    return f"{url}&{query}" if "?" in url else f"{url}?{query}"


class Stores:
    """Stores opened on one schema, as gateway processes open it; closed afterwards."""

    def __init__(self, url: str) -> None:
        self.url = _with(url, QUIET)
        self.opened: list[EventSourcedStore] = []

    def open(self) -> EventSourcedStore:
        store = open_event_store(self.url, GatewayConfig())
        self.opened.append(store)
        return store

    def close(self, store: EventSourcedStore) -> None:
        self.opened.remove(store)
        store.close()


@pytest.fixture
def stores(postgres_url: str) -> Iterator[Stores]:
    opener = Stores(postgres_url)
    yield opener
    for store in opener.opened:
        store.close()


@pytest.fixture
async def other_schema(postgres_url: str) -> AsyncIterator[str]:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield schema_url(schema, QUIET)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def keeper(store: EventSourcedStore) -> LeaseKeeper:
    backend = store.backend
    assert isinstance(backend, PostgresBackend)
    return backend.keeper


def sql(store: EventSourcedStore, statement: str, *params: object) -> list[tuple[Any, ...]]:
    schema = store.datastore.schema
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        cursor = connection.execute(statement.replace("{s}", f'"{schema}"'), params)
        return cursor.fetchall() if cursor.description else []


def kill(store: EventSourcedStore) -> None:
    """The store's gateway as dead: its heartbeat and leases expired (the database's time)."""
    owner = keeper(store).owner
    sql(
        store,
        "UPDATE {s}.sw_session_leases SET expires_at = clock_timestamp() - interval '1 second' "
        "WHERE owner = %s",
        owner,
    )
    sql(
        store,
        "UPDATE {s}.sw_gateways SET expires_at = clock_timestamp() - interval '1 second' "
        "WHERE gateway_id = %s",
        owner,
    )


def lease_row(store: EventSourcedStore, key: str) -> tuple[Any, ...]:
    rows = sql(store, "SELECT owner, fence FROM {s}.sw_session_leases WHERE session_key = %s", key)
    assert len(rows) == 1
    return rows[0]


class WaitSpy:
    """Records when a claimer starts waiting (it found the lease held) and each release
    the store's listener heard."""

    def __init__(self, store: EventSourcedStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.waiting = asyncio.Event()
        self.heard: list[str] = []
        target = keeper(store)
        wake_at, released = target.wake_at, target._released

        def spied_wake_at(waiter: Any, seconds: float) -> None:
            wake_at(waiter, seconds)
            self.waiting.set()

        def spied_released(key: str) -> None:
            self.heard.append(key)  # the listener's thread; appended before the wake
            released(key)

        monkeypatch.setattr(target, "wake_at", spied_wake_at)
        monkeypatch.setattr(target, "_released", spied_released)


async def test_a_held_lease_blocks_another_gateway_until_its_release_wakes_it(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = stores.open(), stores.open()
    spy = WaitSpy(second, monkeypatch)
    order: list[str] = []
    holding = first.session_lock(KEY)
    await holding.__aenter__()

    async def claim() -> None:
        async with second.session_lock(KEY):
            order.append("second claimed")

    claiming = asyncio.create_task(claim())
    await asyncio.wait_for(spy.waiting.wait(), HANG_SECONDS)
    assert not claiming.done()
    order.append("first released")
    await holding.__aexit__(None, None, None)
    # Woken by the release's NOTIFY: the holder's expiry is an hour away.
    await asyncio.wait_for(claiming, HANG_SECONDS)
    assert order == ["first released", "second claimed"]
    assert spy.heard[:1] == [KEY]  # (its own release, heard later, may follow)


async def test_a_claimer_retries_at_the_holders_expiry_even_in_frozen_time(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The holder never releases (it died); its lease runs out a moment from now by the
    # database's clock. The claimer wakes at that expiry, heard no release, and claims.
    # Frozen time (which stops asyncio's timers) does not stop that wake-up.
    first, second = stores.open(), stores.open()
    spy = WaitSpy(second, monkeypatch)
    holding = first.session_lock(KEY)
    await holding.__aenter__()
    with freeze_time("2026-01-01"):
        # Moved once frozen: freezegun's start scans every loaded module (some 0.4 s),
        # which would let the lease run out before the claimer looked.
        sql(
            first,
            "UPDATE {s}.sw_session_leases "
            "SET expires_at = clock_timestamp() + interval '500 milliseconds' "
            "WHERE session_key = %s",
            KEY,
        )
        async with second.session_lock(KEY):
            assert spy.waiting.is_set()
            assert spy.heard == []
            assert lease_row(second, KEY)[0] == keeper(second).owner
    await holding.__aexit__(None, None, None)


async def test_a_keeper_whose_connection_dropped_reconnects_and_wakes_its_waiters(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = stores.open(), stores.open()
    spy = WaitSpy(second, monkeypatch)
    holding = first.session_lock(KEY)
    await holding.__aenter__()
    claiming = asyncio.create_task(_take(second, KEY))
    await asyncio.wait_for(spy.waiting.wait(), HANG_SECONDS)
    # The listener's connection dies (a server restart, a proxy's timeout): a release
    # NOTIFYed meanwhile is not heard, so the keeper wakes every waiter once back.
    listener = keeper(second)._conn
    assert listener is not None
    sql(second, "SELECT pg_terminate_backend(%s::int)", listener.info.backend_pid)
    await holding.__aexit__(None, None, None)
    await asyncio.wait_for(claiming, HANG_SECONDS)
    # Listening again: the next release is heard (the holder's expiry is an hour away).
    spy.heard.clear()
    spy.waiting.clear()
    await holding.__aenter__()
    claiming = asyncio.create_task(_take(second, KEY))
    await asyncio.wait_for(spy.waiting.wait(), HANG_SECONDS)
    await holding.__aexit__(None, None, None)
    await asyncio.wait_for(claiming, HANG_SECONDS)
    assert KEY in spy.heard


async def _take(store: EventSourcedStore, key: str) -> None:
    async with store.session_lock(key):
        pass


async def test_a_lease_in_one_schema_does_not_block_another(
    stores: Stores, other_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = stores.open()
    second = open_event_store(other_schema, GatewayConfig())
    try:

        def never_wait(*_: object) -> None:
            raise AssertionError("the other schema's lease waited on this one")

        monkeypatch.setattr(keeper(second), "wake_at", never_wait)
        async with first.session_lock(KEY), second.session_lock(KEY):
            pass
    finally:
        second.close()


async def test_no_connection_is_held_while_a_lease_is_held(stores: Stores) -> None:
    store = stores.open()
    pool = store.datastore.pool
    keys = [f"agent:main:s{index}" for index in range(pool.max_size + 5)]
    leases = [store.session_lock(key) for key in keys]
    for lease in leases:
        await lease.__aenter__()
    try:
        # More leases than the pool has connections, and every connection back in it.
        assert pool.get_stats().get("pool_available", 0) == pool.get_stats().get("pool_size", 0)
        owner = keeper(store).owner
        held = sql(store, "SELECT count(*) FROM {s}.sw_session_leases WHERE owner = %s", owner)
        assert held == [(len(keys),)]
    finally:
        for lease in leases:
            await lease.__aexit__(None, None, None)
    assert sql(store, "SELECT count(*) FROM {s}.sw_session_leases WHERE owner IS NOT NULL") == [
        (0,)
    ]


async def test_a_dead_owners_lease_is_taken_over_and_its_late_save_refused(
    stores: Stores,
) -> None:
    dead, alive = stores.open(), stores.open()
    await dead.save_async(opened(KEY))

    async with dead.session_lock(KEY):
        _, old_fence = lease_row(dead, KEY)
        kill(dead)
        async with alive.session_lock(KEY):
            owner, new_fence = lease_row(alive, KEY)
            assert owner == keeper(alive).owner
            assert new_fence > old_fence
            # The dead owner's late saves, awaited or blocking: refused whole.
            with pytest.raises(LeaseLost, match="moved on"):
                await dead.save_async(_session(dead, "late, awaited"))
            with pytest.raises(LeaseLost, match="moved on"):
                dead.save(_session(dead, "late, blocking"))
            # The new owner's save goes through under its own fence.
            await alive.save_async(_session(alive, "from the new owner"))
        # The dead owner's release gives back nothing it no longer holds.
    owner, fence = lease_row(alive, KEY)
    assert (owner, fence) == (None, new_fence)
    texts = [
        str(message)
        for message in alive.transcript(session_uuid(KEY), limit=10, include_tools=True)
    ]
    assert any("from the new owner" in text for text in texts)
    assert not any("late" in text for text in texts)


async def test_fences_only_grow(stores: Stores) -> None:
    first, second = stores.open(), stores.open()
    fences = []
    for store in (first, second, first, first, second):
        async with store.session_lock(KEY):
            fences.append(lease_row(store, KEY)[1])
    assert fences == sorted(set(fences))


async def test_saves_outside_any_lease_are_not_fenced(stores: Stores) -> None:
    first, second = stores.open(), stores.open()
    async with second.session_lock(KEY):
        # Another gateway holds the session's lease; this save is under none.
        await first.save_async(opened(KEY))
    assert first.session(KEY) is not None


async def test_a_task_that_outlives_the_lease_it_started_under_is_not_fenced(
    stores: Stores,
) -> None:
    # A driver started inside a run (sharing its context) saves after the run ended and
    # another run claimed the session: it was never the run's write.
    first, second = stores.open(), stores.open()
    go_on = asyncio.Event()

    async def driver() -> None:
        await go_on.wait()
        await first.save_async(opened("agent:main:other"))

    async with first.session_lock(KEY):
        outliving = asyncio.create_task(driver())
    async with second.session_lock(KEY):
        go_on.set()
        await outliving
    assert first.session("agent:main:other") is not None


async def test_a_task_started_outside_any_run_saves_unfenced_while_the_run_holds_its_lease(
    stores: Stores,
) -> None:
    # A run's turn starts a task that drives work on its own (a spawn's driver): its
    # saves are never the run's, so the run's lease does not fence them, held or not.
    stale, alive = stores.open(), stores.open()
    await stale.save_async(opened(KEY))

    async def driver() -> None:
        await stale.save_async(opened("agent:main:other"))

    async with stale.session_lock(KEY):
        kill(stale)
        async with alive.session_lock(KEY):
            # Still held here, but moved on: the run's own save is refused...
            with pytest.raises(LeaseLost, match="moved on"):
                await stale.save_async(_session(stale, "the run's, late"))
            # ...and its driver's commits.
            loop = asyncio.get_running_loop()
            await loop.create_task(driver(), context=outside_any_run())
    assert stale.session("agent:main:other") is not None


async def lose_listener(store: EventSourcedStore) -> str:
    """The store's gateway as ``kill -9`` leaves it (ADR 0049): its keeper's connection
    gone, so the server lets go of its liveness lock, and its heartbeat and leases left
    as they were, an hour from expiring. Its gateway id."""
    target = keeper(store)
    die_without_goodbye(target)
    target.close()

    def let_go() -> None:
        # The server lets go of the lock once the closed connection's backend has exited:
        # taking it here returns then.
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute("SELECT pg_advisory_lock(%s)", (target.liveness_key,))
            connection.execute("SELECT pg_advisory_unlock(%s)", (target.liveness_key,))

    await asyncio.wait_for(asyncio.to_thread(let_go), HANG_SECONDS)
    return target.owner


async def test_a_gateway_whose_connection_is_gone_is_taken_over_before_its_lease(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead, alive, waiting = stores.open(), stores.open(), stores.open()
    await dead.save_async(opened(KEY))
    holding = dead.session_lock(KEY)
    await holding.__aenter__()  # never given back: its process dies holding it
    _, old_fence = lease_row(dead, KEY)
    spy = WaitSpy(waiting, monkeypatch)
    claiming = asyncio.create_task(_take(waiting, KEY))
    await asyncio.wait_for(spy.waiting.wait(), HANG_SECONDS)

    gone = await lose_listener(dead)
    # Its heartbeat and lease are an hour from expiring: found dead by its free lock.
    assert await alive.take_over_dead_gateways() == [gone]
    assert await waiting.take_over_dead_gateways() == []
    # Its lease was freed and the gateway waiting for it woken (NOTIFY), not at expiry.
    await asyncio.wait_for(claiming, HANG_SECONDS)
    assert KEY in spy.heard
    owner, new_fence = lease_row(waiting, KEY)
    assert (owner, new_fence > old_fence) == (None, True)
    # Had its process gone on after all, its late save under the lease is refused.
    with pytest.raises(LeaseLost, match="moved on"):
        await dead.save_async(_session(dead, "late"))


async def test_a_keeper_that_reconnected_holds_a_new_liveness_lock_and_is_not_taken(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = stores.open(), stores.open()
    target = keeper(second)
    old_key = target.liveness_key
    renewed = threading.Event()
    renew = target._renew

    def spied_renew() -> None:
        renew()
        renewed.set()  # the first renewal after reconnecting writes the new key

    monkeypatch.setattr(target, "_renew", spied_renew)
    listener = target._conn
    assert listener is not None
    sql(second, "SELECT pg_terminate_backend(%s::int)", listener.info.backend_pid)
    assert await asyncio.to_thread(renewed.wait, HANG_SECONDS)
    assert target.liveness_key != old_key
    rows = sql(
        second, "SELECT liveness_key FROM {s}.sw_gateways WHERE gateway_id = %s", target.owner
    )
    assert rows == [(target.liveness_key,)]
    assert await first.take_over_dead_gateways() == []


async def test_a_heartbeat_without_a_liveness_lock_on_this_server_waits_for_its_lease(
    stores: Stores,
) -> None:
    first = stores.open()
    free_key = 4242
    rows = {
        # A gateway of the version before liveness locks: no key.
        "old-version": "NULL, NULL",
        # A free key, but on another server (another Citus node; before a restart).
        "other-server": f"{free_key}, 'another server'",
        # A free key on this server: its connection is gone.
        "gone": f"{free_key}, extract(epoch FROM pg_postmaster_start_time())::text",
    }
    for gateway_id, liveness in rows.items():
        sql(
            first,
            "INSERT INTO {s}.sw_gateways (gateway_id, expires_at, liveness_key, liveness_server) "
            f"VALUES (%s, clock_timestamp() + interval '1 hour', {liveness})",
            gateway_id,
        )
    assert await first.take_over_dead_gateways() == ["gone"]
    sql(first, "UPDATE {s}.sw_gateways SET expires_at = clock_timestamp() - interval '1 second'")
    assert sorted(await first.take_over_dead_gateways()) == ["old-version", "other-server"]


def test_a_heartbeat_table_made_before_liveness_locks_gets_them(postgres_url: str) -> None:
    schema = schema_of(postgres_url)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
        connection.execute(
            f'CREATE TABLE "{schema}".sw_gateways '
            "(gateway_id text PRIMARY KEY, expires_at timestamptz NOT NULL)"
        )
        connection.execute(
            f"INSERT INTO \"{schema}\".sw_gateways VALUES ('older', clock_timestamp())"
        )
    store = open_event_store(_with(postgres_url, QUIET), GatewayConfig())
    try:
        rows = sql(store, "SELECT gateway_id, liveness_key FROM {s}.sw_gateways ORDER BY 1")
        assert rows == sorted([("older", None), (keeper(store).owner, keeper(store).liveness_key)])
    finally:
        store.close()


async def test_exactly_one_of_two_gateways_takes_a_dead_gateway_over(stores: Stores) -> None:
    first, second, dead = stores.open(), stores.open(), stores.open()
    kill(dead)
    taken = await asyncio.gather(first.take_over_dead_gateways(), second.take_over_dead_gateways())
    assert sorted(taken) == [[], [keeper(dead).owner]]
    assert await first.take_over_dead_gateways() == []


async def test_a_live_gateway_is_not_taken_over_and_a_closed_one_leaves(stores: Stores) -> None:
    first, second = stores.open(), stores.open()
    assert await first.take_over_dead_gateways() == []
    gone = keeper(second).owner
    stores.close(second)
    assert sql(first, "SELECT gateway_id FROM {s}.sw_gateways WHERE gateway_id = %s", gone) == []


@pytest.mark.parametrize("given", ["0", "-5", "abc", "nan", "7200", ""])
def test_a_bad_lease_length_is_a_clear_store_url_error(postgres_url: str, given: str) -> None:
    with pytest.raises(StoreURLError, match="lease_seconds"):
        PostgresBackend(_with(postgres_url, f"lease_seconds={given}"))


def test_the_lease_length_comes_from_the_url(postgres_url: str) -> None:
    assert PostgresBackend(postgres_url).lease_seconds == 30
    assert PostgresBackend(_with(postgres_url, "lease_seconds=5")).lease_seconds == 5


def _session(store: EventSourcedStore, text: str) -> Session:
    """The session as ``store`` last knew it, with one more message."""
    stored = store.session_for_update(KEY)
    assert stored is not None
    return with_message(stored.to_aggregate(), text)


async def test_a_claim_cancelled_after_it_took_the_lease_gives_it_back_off_the_loop(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim has already ended when its caller is cancelled: the give-back runs at once,
    # on the cancelling thread; it must still reach the database from the keeper's.
    store = stores.open()
    target = keeper(store)
    claimed = threading.Event()
    submitted: list[Future[Any]] = []
    released_on: list[str] = []
    claim, release, submit = target.claim, target.release, target.executor.submit

    def slow_claim(key: str) -> Any:
        claimed.wait(HANG_SECONDS)
        return claim(key)

    def spied_release(lease: Any) -> None:
        released_on.append(threading.current_thread().name)
        release(lease)

    def spied_submit(function: Any, *args: Any) -> Future[Any]:
        future = submit(function, *args)
        submitted.append(future)
        return future

    monkeypatch.setattr(target, "claim", slow_claim)
    monkeypatch.setattr(target, "release", spied_release)
    monkeypatch.setattr(target.executor, "submit", spied_submit)
    entering = asyncio.ensure_future(store.session_lock(KEY).__aenter__())
    while not submitted:
        await asyncio.sleep(0)
    claimed.set()
    concurrent.futures.wait(submitted[:1], timeout=HANG_SECONDS)  # ended, loop not told
    entering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await entering
    concurrent.futures.wait(submitted[1:], timeout=HANG_SECONDS)
    assert released_on
    assert all(name != threading.current_thread().name for name in released_on)
    assert lease_row(store, KEY)[0] is None  # given back: no owner


def test_a_keeper_whose_schema_was_dropped_stops_instead_of_retrying_forever(
    other_schema: str,
) -> None:
    # A store never closed whose schema a test (or an operator) dropped: its keeper met
    # "relation does not exist" at every reconnect and logged it for ever.
    store = open_event_store(other_schema, GatewayConfig())
    try:
        target = keeper(store)
        listener = target._conn
        assert listener is not None
        sql(store, "DROP SCHEMA {s} CASCADE")
        sql(store, "SELECT pg_terminate_backend(%s::int)", listener.info.backend_pid)
        target._thread.join(HANG_SECONDS)
        assert not target._thread.is_alive()
    finally:
        store.close()
