"""Files that hold sessions or secrets are their owner's only (issue 16, finding 9).

A new SQLite store is 0600 (its -wal and -shm files follow it) in a 0700 directory the
CLI creates; an audit export is 0600; a tokens file others can read is refused.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sessionwire import Gateway
from sessionwire.adapters.access.tokens import TokenFileError, TokenSet
from sessionwire.adapters.cli.context import make_parent
from sessionwire.adapters.cli.main import main


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> object:
    # The leak showed with the usual umask 022; 000 makes sure we do not rely on one.
    old = os.umask(0)
    yield
    os.umask(old)


async def test_a_new_sqlite_store_is_0600_and_its_directory_0700(tmp_path: Path) -> None:
    store = tmp_path / "data" / "sessionwire" / "sessions.db"
    make_parent(f"sqlite:///{store}")
    gateway = await Gateway.open(store=f"sqlite:///{store}")
    try:
        await gateway.record_message("main", role="user", content="private")
        assert mode(store.parent) == 0o700
        assert mode(store) == 0o600
        for companion in store.parent.glob("sessions.db-*"):
            assert mode(companion) == 0o600, companion
    finally:
        await gateway.close()


def test_an_audit_export_is_0600(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    out = tmp_path / "export.jsonl"
    assert main(["--store", store, "record", "main", "hi"]) == 0
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionwire.adapters.cli.main",
            "--store",
            store,
            "audit",
            "export",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert mode(out) == 0o600


def test_a_tokens_file_others_can_read_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n  - {token: abcdefghijklmnopqrstuvwxyz0123456789, role: operator}\n"
    )
    tokens.chmod(0o644)
    with pytest.raises(TokenFileError) as refused:
        TokenSet.from_file(tokens)
    assert "chmod 600" in str(refused.value)
    tokens.chmod(0o600)
    assert TokenSet.from_file(tokens).shortest_clear == 36
