"""Read-model maintenance: rebuilding the read models from the log, and comparing them."""

from __future__ import annotations

from abc import ABC, abstractmethod


class ReadModelMaintenance(ABC):
    @abstractmethod
    def rebuild_read_models(self) -> None:
        """Drop the read models and project them again from the event log."""

    @abstractmethod
    def read_model_snapshot(self) -> dict[str, list[tuple[object, ...]]]:
        """The read models' rows, comparable between a live and a rebuilt store."""
