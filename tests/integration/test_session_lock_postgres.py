"""The PostgreSQL session lock belongs to one store: two stores (schemas) in one database
never wait on each other's runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from postgres_server import POSTGRES_URL
from sessionwire import Gateway


@pytest.fixture
async def other_store(postgres_url: str) -> AsyncIterator[str]:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield f"{POSTGRES_URL}?schema={schema}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_a_session_lock_in_one_schema_does_not_block_another(
    postgres_url: str, other_store: str
) -> None:
    first = await Gateway.open(store=postgres_url)
    second = await Gateway.open(store=other_store)
    try:
        async with first.store.session_lock("agent:main:main"):
            taking = asyncio.ensure_future(_take(second, "agent:main:main"))
            for _ in range(50):  # event-loop turns, not a time limit
                await asyncio.sleep(0)
            taken = taking.done()
            taking.cancel()
            assert taken, "the other store's session lock waited on this one"
    finally:
        await second.close()
        await first.close()


async def _take(gateway: Gateway, key: str) -> None:
    async with gateway.store.session_lock(key):
        pass  # taken: the lock is free in this store
