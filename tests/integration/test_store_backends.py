"""The store picks its backend module from the URL, and loads only that module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from eventsourcing.utils import resolve_topic
from sessionwire.adapters.store.backends import BACKENDS, backend_entry
from sessionwire.adapters.store.event_store import EventSourcedStore, StoreBackend, StoreURLError

OPEN_SQLITE_STORE = """
import sys
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store

store = open_event_store(sys.argv[1], GatewayConfig())
store.close()
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "psycopg")
loaded += [name for name in sys.modules if name.endswith("store.postgres")]
print(",".join(loaded))
"""


def test_each_store_url_opens_its_backend(event_store: EventSourcedStore, store_url: str) -> None:
    expected = "PostgresBackend" if store_url.startswith("postgresql:") else "SQLiteBackend"
    assert type(event_store.backend).__name__ == expected
    assert event_store.location == event_store.backend.location


@pytest.mark.parametrize("url", ["mysql://db", "sqlite:", "postgresql://host", "file.db"])
def test_a_url_no_backend_takes_is_refused_with_the_accepted_forms(url: str) -> None:
    with pytest.raises(StoreURLError, match=r"sqlite:///path/to/file\.db|postgresql://user@host"):
        EventSourcedStore(url, kind_of=lambda state: "other")


@pytest.mark.parametrize("url", ["memory", "sqlite"])
def test_a_sqlite_store_loads_no_postgresql_driver(url: str, tmp_path: Path) -> None:
    store = "memory" if url == "memory" else f"sqlite:///{tmp_path}/s.db"
    done = subprocess.run(
        [sys.executable, "-c", OPEN_SQLITE_STORE, store],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.strip() == ""


def test_each_backend_the_table_names_is_a_store_backend() -> None:
    # The store resolves backends by topic (no import, ADR 0037): a misspelt topic would
    # only fail when that store is opened, so the table is checked here.
    for entry in BACKENDS:
        backend = resolve_topic(entry.topic)
        assert isinstance(backend, type)
        assert issubclass(backend, StoreBackend)

    def topic(url: str) -> str | None:
        entry = backend_entry(url)
        return entry.topic if entry else None

    assert topic("memory") == "sessionwire.adapters.store.sqlite:SQLiteBackend"
    assert topic("postgres://h/db") == "sessionwire.adapters.store.postgres:PostgresBackend"
    assert topic("memory:") is None
