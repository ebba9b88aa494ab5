"""Which backend serves a store URL: a table of data, not imports.

The store (``event_store.py``) is what the backends build on, so it must not import them
(import-linter's acyclic_siblings contract keeps the store package free of cycles, ADR 0037).
As eventsourcing names its persistence module by topic, each backend is named here by
``module:Class`` and the store resolves only the one a URL picks: a SQLite store never
loads the PostgreSQL driver.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendEntry:
    """A backend class (by topic) and the store URLs it serves."""

    topic: str
    names: tuple[str, ...] = ()
    """URLs it serves as written (``memory``)."""
    prefixes: tuple[str, ...] = ()
    """URL beginnings it serves (``sqlite:``)."""

    def serves(self, url: str) -> bool:
        return url in self.names or url.startswith(self.prefixes)


BACKENDS: tuple[BackendEntry, ...] = (
    BackendEntry(
        "sessionwire.adapters.store.sqlite:SQLiteBackend", names=("memory",), prefixes=("sqlite:",)
    ),
    BackendEntry(
        "sessionwire.adapters.store.postgres:PostgresBackend",
        prefixes=("postgresql://", "postgres://"),
    ),
)


def backend_topic(url: str) -> str | None:
    """The topic of the backend class that serves ``url``; None if no backend does."""
    return next((entry.topic for entry in BACKENDS if entry.serves(url)), None)
