"""libpq's protocol trace of a PostgreSQL store's connections, to count what a save sends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from psycopg import pq
from sessionwire.adapters.store.event_store import EventSourcedStore


@contextmanager
def traced(store: EventSourcedStore, path: Path) -> Iterator[None]:
    """libpq's protocol trace of every connection the store takes from its pool."""
    datastore: Any = store.datastore
    original = datastore.get_connection

    @contextmanager
    def tracing() -> Iterator[Any]:
        with original() as conn, path.open("a") as out:
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            try:
                yield conn
            finally:
                conn.pgconn.untrace()

    datastore.get_connection = tracing
    try:
        yield
    finally:
        datastore.get_connection = original


def sent(path: Path, message: str) -> int:
    """How many times the client sent this protocol message."""
    return sum(
        1 for line in path.read_text().splitlines() if line.split("\t")[:3:2] == ["F", message]
    )
