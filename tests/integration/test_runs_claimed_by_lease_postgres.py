"""Runs on PostgreSQL are claimed by lease (contract decision 24, issue 22 item 3): many
runs at once hold no database connection and leave the event loop turning, and a
gateway's own clock, however far off, plays no part in a lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from postgres_server import POSTGRES_URL
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.event_store import EventSourcedStore, PendingSave
from sessionwire.adapters.store.in_order import in_submission_order
from sessionwire.adapters.store.postgres import PostgresBackend
from sessionwire.adapters.store.postgres_lease import PostgresSessionLease
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.testing import ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
RUNS = 40
RUN_SECONDS = 300
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "done", "delaySeconds": RUN_SECONDS},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
# Only a bound on a broken test: a wake-up that never came fails instead of hanging.
HANG_SECONDS = 60


async def _open(url: str, clock: VirtualClock, **defaults: Any) -> Gateway:
    config = {**QUIET, "agents": {"defaults": defaults}}
    return await Gateway.open(
        config=GatewayConfig.load(config),
        store=url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )


async def _fire(gateway: Gateway, target: str) -> str:
    sent = await gateway.call_tool(
        MAIN, "sessions_send", {"sessionKey": target, "message": "go", "timeoutSeconds": 0}
    )
    assert sent["status"] == "accepted", sent
    return str(sent["runId"])


def _store(gateway: Gateway) -> EventSourcedStore:
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    return store


def _owner(gateway: Gateway) -> str:
    backend = _store(gateway).backend
    assert isinstance(backend, PostgresBackend)
    return backend.keeper.owner


def _sql(gateway: Gateway, statement: str, *params: object) -> list[tuple[Any, ...]]:
    schema = _store(gateway).datastore.schema
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        return connection.execute(statement.replace("{s}", f'"{schema}"'), params).fetchall()


def _leases_held(gateway: Gateway) -> int:
    rows = _sql(
        gateway, "SELECT count(*) FROM {s}.sw_session_leases WHERE owner = %s", _owner(gateway)
    )
    return int(rows[0][0])


async def test_forty_runs_at_once_hold_no_connection_and_the_loop_turns(
    postgres_url: str, clock: VirtualClock
) -> None:
    gateway = await _open(postgres_url, clock, maxConcurrent=80)
    turns = 0
    ticking = True

    async def ticker() -> None:
        nonlocal turns
        while ticking:
            turns += 1
            await asyncio.sleep(0)

    ticks = asyncio.create_task(ticker())
    try:
        pool = _store(gateway).datastore.pool
        assert pool.max_size < RUNS
        targets = [f"agent:main:group:g{index}" for index in range(RUNS)]
        for key in (MAIN, *targets):
            await gateway.record_message(key, role="user", content="(opened)")
        run_ids = await asyncio.gather(*(_fire(gateway, key) for key in targets))
        await asyncio.wait_for(gateway.wait_idle(), HANG_SECONDS)

        # Every run is at its agent at once, each holding its session's lease: more
        # leases than the pool has connections, and the loop answers meanwhile.
        assert _leases_held(gateway) == RUNS
        running = await gateway.call_tool(MAIN, "sessions_list", {"limit": 100})
        assert len(running["sessions"]) == RUNS + 1
        before = turns
        await asyncio.wait_for(gateway.record_message(MAIN, role="user", content="beside"), 30)
        assert turns > before

        await clock.advance(RUN_SECONDS)
        await asyncio.wait_for(gateway.wait_idle(), HANG_SECONDS)
        statuses = [await gateway.run(run_id) for run_id in run_ids]
        assert [run and run["status"] for run in statuses] == ["ok"] * RUNS
        assert _leases_held(gateway) == 0
    finally:
        ticking = False
        await ticks
        await gateway.close()


async def test_a_gateway_clock_far_ahead_changes_nothing_in_a_lease(
    postgres_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    far_clock = VirtualClock(start=datetime(2100, 1, 1, tzinfo=UTC))
    far = await _open(postgres_url, far_clock)
    near = await _open(postgres_url, clock)
    target = "agent:main:group:shared"
    try:
        for key in (MAIN, target):
            await far.record_message(key, role="user", content="(opened)")
        run_id = await _fire(far, target)
        await asyncio.wait_for(far.wait_idle(), HANG_SECONDS)

        # The lease expires a lease from now by the database's clock, not the gateway's.
        expires_in = _sql(
            far,
            "SELECT extract(epoch FROM expires_at - clock_timestamp())::float8 "
            "FROM {s}.sw_session_leases WHERE session_key = %s AND owner = %s",
            target,
            _owner(far),
        )
        lease_seconds = _store(far).lease_seconds
        assert lease_seconds is not None
        assert 0 < expires_in[0][0] <= lease_seconds

        # A gateway whose clock is 74 years behind neither takes the far one for dead
        # nor claims its lease: it waits, and is woken by the release.
        assert await internals(near).store.take_over_dead_gateways() == []
        backend = _store(near).backend
        assert isinstance(backend, PostgresBackend)
        waiting = asyncio.Event()
        wake_at = backend.keeper.wake_at

        def spied(waiter: Any, seconds: float) -> None:
            wake_at(waiter, seconds)
            waiting.set()

        monkeypatch.setattr(backend.keeper, "wake_at", spied)
        claimed: list[str] = []

        async def claim() -> None:
            async with internals(near).store.session_lock(target):
                claimed.append("near")

        claiming = asyncio.create_task(claim())
        await asyncio.wait_for(waiting.wait(), HANG_SECONDS)
        assert not claiming.done()

        # The far gateway's run ends on its clock; its saves carry its fence, accepted.
        await far_clock.advance(RUN_SECONDS)
        await asyncio.wait_for(far.wait_idle(), HANG_SECONDS)
        run = await far.run(run_id)
        assert run is not None
        assert run["status"] == "ok"
        await asyncio.wait_for(claiming, HANG_SECONDS)
        assert claimed == ["near"]
    finally:
        await near.close()
        await far.close()


async def test_a_dead_gateways_run_is_resumed_once_by_the_gateway_that_takes_it_over(
    postgres_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead_clock = VirtualClock(start=clock.now())
    dead = await _open(postgres_url, dead_clock)
    alive = await _open(postgres_url, clock)
    target = "agent:main:group:orphan"
    try:
        for key in (MAIN, target):
            await dead.record_message(key, role="user", content="(opened)")
        run_id = await _fire(dead, target)
        await asyncio.wait_for(dead.wait_idle(), HANG_SECONDS)  # at its agent, leased

        # The gateway dies as far as the database can tell: no more renewals, and its
        # heartbeat and lease expire (by the database's clock).
        owner = _expire(dead, monkeypatch)

        assert await internals(alive).takeover.check() == [owner]
        await asyncio.wait_for(alive.wait_idle(), HANG_SECONDS)
        await clock.advance(RUN_SECONDS)
        await asyncio.wait_for(alive.wait_idle(), HANG_SECONDS)
        run = await alive.run(run_id)
        assert run is not None
        assert run["status"] == "ok"

        # The old owner's agent answers late: its outcome is refused by the fence, and
        # the run keeps the outcome its new owner recorded.
        await dead_clock.advance(RUN_SECONDS)
        await asyncio.wait_for(dead.wait_idle(), HANG_SECONDS)
        ends = [
            type(event).__name__
            for _, event in _store(alive).events()
            if getattr(event, "originator_id", None) is not None
            and str(event.originator_id) == run_id
            and type(event).__name__ in {"RunCompleted", "RunFailed", "RunTimedOut"}
        ]
        assert ends == ["RunCompleted"]
    finally:
        await alive.close()
        await dead.close()


async def test_a_save_queued_under_a_lease_given_back_since_is_not_refused(
    postgres_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task started inside a run to drive work on its own (a spawn's driver) queues a
    save while the run holds the session's lease; written after the run gave the lease
    back and the session was claimed again, it commits: started outside any run, the
    task never held the lease (its save was refused as LeaseLost: a spawn step failed
    and waited for its retry)."""
    gateway = await _open(postgres_url, clock)
    try:
        await gateway.record_message(MAIN, role="user", content="(opened)")
        store = _store(gateway)
        backend, writer = store.backend, store.writer
        assert isinstance(backend, PostgresBackend)
        assert writer is not None
        # The writer's queue, held by the test: saves are written when it says.
        queue: list[PendingSave] = []
        queued = asyncio.Event()

        def hold(save: PendingSave) -> None:
            queue.append(save)
            queued.set()

        submit = writer.submit
        monkeypatch.setattr(writer, "submit", hold)
        async with PostgresSessionLease(backend.keeper, MAIN):
            late = asyncio.get_running_loop().create_task(
                gateway.record_message(MAIN, role="user", content="written late"),
                context=outside_any_run(),
            )
            await asyncio.wait_for(queued.wait(), HANG_SECONDS)
        async with PostgresSessionLease(backend.keeper, MAIN):
            monkeypatch.undo()
            for save in queue:
                submit(save)
            await late
        history = await gateway.call_tool(MAIN, "sessions_history", {"sessionKey": MAIN})
    finally:
        await gateway.close()
    assert history["messages"][-1]["content"][0]["text"] == "written late"


