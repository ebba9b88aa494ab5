"""The PostgreSQL schemas tests share within a worker (tests/postgres_schemas.py): a test
gets an empty store every time, and never a schema another test changed or still uses."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from postgres_schemas import SchemaPool
from postgres_server import POSTGRES_URL
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of

# The conftest's fixture skips these tests without a server (fails them under CI).
pytestmark = pytest.mark.usefixtures("postgres_url")


@pytest.fixture
def pool() -> Iterator[SchemaPool]:
    opened = SchemaPool(POSTGRES_URL)
    yield opened
    opened.close()


def used_once(pool: SchemaPool, change: str = "") -> str:
    """A schema taken, changed by ``change`` (SQL, ``S`` for the schema), given back, and
    another taken and given back after it, so the first is looked at on the next take."""
    schema = pool.take()
    if change:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(change.replace("S.", f'"{schema}".'))
    pool.give_back(schema)
    pool.give_back(pool.take())
    return schema


def exists(schema: str) -> bool:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        found = connection.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone()
    return found is not None


async def test_a_schema_comes_back_as_an_empty_store(pool: SchemaPool) -> None:
    schema = pool.take()
    gateway = await Gateway.open(config=GatewayConfig(), store=pool.url(schema))
    await gateway.record_message("main", role="user", content="hello")
    await gateway.close()
    pool.give_back(schema)
    pool.give_back(pool.take())

    assert pool.take() == schema
    gateway = await Gateway.open(config=GatewayConfig(), store=pool.url(schema))
    try:
        assert list(store_of(gateway).events()) == []
        assert store_of(gateway).session("agent:main:main") is None
        await gateway.record_message("main", role="user", content="again")
        # The log starts again at 1, as a new store's does.
        first, _ = next(iter(store_of(gateway).events()))
        assert first == 1
    finally:
        await gateway.close()


@pytest.mark.parametrize(
    "change",
    [
        "DROP TABLE S.sw_saves",
        "ALTER TABLE S.sw_runs ADD COLUMN extra int",
        "CREATE INDEX ON S.sw_runs (model)",
        "TRUNCATE S.sw_work",
        "UPDATE S.sw_format SET value = 2",
    ],
    ids=["dropped-table", "added-column", "added-index", "truncated", "storage-version"],
)
def test_a_schema_a_test_changed_is_dropped(pool: SchemaPool, change: str) -> None:
    schema = used_once(pool, change)
    assert pool.take() != schema
    assert not exists(schema)


def test_a_schema_with_a_connection_left_open_is_not_handed_out(
    pool: SchemaPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pool.take()
    monkeypatch.setenv("PGAPPNAME", SchemaPool.application_name(schema))
    with psycopg.connect(POSTGRES_URL, autocommit=True):
        monkeypatch.delenv("PGAPPNAME")
        pool.give_back(schema)
        pool.give_back(pool.take())
        assert pool.take() != schema
        assert schema in pool.returned
