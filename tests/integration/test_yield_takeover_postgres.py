"""A yield survives its gateway's death on PostgreSQL (decisions 24 and 26): the gateway
that takes the dead one's work over resumes the waiting yield and wakes the session once;
the dead gateway's own driver, coming back late, records no second wake."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from postgres_server import POSTGRES_URL
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.postgres import PostgresBackend
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "late", "delaySeconds": 10_000},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "yield_wake", "reply": "woken"},
    ]
}
# Only a bound on a broken test: a wake-up that never came fails instead of hanging.
HANG_SECONDS = 60


async def _open(url: str, clock: VirtualClock, runtime: ScriptedRuntime) -> Gateway:
    return await Gateway.open(
        config=GatewayConfig.load({}), store=url, clock=clock, runtime=runtime
    )


def _store(gateway: Gateway) -> EventSourcedStore:
    store = store_of(gateway)
    assert isinstance(store, EventSourcedStore)
    return store


def _kill(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> str:
    """The gateway dies as far as the database can tell: no more renewals, and its
    heartbeat and leases expire (by the database's clock). Its owner id."""
    backend = _store(gateway).backend
    assert isinstance(backend, PostgresBackend)
    monkeypatch.setattr(backend.keeper, "_renew", lambda: None)
    owner = backend.keeper.owner
    schema = _store(gateway).datastore.schema
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for table, column in (("sw_session_leases", "owner"), ("sw_gateways", "gateway_id")):
            connection.execute(
                f'UPDATE "{schema}".{table} '
                "SET expires_at = clock_timestamp() - interval '1 second' "
                f"WHERE {column} = %s",
                (owner,),
            )
    return owner


def _events(gateway: Gateway, name: str) -> list[Any]:
    return [e for _, e in _store(gateway).events() if type(e).__name__ == name]


async def test_a_dead_gateways_yield_wakes_once_on_the_gateway_that_takes_it_over(
    postgres_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead_clock = VirtualClock(start=clock.now())
    dead_agents, alive_agents = ScriptedRuntime.from_dict(SCRIPT), ScriptedRuntime.from_dict(SCRIPT)
    dead = await _open(postgres_url, dead_clock, dead_agents)
    alive = await _open(postgres_url, clock, alive_agents)
    try:
        await dead.record_message(MAIN, role="user", content="hi")
        spawned = await dead.call_tool(MAIN, "sessions_spawn", {"task": "slow"})
        assert spawned["status"] == "accepted"
        yielded = await dead.call_tool(MAIN, "sessions_yield", {"timeoutSeconds": 100})
        assert yielded["status"] == "yielded"
        await asyncio.wait_for(dead.wait_idle(), HANG_SECONDS)

        owner = _kill(dead, monkeypatch)
        assert await internals(alive).takeover.check() == [owner]
        await asyncio.wait_for(alive.wait_idle(), HANG_SECONDS)
        assert _events(alive, "YieldWoken") == []
        await clock.advance(100)
        await asyncio.wait_for(alive.wait_idle(), HANG_SECONDS)
        (woken,) = _events(alive, "YieldWoken")
        assert woken.reason == "timeout"
        assert [call.step for call in alive_agents.calls].count("yield_wake") == 1

        # The dead gateway's driver reaches the deadline late: the yield woke already.
        await dead_clock.advance(100)
        await asyncio.wait_for(dead.wait_idle(), HANG_SECONDS)
        assert len(_events(alive, "YieldWoken")) == 1
        assert "yield_wake" not in [call.step for call in dead_agents.calls]
        run = await alive.run(str(woken.wake_run_id))
        assert run is not None
        assert run["status"] == "ok"
    finally:
        await alive.close()
        await dead.close()
