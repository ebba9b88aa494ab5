"""pytest plugin (entry point ``sessionwire``): fixtures for testing code built on sessionwire.

* ``clock``: a VirtualClock at 2026-05-01 12:00 UTC.
* ``scripted``: a ScriptedRuntime with no rules yet (``scripted.add(step=..., reply=...)``).
* ``gateway``: a Gateway on that clock and runtime, with a CapturingDelivery
  (``gateway.delivery.sent``), opened on each store in turn: memory, SQLite and, when
  SESSIONWIRE_TEST_POSTGRES names a server, PostgreSQL (a fresh schema per test; the
  store options in its query, such as ``?distribution=citus``, go to every store).
* ``sessionwire_config``: the GatewayConfig the gateway opens with; override it in a
  conftest to test another configuration.

A project's own fixtures with these names take precedence over the plugin's.

Where freezegun is installed, the plugin also keeps PostgreSQL's connection pool on real
time under ``freeze_time`` (its timer thread would otherwise miss the stop a close
schedules in frozen time, and every close would wait 5 s for it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime
from sessionwire.adapters.testkit.deliveries import CapturingDelivery
from sessionwire.adapters.testkit.virtual_clock import VirtualClock
from sessionwire.application.config.gateway_config import GatewayConfig

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
POSTGRES_ENV = "SESSIONWIRE_TEST_POSTGRES"
STORES = ["memory", "sqlite", *(["postgres"] if os.environ.get(POSTGRES_ENV) else [])]


def pytest_configure(config: pytest.Config) -> None:
    try:
        import freezegun
    except ImportError:  # freezegun is optional: nothing to keep on real time
        return
    # Read when each freeze_time(...) is made, so set before any test makes one.
    freezegun.configure(extend_ignore_list=["psycopg_pool"])


@pytest.fixture(params=STORES)
def sessionwire_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL: each test using it runs once per store."""
    if request.param == "memory":
        yield "memory"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/sessions.db"
    else:
        import psycopg

        # Store options in the server's URL (``?distribution=citus``) go to every store.
        given = urlsplit(os.environ[POSTGRES_ENV])
        server = urlunsplit((given.scheme, given.netloc, given.path, "", ""))
        schema = f"t_{uuid.uuid4().hex[:16]}"
        yield f"{server}?schema={schema}" + (f"&{given.query}" if given.query else "")
        with psycopg.connect(server, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=START)


@pytest.fixture
def scripted() -> ScriptedRuntime:
    return ScriptedRuntime([])


@pytest.fixture
def sessionwire_config() -> GatewayConfig:
    return GatewayConfig()


try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - async fixtures need pytest-asyncio
    async_fixture = pytest.fixture  # type: ignore[assignment]


@async_fixture
async def gateway(
    sessionwire_store: str,
    clock: VirtualClock,
    scripted: ScriptedRuntime,
    sessionwire_config: GatewayConfig,
) -> AsyncIterator[Gateway]:
    opened = await Gateway.open(
        config=sessionwire_config,
        store=sessionwire_store,
        runtime=scripted,
        clock=clock,
        delivery=CapturingDelivery(),
    )
    yield opened
    await opened.close()
