"""Session locks: one run at a time per session, across every gateway on the store.

On a store several gateway processes share (PostgreSQL) the lock is a lease: claimed for
a while, renewed while its holder lives, and taken by another gateway once it expired;
its holder's saves carry a fencing token, so a late save of a holder that lost it is
refused (``LeaseLost``) rather than written beside the new holder's (contract decision 24).
"""

from __future__ import annotations

from abc import ABC
from contextlib import AbstractAsyncContextManager

from sessionwire.domain.errors import SessionwireError


class LeaseLost(SessionwireError, RuntimeError):
    """A save made under a session's lease that another gateway has claimed since (the
    lease expired: this gateway was taken for dead). Nothing of the save was written."""


class _NoLock(AbstractAsyncContextManager[None]):
    async def __aexit__(self, *_: object) -> None:
        return None


_NO_LOCK = _NoLock()


# No abstract method: a store that only one process uses needs no lock (the default).
class SessionLocks(ABC):  # noqa: B024
    lease_seconds: float | None = None
    """How long a lease outlives its holder's last renewal; None: no leases (a store
    that one process uses, whose lock ends with that process)."""
    takeover_check_seconds: float | None = None
    """How often a live gateway asks for dead ones (``take_over_dead_gateways``): a store
    that tells a dead process at once (ADR 0049) is asked more often than its leases
    expire; None: no other gateway to take over."""

    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]:
        """Held while a run executes in session ``key``.

        Within one process the session's actor already runs one run at a time; a store
        shared by several gateway processes makes this lock span them.
        """
        return _NO_LOCK

    async def take_over_dead_gateways(self) -> list[str]:
        """The gateways whose heartbeat expired, each taken over by exactly one caller:
        whoever gets an id resumes the store's pending work (their runs included). A
        store that one process uses has no other gateway to take over."""
        return []
