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
        # B's lock is taken while A's is held: the wait ends the moment it is; the
        # deadline only turns a hang into a failure.
        await asyncio.wait_for(_hold_and_release(event_store, "agent:main:b"), 30)


async def _hold_and_release(locks: SessionLocks, key: str) -> None:
    async with locks.session_lock(key):
        pass
