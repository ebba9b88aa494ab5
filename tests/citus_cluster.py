"""What the Citus tier's tests share: whether the test server is a Citus coordinator,
and a store URL on it with its tables distributed (``distribution=citus``) or left
local."""

from __future__ import annotations

import psycopg
import pytest
from postgres_server import POSTGRES_URL

EVENTS = "sessionwire_events"


def is_coordinator() -> bool:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        if connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            found = connection.execute("SELECT citus_is_coordinator()").fetchone()
            return found is not None and bool(found[0])
    return False


def local_url(url: str) -> str:
    """``url`` without ``distribution=citus``: its tables left local."""
    return url.replace("&distribution=citus", "")


def distributed_url(postgres_url: str) -> str:
    """``postgres_url`` with its tables distributed; the test is skipped when the server
    is not a Citus coordinator (the Citus tier's server URL carries the option itself,
    tests/postgres_server.py)."""
    if not is_coordinator():
        pytest.skip("the test server is not a Citus coordinator")
    return f"{local_url(postgres_url)}&distribution=citus"
