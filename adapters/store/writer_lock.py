"""One writer per SQLite file (contract §6 decision 20).

A gateway that carries on a store's work holds an exclusive ``flock`` on a file beside the
database (``<file>.writer``) for as long as it is open, and writes into it who holds it.
The operating system drops the lock when the holder's process ends, however it ends, so a
stale lock of a dead process is simply taken over. Readers (lists, histories, audits) take
no lock and work beside the writer.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from sessionwire.application.ports.store import StoreInUse

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock (documented)
    fcntl = None  # type: ignore[assignment]


class SQLiteWriterLock:
    """The writer's lock on one SQLite file, taken by ``acquire`` and kept until ``release``."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".writer")
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Does this store hold the lock now?"""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise StoreInUse naming the live holder."""
        if fcntl is None or self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreInUse(
                f"SQLite store {self.database} is held by another gateway ({holder}); "
                "one writer per SQLite file: stop that gateway first, use a command that "
                "only reads (lists, histories, audits), or use PostgreSQL for several "
                "writers"
            ) from None
        # Ours now (a dead holder's record, if any, is overwritten).
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        # The file stays: removing it would let one process lock the removed file while
        # another creates and locks a new one.
        fd, self._fd = self._fd, None
        if fd is None or fcntl is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing drops the flock


def _read_holder(fd: int) -> str:
    try:
        raw = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        raw = {}
    if not isinstance(raw, dict) or "pid" not in raw:
        return "holder unknown: it has not recorded itself yet"
    return f"pid {raw.get('pid')} on host {raw.get('host')}, since {raw.get('since')}"


__all__ = ["SQLiteWriterLock"]
