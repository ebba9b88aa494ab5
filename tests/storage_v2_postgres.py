"""The real v2 PostgreSQL store (``tests/fixtures/storage_v2/v2_demo_postgres.sql``,
written by the v2 code: its README and ``make_postgres_v2.py`` say how), loaded into a
schema of a test's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
from postgres_server import schema_of

V2 = Path(__file__).resolve().parent / "fixtures" / "storage_v2"
DUMP_SCHEMA = "sw_v2_fixture"
V2_PG_EVENTS = 65


def load_v2_dump(url: str) -> None:
    """The dump, its schema renamed to the URL's (which must not exist yet)."""
    schema = schema_of(url)
    # psql's meta-commands (pg_dump's \\restrict guard) are psql's, not SQL.
    lines = (V2 / "v2_demo_postgres.sql").read_text().splitlines()
    text = "\n".join(line for line in lines if not line.startswith("\\"))
    # The dump names its schema bare (sw_v2_fixture.x) and quoted inside function bodies.
    text = text.replace(f'"{DUMP_SCHEMA}"', f'"{schema}"').replace(DUMP_SCHEMA, f'"{schema}"')
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        connection.execute(text.encode())


def golden(name: str) -> Any:
    """What the v2 code printed for the store (``golden_verify_postgres.json``,
    ``golden_postgres_<name>.json``)."""
    file = "golden_verify_postgres.json" if name == "verify" else f"golden_postgres_{name}.json"
    return json.loads((V2 / file).read_text())
