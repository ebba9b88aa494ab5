"""The SessionLocks port's contract: a session's lock is taken and given back, can be
taken again, and never holds up another session.

Only a store that several gateway processes write needs the lock: PostgreSQL. Memory
and SQLite have one writer (an SQLite file's writer holds it alone, decision 20), so
their lock is the port's no-op and these tests could not fail there: they are reported
as not applying, not counted as passes.

(That PostgreSQL's lock also excludes other processes: test_session_lock_postgres.py.)
"""

from __future__ import annotations

import asyncio

import pytest
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.ports.session_locks import SessionLocks

ONE_WRITER = {"memory": "memory", "sqlite": "SQLite"}

on_stores_with_a_lock = pytest.mark.parametrize(
    "store_url",
    [
        *(
            pytest.param(
                store, marks=pytest.mark.skip(reason=f"does not apply: {name} has one writer")
            )
            for store, name in ONE_WRITER.items()
        ),
        "postgres",
    ],
    indirect=True,
)


@on_stores_with_a_lock
async def test_a_lock_is_released_and_taken_again(event_store: SessionLocks) -> None:
    for _ in range(2):
        async with event_store.session_lock("agent:main:a"):
            pass


@on_stores_with_a_lock
async def test_sessions_lock_independently(event_store: SessionLocks) -> None:
    async with event_store.session_lock("agent:main:a"):
        # B's lock is taken while A's is held: the wait ends the moment it is; the
        # deadline only turns a hang into a failure.
        await asyncio.wait_for(_hold_and_release(event_store, "agent:main:b"), 30)


async def _hold_and_release(locks: SessionLocks, key: str) -> None:
    async with locks.session_lock(key):
        pass


@pytest.mark.parametrize("store_url", list(ONE_WRITER), indirect=True)
def test_a_store_with_one_writer_has_no_lock_of_its_own(event_store: EventSourcedStore) -> None:
    # Why the tests above do not apply here: should such a store take a real lock one
    # day, this fails and they must run on it too.
    assert type(event_store.backend).session_lock is SessionLocks.session_lock
