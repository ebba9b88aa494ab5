"""Time and fresh ids: what the gateway reads instead of the wall clock and ``uuid4``."""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from uuid import UUID


class Clock(ABC):
    """All time the gateway sees; tests substitute a virtual clock."""

    @abstractmethod
    def now(self) -> datetime:
        """An aware UTC datetime."""

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""


class SystemClock(Clock):
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
