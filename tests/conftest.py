"""Shared fixtures: every gateway test runs on memory, SQLite and PostgreSQL.

PostgreSQL tests need a server (default postgresql://postgres@127.0.0.1:5432/test, or
SESSIONWIRE_TEST_POSTGRES). Without one they skip with the reason, except under CI
(CI=true), where a missing server is a failure: CI must test every store.
"""

from __future__ import annotations

import logging
import os

# Every store call the product makes on an event loop's thread fails the test that made
# it (decision 23); set before sessionwire is imported, and inherited by the CLI and
# servers the end-to-end tests start.
os.environ.setdefault("SESSIONWIRE_LOOP_GUARD", "raise")
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import log_watch
import pytest
import sessionwire
import structlog
from hypothesis import settings
from postgres_schemas import SchemaPool
from postgres_server import ON_CITUS, POSTGRES_URL, STORE_OPTIONS, postgres_problem, schema_url
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store import loop_guard
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.testing import VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

# Every property test draws the same examples each run: a failure is a change in the code,
# never a roll of the dice. SESSIONWIRE_FUZZ=explore draws new ones (with hypothesis'
# database, to replay what failed); what they find is kept as an @example.
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("SESSIONWIRE_FUZZ") == "explore" else "fixed")

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    # sessionwire's pytest plugin may have imported the guard before this file set the
    # variable (a run without workers): arm it as the variable says.
    loop_guard.arm(os.environ["SESSIONWIRE_LOOP_GUARD"] == "raise")
    # The editable install is a link tree (ADR 0009): a module added since the last
    # install is missing from it and would fail as "No module named …" mid-run.
    installed = Path(sessionwire.__file__).resolve().parent
    tree = Path(sessionwire.__file__).parent
    if installed != ROOT / "public":
        return  # a regular install: nothing to compare
    missing = [
        str(source.relative_to(ROOT))
        for top in ("domain", "application", "adapters")
        for source in (ROOT / top).rglob("*.py")
        if not (tree / top / source.relative_to(ROOT / top)).exists()
    ]
    if missing:
        raise pytest.UsageError(
            f"the editable install is out of date ({', '.join(missing[:3])} not linked): "
            "run ./run tests, or ./run sessionwire --help once, to refresh it"
        )


# The PostgreSQL tier (`-m postgres`): every test on the shared test server, by the
# PostgreSQL fixture it takes or the `postgres` store parameter it runs with. CI runs the
# tier a second time on a Citus cluster (.ci/run), with SESSIONWIRE_TEST_POSTGRES naming
# the cluster's coordinator.
_POSTGRES_FIXTURES = frozenset({"postgres_url", "postgres_store_url", "postgres_schemas"})


# PostgreSQL tests that fail on a Citus cluster (`distribution=citus` in the server's URL)
# for what the distributed store does not do yet, each with what it broke on 2026-12-02
# (ADR 0053): strict, so one that passes there fails until it is taken off this list.
CITUS_PENDING: dict[str, str] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        values = list(callspec.params.values()) if callspec is not None else []
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & _POSTGRES_FIXTURES or any(value == "postgres" for value in values):
            item.add_marker(pytest.mark.postgres)
            pending = CITUS_PENDING.get(item.nodeid) if ON_CITUS else None
            if pending is not None:
                item.add_marker(pytest.mark.xfail(strict=True, reason=f"on Citus: {pending}"))


# A library thread that logs after its test's captured stream closed would have logging
# print a "--- Logging error ---" traceback from that thread; CPython 3.11 builds a
# traceback's carets with ast.parse, which is not thread-safe, and a failure report being
# formatted at that moment crashes its xdist worker ("AST constructor recursion depth
# mismatch"). Such a late line is dropped instead.
logging.raiseExceptions = False


def quiet_logging() -> None:
    """Logging as an embedding host finds it (decision 21): structlog unconfigured (the
    library never uses its global configuration) and no handler of the CLI's left on the
    root logger; only the session's LogWatch listens, to the library at DEBUG."""
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "sessionwire_cli", False)]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("sessionwire").setLevel(logging.DEBUG)


LOG_WATCH = log_watch.install()
quiet_logging()


@pytest.fixture(scope="session", autouse=True)
def _no_secret_in_any_log() -> Iterator[None]:
    # Every log line of this session (this xdist worker's), against every token and key
    # the session used: a failure here names the secret's first leaking line.
    yield
    leaks = LOG_WATCH.leaks()
    assert not leaks, f"{len(leaks)} secret(s) in the logs, e.g. {leaks[0][1][:500]!r}"


@pytest.fixture(autouse=True)
def _own_data_directory(tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any) -> None:
    # The CLI's default stores (sessions.db, the demo's demo.db) live in the data
    # directory: each test gets its own, so no test reads another's (or the user's) store.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    # The CLI configures logging for its process; in-process CLI tests must not leave
    # later tests logging to a stream pytest has closed.
    yield
    quiet_logging()


def _need_postgres() -> None:
    problem = postgres_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests, but {problem}")
        pytest.skip(problem)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema in the test database (not yet made), dropped afterwards: for tests
    of making, upgrading or restoring a schema; a test that only needs an empty store
    takes ``postgres_store_url``."""
    _need_postgres()
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield schema_url(schema)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[SchemaPool]:
    pool = SchemaPool(POSTGRES_URL, STORE_OPTIONS)
    yield pool
    pool.close()


@pytest.fixture
def postgres_store_url(postgres_schemas: SchemaPool, monkeypatch: Any) -> Iterator[str]:
    """An empty store's schema, made once per worker and emptied between its tests; one
    the test changed is dropped instead (tests/postgres_schemas.py)."""
    _need_postgres()
    schema = postgres_schemas.take()
    # Every connection the test opens carries the schema's name: the pool reuses the
    # schema only when none is left open.
    monkeypatch.setenv("PGAPPNAME", SchemaPool.application_name(schema))
    yield postgres_schemas.url(schema)
    postgres_schemas.give_back(schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return str(request.getfixturevalue("postgres_store_url"))


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=START)


@pytest.fixture
def config() -> GatewayConfig:
    # The tests that use this shared config were written before visibility scopes
    # (decision 28): they run with the scope every session had then (tests/scopes.py).
    # Scope tests set their own.
    return GatewayConfig.load(before_scopes())


@pytest.fixture
async def gateway(
    store_url: str, clock: VirtualClock, config: GatewayConfig
) -> AsyncIterator[Gateway]:
    gw = await Gateway.open(config=config, store=store_url, clock=clock)
    yield gw
    await gw.close()


@pytest.fixture
def event_store(store_url: str, config: GatewayConfig) -> Iterator[EventSourcedStore]:
    """The store alone (no gateway): what the port contract tests drive."""
    opened = open_event_store(store_url, config)
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A source store and an empty one to import into (SQLite, PostgreSQL)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/source.db", f"sqlite:///{tmp_path}/copy.db"
        return
    import psycopg

    source = str(request.getfixturevalue("postgres_url"))
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield source, schema_url(schema)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
