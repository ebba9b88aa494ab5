"""The PostgreSQL session lock belongs to one store: two stores (schemas) in one database
never wait on each other's runs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from postgres_server import POSTGRES_URL
from sessionwire import Gateway
from sessionwire.adapters.store.postgres import PostgresSessionLock
from sessionwire.adapters.testkit.internals import store_of


@pytest.fixture
async def other_store(postgres_url: str) -> AsyncIterator[str]:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield f"{POSTGRES_URL}?schema={schema}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_a_session_lock_in_one_schema_does_not_block_another(
    postgres_url: str, other_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await Gateway.open(store=postgres_url)
    second = await Gateway.open(store=other_store)

    async def never_wait(_: PostgresSessionLock) -> None:
        raise AssertionError("the other store's session lock waited on this one")

    try:
        async with store_of(first).session_lock("agent:main:main"):
            # Taken at the first try: a lock that had to wait would pause, and fail here.
            monkeypatch.setattr(PostgresSessionLock, "_pause", never_wait)
            await _take(second, "agent:main:main")
    finally:
        monkeypatch.undo()
        await second.close()
        await first.close()


async def test_a_session_lock_of_the_same_store_waits_for_its_holder(postgres_url: str) -> None:
    first = await Gateway.open(store=postgres_url)
    second = await Gateway.open(store=postgres_url, resume=False)
    pauses = 0
    holding = store_of(first).session_lock("agent:main:main")
    await holding.__aenter__()

    async def pause(_: PostgresSessionLock) -> None:
        # The holder gives the lock back while the other waits: no timing involved.
        nonlocal pauses
        pauses += 1
        await holding.__aexit__(None, None, None)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(PostgresSessionLock, "_pause", pause)
            await _take(second, "agent:main:main")
        assert pauses == 1
    finally:
        await second.close()
        await first.close()


async def _take(gateway: Gateway, key: str) -> None:
    async with store_of(gateway).session_lock(key):
        pass  # taken: the lock is free in this store
