"""Store URL mistakes are one clear line and exit 2, and nothing is created by accident
(issue 16, finding 11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.store.event_store import StoreURLError, backend_for


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def assert_one_line(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("sessionwire: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("url", ["sqlite:relative.db", "sqlite://relative.db"])
def test_a_relative_sqlite_path_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = run(capsys, "--store", url, "sessions", "list")
    assert code == 2
    assert_one_line(err)
    assert "relative path" in err
    assert f"sqlite:///{str(tmp_path).lstrip('/')}/relative.db" in err
    assert os.listdir(tmp_path) == []


def test_three_slashes_and_a_bare_name_is_not_quietly_made_at_the_root(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = run(capsys, "--store", "sqlite:///sw-relative-test.db", "sessions", "list")
    assert code == 2
    assert_one_line(err)
    assert "filesystem root" in err
    assert not Path("/sw-relative-test.db").exists()


def test_a_missing_directory_is_an_error_without_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/typo/sessions.db"
    code, err = run(capsys, "--store", url, "record", "main", "hi")
    assert code == 2
    assert_one_line(err)
    assert "does not exist" in err
    assert "--create" in err
    assert not (tmp_path / "typo").exists()
    assert main(["--store", url, "--create", "record", "main", "hi"]) == 0
    assert (tmp_path / "typo" / "sessions.db").exists()


def test_the_default_store_makes_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SESSIONWIRE_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["record", "main", "hi"]) == 0
    assert (tmp_path / "data" / "sessionwire" / "sessions.db").exists()


def test_an_unreachable_postgres_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 9 (discard) on loopback: nothing listens there, the connection is refused at once.
    code, err = run(capsys, "--store", "postgresql://postgres@127.0.0.1:9/test", "sessions", "list")
    assert code == 2
    assert_one_line(err)
    assert "cannot open PostgreSQL store 127.0.0.1:9/test" in err


@pytest.mark.postgres
def test_a_missing_postgres_database_is_one_line(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server = postgres_url.split("?")[0].rsplit("/", 1)[0]
    code, err = run(capsys, "--store", f"{server}/sw_no_such_db", "sessions", "list")
    assert code == 2
    assert_one_line(err)
    assert 'database "sw_no_such_db" does not exist' in err


def test_gateway_open_refuses_a_relative_path_too() -> None:
    with pytest.raises(StoreURLError, match="relative path"):
        backend_for("sqlite:relative.db")
