"""The work queue: runs, exchanges and spawns by id, and those still pending."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar
from uuid import UUID

from pydantic import BaseModel
from sessionwire.domain.base import Aggregate

A = TypeVar("A", bound=Aggregate)


@dataclass(frozen=True)
class StoredWork:
    """A run, an exchange or a spawn as its row holds it."""

    id: UUID
    kind: str
    version: int
    created_on: datetime
    modified_on: datetime
    state_json: str

    def to_aggregate(self, cls: type[A], state_class: type[BaseModel]) -> A:
        return cls.from_state(
            id=self.id,
            version=self.version,
            state=state_class.model_validate_json(self.state_json),
            created_on=self.created_on,
            modified_on=self.modified_on,
        )


class WorkQueue(ABC):
    @abstractmethod
    def work(self, aggregate_id: UUID) -> StoredWork | None:
        """The run, exchange or spawn with this id."""

    @abstractmethod
    def pending_work(
        self, kind: str, statuses: Sequence[str], *, session_key: str | None = None
    ) -> list[StoredWork]:
        """Work of one kind in one of ``statuses``, in the order it was created; with
        ``session_key``, only the work of that session (a run's, a spawn's child, an
        exchange's target)."""

    @abstractmethod
    def recent_work(
        self, kind: str, *, limit: int, status: str | None = None, before: int | None = None
    ) -> list[tuple[int, StoredWork]]:
        """Work of one kind, newest first, each with its creation position; ``before``
        pages on from a position (keyset)."""
