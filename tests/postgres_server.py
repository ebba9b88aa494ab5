"""The PostgreSQL server the tests use, and whether it can be reached.

``SESSIONWIRE_TEST_POSTGRES`` names the server, and may carry store options in its query
(``postgresql://postgres@127.0.0.1:26432/postgres?distribution=citus``: CI's run on a
Citus cluster). The tests connect to ``POSTGRES_URL``, the server without them (libpq
knows no such option), and make every store URL with ``schema_url``, which adds them.

A plain module (not conftest) so test files import it by name under any way of running
pytest: pyproject's ``pythonpath`` puts ``tests/`` on the import path.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs, urlsplit, urlunsplit

_GIVEN = urlsplit(
    os.environ.get("SESSIONWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
)

POSTGRES_URL = urlunsplit((_GIVEN.scheme, _GIVEN.netloc, _GIVEN.path, "", ""))
"""The server, as psycopg connects to it."""

STORE_OPTIONS = _GIVEN.query
"""The store options every store URL of the tests carries (``distribution=citus``), or ''."""

ON_CITUS = "distribution=citus" in STORE_OPTIONS.split("&")
"""The tests run on a Citus cluster with every per-session table distributed (CI's second
run of the PostgreSQL tier): a test whose PostgreSQL expectation differs there asks this."""

POSTGRES_STORES = f"{POSTGRES_URL}?{STORE_OPTIONS}" if STORE_OPTIONS else POSTGRES_URL
"""The server with the store options: what ``fresh_stores`` (a schema per seed) takes."""


def schema_url(schema: str, *options: str) -> str:
    """The store URL of ``schema`` on the test server, with the store options and
    ``options`` (``"lease_seconds=2"``)."""
    query = "&".join([f"schema={schema}", *filter(None, (STORE_OPTIONS, *options))])
    return f"{POSTGRES_URL}?{query}"


def schema_of(url: str) -> str:
    """The schema a store URL names (``schema=…``), whatever options come after it (on
    Citus ``&distribution=citus``, which a split on ``schema=`` would keep)."""
    return parse_qs(urlsplit(url).query)["schema"][0]


def _postgres_problem() -> str | None:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            return None
    except Exception as error:  # any failure means: no usable server here
        return f"no PostgreSQL server at {POSTGRES_URL}: {error}"


_PG_PROBLEM: list[str | None] = []


def postgres_problem() -> str | None:
    """Why PostgreSQL tests cannot run here, or None; asked once per test process."""
    if not _PG_PROBLEM:
        _PG_PROBLEM.append(_postgres_problem())
    return _PG_PROBLEM[0]
