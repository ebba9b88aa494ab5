"""Time and fresh ids: what the gateway reads instead of the wall clock and ``uuid4``."""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Protocol
from uuid import UUID


class InFlightWork(Protocol):
    """A gateway's registry of in-flight work, as a clock sees it."""

    def idle(self) -> bool:
        """No work runnable before the clock's next due time."""

    async def wait_idle(self) -> None:
        """Return once ``idle()``."""

    def clock_wait(self, due: datetime) -> AbstractContextManager[None]:
        """Count the current task's work (if it is one) as waiting on the clock."""


class Clock(ABC):
    """All time the gateway sees; tests substitute a virtual clock."""

    @abstractmethod
    def now(self) -> datetime:
        """An aware UTC datetime."""

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""

    @property
    def moves_by_itself(self) -> bool:
        """Whether time passes without anyone moving it (a real clock; the default).

        A clock that only moves when told (a test's virtual clock) says False: then a
        gateway's ``wait_idle`` treats work waiting on it as settled.
        """
        return True

    # Not abstract: a clock that moves by itself has nothing to settle.
    def attach(self, work: InFlightWork) -> None:  # noqa: B027
        """A gateway opened on this clock: its work settles when the clock is moved.

        Only a clock that is moved by hand needs it (the default ignores it).
        """

    def detach(self, work: InFlightWork) -> None:  # noqa: B027
        """The gateway attached with ``work`` is closed."""


class SystemClock(Clock):
    @property
    def moves_by_itself(self) -> bool:
        return True

    def now(self) -> datetime:
        return datetime.now(tz=UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class IdSource(ABC):
    @abstractmethod
    def new_id(self) -> UUID:
        """A fresh random id (sessionIds, runIds)."""


class RandomIds(IdSource):
    def new_id(self) -> UUID:
        return uuid.uuid4()
