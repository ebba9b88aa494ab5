"""Faults the simulator injects into a PostgreSQL store: a connection dropped at a save's
COMMIT, and a gateway process killed (``kill -9``) with its leases left behind.

Both are real: the save's transaction is committed on the server (or not) before its
connection closes and ``psycopg.OperationalError`` reaches the recorder, as when the
server or the network drops it; a killed gateway's leases and heartbeat stay in their
tables until they expire, by the database's clock (``expire``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import psycopg
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.postgres_lease import LeaseKeeper


def is_postgres(store: EventSourcedStore) -> bool:
    return hasattr(store.backend, "keeper")


def drop_next_commit(
    store: EventSourcedStore, *, committed: bool, fired: Callable[[], None] = lambda: None
) -> None:
    """The store's next save loses its connection, once, at its COMMIT: after the server
    committed it (``committed``: only the answer is lost), or before (nothing is);
    ``fired`` is told when it happens."""
    recorder: Any = store.recorder
    original = recorder.before_commit

    def dropped(cursor: Any, links: Any) -> None:
        original(cursor, links)  # the save's last statement before its COMMIT
        recorder.before_commit = original  # once: the retry runs as written
        fired()
        connection = cursor.connection
        if committed:
            cursor.execute("COMMIT", prepare=False)
            with connection.pipeline() as pipeline:
                pipeline.sync()  # the server has committed it
        connection.close()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    recorder.before_commit = dropped


def keeper_of(store: EventSourcedStore) -> LeaseKeeper:
    keeper: LeaseKeeper = store.backend.keeper  # type: ignore[attr-defined]
    return keeper


def die_without_goodbye(keeper: LeaseKeeper) -> None:
    """From now on the keeper gives nothing back (a killed process does not): releases
    are dropped, and closing stops its thread and connection without ``release_all``;
    its leases and heartbeat stay until they expire."""

    def release(_lease: Any) -> None:
        return None

    def close() -> None:
        keeper._stopping.set()
        keeper._poke()
        keeper._thread.join()
        keeper.executor.shutdown(wait=True)
        keeper._drop_connection()
        with contextlib.suppress(OSError):
            keeper._wake_reader.close()
            keeper._wake_writer.close()

    keeper.release = release  # type: ignore[method-assign, assignment]
    keeper.close = close  # type: ignore[method-assign]


def expire(url: str, schema: str, owner: str) -> dict[str, int]:
    """The gateway ``owner``'s heartbeat and leases as expired, by the database's clock
    (as the lease would after its time): what a takeover looks for. The fence of each
    session lease it held, by session key."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        expired = connection.execute(
            f'UPDATE "{schema}".sw_session_leases '
            "SET expires_at = clock_timestamp() - interval '1 second' "
            "WHERE owner = %s RETURNING session_key, fence",
            (owner,),
        ).fetchall()
        connection.execute(
            f'UPDATE "{schema}".sw_gateways '
            "SET expires_at = clock_timestamp() - interval '1 second' "
            "WHERE gateway_id = %s",
            (owner,),
        )
    return {str(key): int(fence) for key, fence in expired}


def held_fence(url: str, schema: str, owner: str, key: str) -> int | None:
    """The fence of session ``key``'s lease if ``owner`` holds it now (unexpired), by
    the database."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        row = connection.execute(
            f'SELECT fence FROM "{schema}".sw_session_leases WHERE session_key = %s '
            "AND owner = %s AND expires_at > clock_timestamp()",
            (key, owner),
        ).fetchone()
    return None if row is None else int(row[0])


__all__ = [
    "die_without_goodbye",
    "drop_next_commit",
    "expire",
    "held_fence",
    "is_postgres",
    "keeper_of",
]
