"""A fresh, empty store for each simulation run, removed afterwards."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sessionwire.domain.errors import SessionwireError

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


class StoreSpecError(SessionwireError, ValueError):
    pass


class FreshStores(ABC):
    """Where simulation runs keep their events: one new store per run."""

    name: str
    can_reopen: bool
    """A crashed gateway can be reopened on the same store (not memory)."""

    @abstractmethod
    @contextmanager
    def fresh(self) -> Iterator[str]:
        """The URL of a new, empty store, removed when the run is done."""

    def close(self) -> None:  # noqa: B027  (most kinds leave nothing behind)
        """Remove whatever the runs left (a temporary directory)."""


class MemoryStores(FreshStores):
    name = "memory"
    can_reopen = False

    @contextmanager
    def fresh(self) -> Iterator[str]:
        yield "memory"


class SQLiteStores(FreshStores):
    name = "sqlite"
    can_reopen = True

    def __init__(self, directory: Path | None = None) -> None:
        self._owned = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="sessionwire-sim-"))
        if not self.directory.is_dir():
            raise StoreSpecError(f"directory {self.directory} does not exist")

    @contextmanager
    def fresh(self) -> Iterator[str]:
        path = self.directory / f"sim-{uuid.uuid4().hex[:12]}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)


class PostgresStores(FreshStores):
    name = "postgres"
    can_reopen = True

    def __init__(self, url: str = DEFAULT_POSTGRES) -> None:
        parts = urlsplit(url)
        self.url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        """The server, as psycopg connects to it."""
        # The URL's store options (``distribution=citus``) go to every run's store; its
        # schema does not: each run gets a new one.
        options = [
            (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "schema"
        ]
        self.options = urlencode(options)

    @contextmanager
    def fresh(self) -> Iterator[str]:
        import psycopg

        schema = f"sim_{uuid.uuid4().hex[:16]}"
        try:
            yield f"{self.url}?schema={schema}" + (f"&{self.options}" if self.options else "")
        finally:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def fresh_stores(spec: str) -> FreshStores:
    """``memory``, ``sqlite`` (a temporary directory), ``sqlite:///DIR``, ``postgres``
    (the local test database) or a ``postgresql://`` URL (a new schema per run)."""
    if spec == "memory":
        return MemoryStores()
    if spec == "sqlite":
        return SQLiteStores()
    if spec.startswith("sqlite:///"):
        return SQLiteStores(Path("/" + spec[len("sqlite:///") :].lstrip("/")))
    if spec in ("postgres", "postgresql"):
        return PostgresStores()
    if spec.startswith(("postgresql://", "postgres://")):
        return PostgresStores(spec)
    raise StoreSpecError(
        f"unknown store {spec!r}: use memory, sqlite, sqlite:///DIR, postgres or a "
        "postgresql://user@host:port/db URL"
    )


__all__ = ["FreshStores", "StoreSpecError", "fresh_stores"]
