"""A PostgreSQL server of a test's own, for what the shared one must never undergo
(a restart under load): initdb into a temporary folder, started on a free port.

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres``
user (Debian's packages create it). The binaries come from Debian's layout
(``/usr/lib/postgresql/<version>/bin``) or ``PATH``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def private_postgres_problem() -> str | None:
    """Why a private server cannot be started here, or None."""
    if _bin_dir() is None:
        return "no pg_ctl/initdb (PostgreSQL's server binaries) on this machine"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser (PostgreSQL will not run as root)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivatePostgres:
    def __init__(self, folder: Path) -> None:
        bin_dir = _bin_dir()
        assert bin_dir is not None, private_postgres_problem()
        self._bin = bin_dir
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_server_user(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    def _pg_ctl(self, action: str) -> None:
        # fsync off: a test server; what is tested is the client losing its connections.
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_server_user(
            str(self._bin / "pg_ctl"),
            action,
            "-D",
            str(self.data),
            "-m",
            "fast",
            "-w",
            "-o",
            options,
            "-l",
            str(self.folder / "server.log"),
        )

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._as_server_user(
            str(self._bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        )

    def start(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        self._pg_ctl("stop")

    def restart(self) -> None:
        """What ``pg_ctlcluster … restart`` does: a fast shutdown (every connection
        cut, transactions in flight rolled back), then a start."""
        self._pg_ctl("restart")


@contextmanager
def private_postgres(folder: Path) -> Iterator[PrivatePostgres]:
    server = PrivatePostgres(folder)
    server.init()
    server.start()
    try:
        yield server
    finally:
        server.stop()
