"""Fresh stores for the runs and spawns benchmarks: an SQLite file or a PostgreSQL schema."""

from __future__ import annotations

import uuid
from pathlib import Path

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def store_url(kind: str, workdir: Path) -> tuple[str, str | None]:
    """A new store of ``kind`` and the schema to drop afterwards (None for SQLite)."""
    if kind == "sqlite":
        return f"sqlite:///{workdir}/bench-{uuid.uuid4().hex[:8]}.db", None
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    return f"{POSTGRES}?schema={schema}", schema


def drop_schema(schema: str | None) -> None:
    if schema is None:
        return
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
