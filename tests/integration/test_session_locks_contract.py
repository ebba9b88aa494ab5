"""The SessionLocks port's contract, on every store: a session's lock is taken and given
back, can be taken again, and never holds up another session.

(That PostgreSQL's lock also excludes other processes: test_session_lock_postgres.py.)
"""

from __future__ import annotations

import asyncio

from sessionwire.application.ports.session_locks import SessionLocks


async def test_a_lock_is_released_and_taken_again(event_store: SessionLocks) -> None:
    for _ in range(2):
        async with event_store.session_lock("agent:main:a"):
            pass


async def test_sessions_lock_independently(event_store: SessionLocks) -> None:
    async with event_store.session_lock("agent:main:a"):
        # Taken within a bounded number of loop turns, not a wall-clock wait.
        other = asyncio.ensure_future(_hold_and_release(event_store, "agent:main:b"))
        for _ in range(10_000):
            if other.done():
                break
            await asyncio.sleep(0)
        assert other.done()
        other.result()


async def _hold_and_release(locks: SessionLocks, key: str) -> None:
    async with locks.session_lock(key):
        pass