@pytest.mark.parametrize("in_order", [False, True], ids=["writer-threads", "in-order"])
async def test_a_stale_owners_outcome_is_refused_by_the_fence_and_the_takers_is_the_only_one(
    postgres_url: str,
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
    in_order: bool,
) -> None:
    """Gateway A claims a run; its lease expires (a pause), gateway B takes it over and
    dispatches it; A's agent then answers while B's still works. A's save is refused by
    the fence (logged), nothing of it is written, and the run ends with B's reply alone.
    On a store whose calls complete in order (the simulator's) the save ran on the
    store's thread without the run's context, so unfenced: the version conflict with B's
    dispatch sent it round again and A recorded its reply, B's then found the run ended."""
    stale_clock = VirtualClock(start=clock.now())
    opened = contextlib.ExitStack()
    if in_order:
        opened.enter_context(in_submission_order())
    with opened:
        stale = await _open_replying(postgres_url, stale_clock, "from A")
        taker = await _open_replying(postgres_url, clock, "from B")
    target = "agent:main:group:stale"
    try:
        for key in (MAIN, target):
            await stale.record_message(key, role="user", content="(opened)")
        run_id = await _fire(stale, target)
        await asyncio.wait_for(stale.wait_idle(), HANG_SECONDS)  # at its agent, leased

        # A pauses past its lease: no renewal, heartbeat and lease expired by the database.
        owner = _expire(stale, monkeypatch)
        assert await internals(taker).takeover.check() == [owner]
        await asyncio.wait_for(taker.wait_idle(), HANG_SECONDS)  # B's agent works on it
        assert [row[0] for row in _sql(taker, "SELECT owner FROM {s}.sw_session_leases")] == [
            _owner(taker)
        ]

        # A resumes: its agent answers first, while B still holds the lease.
        monkeypatch.undo()
        with _heard(logging.getLogger("sessionwire.runs"), "lease moved on") as refused:
            await stale_clock.advance(RUN_SECONDS)
            await asyncio.wait_for(refused.wait(), HANG_SECONDS)
        assert _ends(taker, run_id) == []  # nothing of A's save was written

        await clock.advance(RUN_SECONDS)
        await asyncio.wait_for(taker.wait_idle(), HANG_SECONDS)
        await asyncio.wait_for(stale.wait_idle(), HANG_SECONDS)  # A's retry finds it ended
        assert _ends(taker, run_id) == [("RunCompleted", "from B")]
    finally:
        await taker.close()
        await stale.close()


