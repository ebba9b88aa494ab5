"""The transcript search's query, shared by the backends (ADR 0050).

Each backend keeps its own index with every append, inside the database, in the
append's transaction (``sqlite_search.py``: an FTS5 table fed by a trigger;
``postgres_search.py``: a GIN expression index); this module asks it for a page of
message rows, joined to their sessions' rows and filtered there by the caller's scopes
(the conditions ``sessions_list`` reads its rows with, ``SqlReadModel.session_conditions``),
newest first. The rows' lines are decoded as history decodes them (``transcript_lines``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sessionwire.adapters.store.read_models import Cursor, SqlReadModel
from sessionwire.adapters.store.serialisation import transcript_lines
from sessionwire.adapters.store.sqlite_format import BATCH_ROLE
from sessionwire.application.ports.transcript_search import TranscriptMatch, TranscriptSearchQuery


@dataclass(frozen=True)
class SearchSql:
    """What differs between the backends' searches."""

    rows: str
    """FROM clause giving the message rows as ``e`` (the events) and their sessions as
    ``s``."""
    position: str
    """A row's position in the log, in the index's own order where it has one."""
    match: str
    """The condition that the row's text holds the words (one parameter: ``terms``)."""
    count: str
    """A batch row's number of messages, from its ``state``."""

    terms: Callable[[Sequence[str]], str]
    """The ``match`` parameter for the query's words."""


class SqlTranscriptSearch:
    """``TranscriptSearch`` on a read transaction's cursor."""

    def __init__(self, read_model: SqlReadModel, sql: SearchSql) -> None:
        self.model = read_model
        self.sql = sql

    def search(self, cursor: Cursor, query: TranscriptSearchQuery) -> list[TranscriptMatch]:
        m = self.model.m
        scopes: list[str] = []
        params: list[Any] = [self.sql.terms(query.words)]
        for scope in query.scopes:
            condition = self.model.session_conditions(scope, "s")
            if condition is not None:
                scopes.append(f"({condition[0]})")
                params.extend(condition[1])
        if not scopes or not query.words or query.limit <= 0:
            return []
        where = [self.sql.match, "e.role IS NOT NULL", f"({' OR '.join(scopes)})"]
        if not query.include_tools:
            where.append("e.role <> 'toolResult'")
        if query.before is not None:
            where.append(f"{self.sql.position} < {m}")
            params.append(query.before)
        params.append(query.limit)
        cursor.execute(
            f"SELECT {self.sql.position} AS position, e.originator_id AS stream, "
            "e.originator_version AS version, e.topic AS topic, e.state AS state, "
            f"e.body AS body, e.role AS role, s.key AS key FROM {self.sql.rows} "
            f"WHERE {' AND '.join(where)} ORDER BY {self.sql.position} DESC LIMIT {m}",
            params,
        )
        found: list[TranscriptMatch] = []
        for row in cursor.fetchall():
            stream = UUID(str(row["stream"]))
            version = int(row["version"])
            lines = transcript_lines(
                stream, version, row["topic"], bytes(row["state"]), row["body"]
            )
            role = row["role"]
            found.append(
                TranscriptMatch(
                    position=int(row["position"]),
                    session_key=row["key"],
                    stream=stream,
                    version=version,
                    lines=tuple((line_role or role, line) for line_role, line in lines),
                )
            )
        return found

    def messages_before(self, cursor: Cursor, stream: UUID, version: int) -> int:
        """How many messages session ``stream`` holds below stream version ``version``
        (a batch counts each of its messages)."""
        m = self.model.m
        cursor.execute(
            f"SELECT COALESCE(SUM(CASE WHEN role = '{BATCH_ROLE}' THEN {self.sql.count} "
            f"ELSE 1 END), 0) AS n FROM {self.model.events} "
            f"WHERE originator_id = {m} AND role IS NOT NULL AND originator_version < {m}",
            (self.model.log_id(stream), version),
        )
        return int(cursor.fetchone()["n"])
