"""``audit rebuild`` in SQL: a second set of read-model tables projected from the log,
compared with the live tables by primary key inside the database (nothing is loaded
into memory), then swapped in or dropped."""

from __future__ import annotations

from sessionwire.adapters.store.read_models import (
    HOT_COLUMNS,
    RUN_ROW_COLUMNS,
    SESSION_COLUMNS,
    WORK_ROW_COLUMNS,
    Cursor,
    SqlReadModel,
)
from sessionwire.application.ports.audit_log import TableDifference

SHADOW = "rebuild_"
EXAMPLES = 5

# table attribute -> (key columns, value columns)
_TABLES: dict[str, tuple[str, list[str], list[str]]] = {
    "sessions": (
        "sessions",
        ["id"],
        [c.strip() for c in SESSION_COLUMNS.split(",") if c.strip() != "id"],
    ),
    "transcript": ("transcript", ["session", "seq"], ["role", "message"]),
    "work": ("work_table", ["id"], [c for c in WORK_ROW_COLUMNS if c != "id"]),
    "session_streams": ("streams_table", ["session_key", "stream_id"], ["kind"]),
    "runs": ("runs_table", ["run_id"], [c for c in RUN_ROW_COLUMNS if c != "run_id"]),
}


def shadow_model(live: SqlReadModel) -> SqlReadModel:
    return SqlReadModel(
        live.dialect,
        kind_of=live.kind_of,
        name_prefix=SHADOW,
        transcript_in_log=live.transcript_in_log,
        session_columns=live.session_columns,
    )


def drop_statements(model: SqlReadModel) -> list[str]:
    return [
        f"DROP TABLE IF EXISTS {table}"
        for table in (
            model.sessions,
            *([] if model.transcript_in_log else [model.transcript]),
            model.work_table,
            model.streams_table,
            model.runs_table,
        )
    ]


def _difference(
    cursor: Cursor, live: str, rebuilt: str, keys: list[str], values: list[str]
) -> TableDifference:
    on = " AND ".join(f"r.{k} = l.{k}" for k in keys)
    key_text = " || '/' || ".join(f"CAST(x.{k} AS TEXT)" for k in keys)
    differs = " OR ".join(f"r.{v} IS DISTINCT FROM l.{v}" for v in values)
    difference = TableDifference()
    for kind, query in (
        ("added", f"FROM {rebuilt} r LEFT JOIN {live} l ON {on} WHERE l.{keys[0]} IS NULL"),
        ("removed", f"FROM {live} l LEFT JOIN {rebuilt} r ON {on} WHERE r.{keys[0]} IS NULL"),
        ("changed", f"FROM {rebuilt} r JOIN {live} l ON {on} WHERE {differs}"),
    ):
        cursor.execute(f"SELECT COUNT(*) AS n {query}")
        count = int(cursor.fetchone()["n"])
        setattr(difference, kind, count)
        if count:
            side = "l" if kind == "removed" else "r"
            cursor.execute(
                f"SELECT {key_text.replace('x.', side + '.')} AS k {query} "
                f"ORDER BY 1 LIMIT {EXAMPLES}"
            )
            difference.examples.extend(f"{kind} {found['k']}" for found in cursor.fetchall())
    return difference


def compare_and_replace(
    cursor: Cursor, live: SqlReadModel, rebuilt: SqlReadModel, *, replace: bool
) -> dict[str, TableDifference]:
    """Differences per table; with ``replace`` the rebuilt rows become the live ones."""
    differences: dict[str, TableDifference] = {}
    for name, (attribute, keys, listed) in _TABLES.items():
        if attribute == "transcript" and live.transcript_in_log:
            continue  # the log's own rows (storage v3): nothing projected to compare
        values = listed
        if attribute == "sessions" and live.session_columns:
            values = [*listed, *HOT_COLUMNS]
        live_table = getattr(live, attribute)
        rebuilt_table = getattr(rebuilt, attribute)
        differences[name] = _difference(cursor, live_table, rebuilt_table, keys, values)
        if replace and differences[name].total:
            columns = ", ".join([*keys, *values])
            cursor.execute(f"DELETE FROM {live_table}")
            cursor.execute(
                f"INSERT INTO {live_table} ({columns}) SELECT {columns} FROM {rebuilt_table}"
            )
            if attribute == "work_table":
                for statement in live.follow_work_positions:
                    cursor.execute(statement)
    for statement in drop_statements(rebuilt):
        cursor.execute(statement)
    return differences