async def _open_replying(url: str, clock: VirtualClock, reply: str) -> Gateway:
    script = {
        "rules": [
            {"step": "primary", "reply": reply, "delaySeconds": RUN_SECONDS},
            {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        ]
    }
    return await Gateway.open(
        config=GatewayConfig.load(QUIET),
        store=url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(script),
    )


@contextlib.contextmanager
def _heard(logger: logging.Logger, text: str) -> Iterator[asyncio.Event]:
    """Set once ``logger`` has logged a warning containing ``text`` (from any thread)."""
    heard = asyncio.Event()
    loop = asyncio.get_running_loop()

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                loop.call_soon_threadsafe(heard.set)

    handler = Heard(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield heard
    finally:
        logger.removeHandler(handler)


def _ends(gateway: Gateway, run_id: str) -> list[tuple[str, str | None]]:
    """The run's recorded ends, in the store's order, with their replies."""
    return [
        (type(event).__name__, getattr(event, "reply", None))
        for _, event in _store(gateway).events()
        if str(getattr(event, "originator_id", "")) == run_id
        and type(event).__name__ in {"RunCompleted", "RunFailed", "RunTimedOut"}
    ]


def _expire(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> str:
    """Stop ``gateway``'s lease renewals and expire its heartbeat and leases by the
    database's clock; its owner id."""
    backend = _store(gateway).backend
    assert isinstance(backend, PostgresBackend)
    monkeypatch.setattr(backend.keeper, "_renew", lambda: None)
    owner = _owner(gateway)
    for table, column in (("sw_session_leases", "owner"), ("sw_gateways", "gateway_id")):
        _sql(
            gateway,
            f"UPDATE {{s}}.{table} SET expires_at = clock_timestamp() - interval '1 second' "
            f"WHERE {column} = %s RETURNING 1",
            owner,
        )
    return owner
