"""``?distribution=`` in a PostgreSQL store URL (contract decision 39, ADR 0051): a value
it does not know, and ``citus`` on a server without Citus, are refused in one line before
anything is made; ``none`` is today's local tables. On plain PostgreSQL (the Citus tier
runs the store's own tests with ``distribution=citus``)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from citus_cluster import local_url
from command_line import run_in_process
from postgres_server import POSTGRES_URL
from sessionwire.adapters.store.event_store import StoreURLError, backend_for


def _schema_exists(schema: str) -> bool:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        found = connection.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone()
    return found is not None


def _has_citus() -> bool:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        found = connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
        return found.fetchone() is not None


def test_an_unknown_distribution_is_refused_naming_the_known_ones(postgres_url: str) -> None:
    # The URL without the Citus tier's own option (tests/postgres_server.py).
    with pytest.raises(
        StoreURLError,
        match="distribution 'citrus' is not one this store knows; use 'none' or 'citus'",
    ):
        backend_for(f"{local_url(postgres_url)}&distribution=citrus")


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ("distribution=citus&distribution=none", "'distribution' ('citus', 'none')"),
        ("distribution=none&distribution=none", "'distribution' ('none', 'none')"),
        (
            "upgrade=yes&distribution=none&upgrade=no&distribution=citus",
            "options given more than once: 'upgrade' ('yes', 'no'); "
            "'distribution' ('none', 'citus')",
        ),
    ],
)
def test_an_option_given_twice_is_refused_naming_its_values(
    postgres_url: str, options: str, refusal: str
) -> None:
    # Read once, the other value would silently do nothing: which one, the user cannot
    # tell. Refused before anything is made.
    url = f"{local_url(postgres_url)}&{options}"
    with pytest.raises(StoreURLError, match="given more than once") as refused:
        backend_for(url)
    assert refusal in str(refused.value)
    assert str(refused.value).endswith("; give each once")
    ran = run_in_process("--store", url, "record", "main", "hi")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert refusal in ran.stderr
    assert not _schema_exists(parse_qs(urlsplit(postgres_url).query)["schema"][0])


def test_citus_on_a_server_without_it_is_refused_and_makes_nothing(postgres_url: str) -> None:
    if _has_citus():
        pytest.skip("this server has Citus")
    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    ran = run_in_process("--store", f"{postgres_url}&distribution=citus", "record", "main", "hi")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert "distribution=citus, but the server at" in ran.stderr
    assert "has no Citus extension in this database" in ran.stderr
    assert not _schema_exists(schema)


def test_none_is_the_local_tables(postgres_url: str) -> None:
    postgres_url = local_url(postgres_url)  # without the Citus tier's own option
    ran = run_in_process("--store", f"{postgres_url}&distribution=none", "record", "main", "hi")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    listed = run_in_process("--store", postgres_url, "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "1 session(s)" in listed.stdout
