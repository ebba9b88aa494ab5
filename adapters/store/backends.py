"""Which backend serves a store URL: a table of data, not imports.

The store (``event_store.py``) is what the backends build on, so it must not import them
(import-linter's acyclic_siblings contract keeps the store package free of cycles, ADR 0037).
As eventsourcing names its persistence module by topic, each backend is named here by
``module:Class`` and the store resolves only the one a URL picks: a SQLite store never
loads the PostgreSQL driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class BackendEntry:
    """A backend class (by topic) and the store URLs it serves."""

    topic: str
    names: tuple[str, ...] = ()
    """URLs it serves as written (``memory``)."""
    prefixes: tuple[str, ...] = ()
    """URL beginnings it serves (``sqlite:``)."""
    options: tuple[str, ...] = ()
    """The ``?name=value`` options its URLs take: the one list of them. Any other is
    refused, naming these: a misspelt option (``lease_second=5``) must not silently do
    nothing."""

    def serves(self, url: str) -> bool:
        return url in self.names or url.startswith(self.prefixes)

    def unknown_options(self, url: str) -> list[str]:
        """The options ``url`` gives that this backend does not know, in their order."""
        query = urlsplit(url).query if "?" in url else ""
        names = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
        if query and not names:
            names = [query]  # ``?bogus`` with no ``=``: parse_qsl drops it
        return [name for name in names if name not in self.options]

    def repeated_options(self, url: str) -> dict[str, list[str]]:
        """The options ``url`` gives more than once, each with its values in their order:
        the backend reads one of them, so the others would silently do nothing
        (``…&distribution=citus&distribution=none``)."""
        query = urlsplit(url).query if "?" in url else ""
        given: dict[str, list[str]] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            given.setdefault(name, []).append(value)
        return {name: values for name, values in given.items() if len(values) > 1}


BACKENDS: tuple[BackendEntry, ...] = (
    BackendEntry(
        "sessionwire.adapters.store.sqlite:SQLiteBackend", names=("memory",), prefixes=("sqlite:",)
    ),
    BackendEntry(
        "sessionwire.adapters.store.postgres:PostgresBackend",
        prefixes=("postgresql://", "postgres://"),
        options=("schema", "lease_seconds", "upgrade", "distribution"),
    ),
)


def backend_entry(url: str) -> BackendEntry | None:
    """The entry of the backend that serves ``url``; None if no backend does."""
    return next((entry for entry in BACKENDS if entry.serves(url)), None)
