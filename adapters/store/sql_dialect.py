"""What differs between the SQL engines a store runs on, as one value per backend.

The read models (``read_models.py``) and the hash chain (``chain.py``) send the same
statements to SQLite and PostgreSQL. What each engine spells its own way is here, and
each backend module builds its one dialect (``sqlite.py``'s ``sqlite_dialect``,
``postgres.py``'s ``postgres_dialect``): nothing else in the store asks which engine it
is on (ADR 0044).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class SqlDialect:
    """How one engine names the store's tables, passes its values and spells the few
    expressions that differ."""

    marker: str
    """The parameter marker (``?``, ``%s``)."""
    prefix: str
    """What qualifies the read-model tables' names (a PostgreSQL schema: ``"s".``)."""
    events: str
    """The events table, qualified."""
    position: str
    """The events' log position column (SQLite: the implicit rowid)."""
    chain: str
    checkpoints: str
    serial_key: str
    """An id column numbered by the database."""
    id_type: str
    """The chain's originator id column type (the events table's own)."""
    blob_type: str
    key_type: str
    to_db_id: Callable[[UUID], Any]
    """A stream id as the events table holds it (SQLite: hex text; PostgreSQL: uuid)."""
    from_db_id: Callable[[Any], UUID]
    line: str
    """A storage-v3 message row's transcript line sliced from its stored bytes (ADR
    0036), as the column ``line``."""
    write_options: dict[str, Any]
    """Keywords for every write (psycopg: ``prepare``, see PostgresSessionRecorder)."""
    xact_column: str | None = None
    """PostgreSQL: the writing transaction's id on every chain row."""
    final: str | None = None
    """PostgreSQL: the query for the bound below which unsealed rows are final (no
    transaction that could still commit one before them is in flight)."""
    shard_join: str = ""
    """A store distributed by session (Citus, ADR 0051): what a join of two event or chain
    rows of one stream adds (``{a}`` and ``{b}``, the two sides' names), so that it joins
    on the distribution column and stays within a shard."""
    text_of: Callable[[str], str] = lambda blob: f"CAST({blob} AS TEXT)"
    """An expression reading the UTF-8 bytes ``blob`` (an SQL expression) as text."""
    byte_length: Callable[[str], str] = lambda text: f"length(CAST({text} AS BLOB))"
    """An expression giving the length in UTF-8 bytes of the text ``text``."""
    joined: Callable[[str, str], str] = lambda text, order: f"group_concat({text}, ',')"
    """An aggregate joining the texts ``text`` with commas, in the order of ``order``
    when ``joined_in_order`` (SQLite: in the order its subquery gives the rows; it takes
    no ORDER BY there before 3.44)."""
    joined_in_order: bool = False
    """``joined`` orders the texts itself (else the rows come to it in order)."""
    keyed_table: str = ""
    """What a table whose primary key is all its lookups adds to its definition (SQLite:
    ``WITHOUT ROWID``, the rows stored in the key's b-tree)."""
    history_columns: Callable[[str, bytes], tuple[str | None, int | None, int | None]] | None = None
    """Storage v3 (ADR 0036): an inserted record's (role, body, provenance) history
    columns, from its topic and bytes."""


def as_uuid(value: Any) -> UUID:
    """A stream id as either engine's driver returns it."""
    return value if isinstance(value, UUID) else UUID(str(value))


def same_shard(dialect: SqlDialect, a: str, b: str) -> str:
    """``dialect.shard_join`` for the sides ``a`` and ``b`` (nothing on an undistributed
    store)."""
    return dialect.shard_join.format(a=a, b=b) if dialect.shard_join else ""
