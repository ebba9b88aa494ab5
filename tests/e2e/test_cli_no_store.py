"""A command that only reads never creates a store where there was none, and a store URL
with an option the store does not take is refused with the ones it does take.

Each case runs through the command line (``main`` in this process, one real process per
kind of failure) on an SQLite file and on a PostgreSQL schema, and checks what is left on
disk or in the server afterwards, not what the code says it did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from command_line import run_in_process, run_process
from postgres_server import POSTGRES_URL, schema_of
from sessionwire import Gateway

READ_ONLY = [
    ("sessions", "list"),
    ("sessions", "history", "main"),
    ("agents", "list"),
    ("audit", "verify"),
    ("audit", "timeline", "main"),
    ("audit", "state", "main", "--at-version", "1"),
    ("audit", "rebuild", "--check"),
    ("runs", "list"),
    ("runs", "show", "run-1"),
    ("events",),
]


def _schema_exists(schema: str) -> bool:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        found = connection.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    return found is not None


@pytest.fixture
def absent_schema(postgres_url: str) -> tuple[str, str]:
    """A schema name nothing has made (``postgres_url`` drops it if something did)."""
    return postgres_url, schema_of(postgres_url)


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_a_read_only_command_on_a_missing_sqlite_file_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    file = tmp_path / "none.db"
    ran = run_in_process("--store", f"sqlite:///{file}", *command)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr == (
        f"sessionwire: no store at {file} (a command that only reads creates none)\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_a_read_only_command_on_a_missing_postgres_schema_creates_none(
    absent_schema: tuple[str, str], command: tuple[str, ...]
) -> None:
    url, schema = absent_schema
    ran = run_in_process("--store", url, *command)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr.startswith("sessionwire: no store at postgresql://")
    assert ran.stderr.count("\n") == 1
    assert not _schema_exists(schema)


def test_the_default_store_is_not_made_by_a_listing(tmp_path: Path) -> None:
    # No --store: the data directory's store, which a first `sessions list` used to make.
    ran = run_process("sessions", "list", env={"XDG_DATA_HOME": str(tmp_path)})
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "no store at" in ran.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_command_that_writes_still_makes_its_store(tmp_path: Path) -> None:
    file = tmp_path / "new.db"
    assert run_in_process("--store", f"sqlite:///{file}", "record", "main", "hi").returncode == 0
    listed = run_in_process("--store", f"sqlite:///{file}", "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "1 session(s)" in listed.stdout


@pytest.mark.parametrize(
    ("options", "unknown"),
    [("bogus=1", "'bogus'"), ("lease_second=5", "'lease_second'"), ("x=1&y=2", "'x', 'y'")],
)
def test_an_unknown_postgres_url_option_is_refused_naming_the_known_ones(
    absent_schema: tuple[str, str], options: str, unknown: str
) -> None:
    url, schema = absent_schema
    ran = run_in_process("--store", f"{url}&{options}", "record", "main", "hi")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert unknown in ran.stderr
    known = "the options this store takes: schema, lease_seconds, upgrade, distribution"
    assert known in ran.stderr
    assert not _schema_exists(schema)


def test_an_sqlite_url_takes_no_options(tmp_path: Path) -> None:
    ran = run_process("--store", f"sqlite:///{tmp_path}/s.db?mode=ro", "record", "main", "hi")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr == (
        "sessionwire: unknown store URL option 'mode'; the options this store takes: none\n"
    )
    assert list(tmp_path.iterdir()) == []


async def test_the_library_refuses_an_unknown_option_too(
    absent_schema: tuple[str, str],
) -> None:
    from sessionwire.adapters.store.event_store import StoreURLError

    url, schema = absent_schema
    with pytest.raises(StoreURLError, match=r"'lease_second'.*schema, lease_seconds, upgrade"):
        await Gateway.open(store=f"{url}&lease_second=5")
    assert not _schema_exists(schema)
