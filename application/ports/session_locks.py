"""Session locks: one run at a time per session, across every gateway on the store."""

from __future__ import annotations

from abc import ABC
from contextlib import AbstractAsyncContextManager


class _NoLock(AbstractAsyncContextManager[None]):
    async def __aexit__(self, *_: object) -> None:
        return None


_NO_LOCK = _NoLock()


# No abstract method: a store that only one process uses needs no lock (the default).
class SessionLocks(ABC):  # noqa: B024
    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]:
        """Held while a run executes in session ``key``.

        Within one process the session's actor already runs one run at a time; a store
        shared by several gateway processes makes this lock span them.
        """
        return _NO_LOCK

    async def take_over_dead_gateways(self) -> list[str]:
        """Gateways sharing the store whose lease expired, taken over by this one (their
        pending work is then this gateway's to resume); none where one process writes."""
        return []
