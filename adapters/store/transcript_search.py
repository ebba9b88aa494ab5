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
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from sessionwire.adapters.store.read_models import Cursor, SqlReadModel
from sessionwire.adapters.store.serialisation import transcript_lines
from sessionwire.adapters.store.sqlite_format import BATCH_ROLE
from sessionwire.application.ports.transcript_search import TranscriptMatch, TranscriptSearchQuery
from sessionwire.domain.transcript_search import words_of


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
    pending: tuple[str, str] | None = None
    """FROM clause (``e``, ``s`` as in ``rows``) and position of the message rows the
    index holds back until it takes them in a batch, newer than every indexed row."""
    in_session: str = ""
    """A condition on a session's own rows of the events (one parameter: its key) that
    keeps a read within its shard (Citus, ADR 0062); empty where nothing is sharded."""


PENDING_AT_MOST = 1_000
"""More rows than the index ever holds back (``sqlite_search.FLUSH_ROWS``)."""


class SqlTranscriptSearch:
    """``TranscriptSearch`` on a read transaction's cursor."""

    def __init__(self, read_model: SqlReadModel, sql: SearchSql) -> None:
        self.model = read_model
        self.sql = sql

    def search(self, cursor: Cursor, query: TranscriptSearchQuery) -> list[TranscriptMatch]:
        scopes: list[str] = []
        scope_params: list[Any] = []
        for scope in query.scopes:
            condition = self.model.session_conditions(scope, "s")
            if condition is not None:
                scopes.append(f"({condition[0]})")
                scope_params.extend(condition[1])
        if not scopes or not query.words or query.limit <= 0:
            return []
        where = ["e.role IS NOT NULL", f"({' OR '.join(scopes)})"]
        if not query.include_tools:
            where.append("e.role <> 'toolResult'")
        found: list[TranscriptMatch] = []
        pending = self.sql.pending
        if pending is not None:
            # Rows not yet in the index (the newest): every one a candidate, for the
            # tool to decide on; they are newer than every indexed row.
            found = self._rows(
                cursor, pending, [], where, scope_params, query, PENDING_AT_MOST, query.words
            )[: query.limit]
        if len(found) < query.limit:
            before = query.before if not found else found[-1].position
            match = [self.sql.match]
            terms = [self.sql.terms(query.words)]
            found += self._rows(
                cursor,
                (self.sql.rows, self.sql.position),
                [*match, *where],
                [],
                [*terms, *scope_params],
                replace(query, before=before),
                query.limit - len(found),
            )
        return found

    def _rows(
        self,
        cursor: Cursor,
        source: tuple[str, str],
        conditions: list[str],
        where: list[str],
        params: list[Any],
        query: TranscriptSearchQuery,
        limit: int,
        words: tuple[str, ...] | None = None,
    ) -> list[TranscriptMatch]:
        """Up to ``limit`` rows of ``source`` (its FROM clause and position) meeting the
        conditions, below ``query.before``, newest first. With ``words``, ``source`` gives
        each row's indexed text as ``text``, and rows whose text lacks one are dropped
        before they are decoded."""
        m = self.model.m
        rows, position = source
        every = [*conditions, *where]
        values = list(params)
        if query.before is not None:
            every.append(f"{position} < {m}")
            values.append(query.before)
        values.append(limit)
        cursor.execute(
            f"SELECT {position} AS position, e.originator_id AS stream, "
            "e.originator_version AS version, e.topic AS topic, e.state AS state, "
            f"e.body AS body, e.role AS role, s.key AS key{', text' if words else ''} "
            f"FROM {rows} "
            f"WHERE {' AND '.join(every)} ORDER BY {position} DESC LIMIT {m}",
            values,
        )
        found: list[TranscriptMatch] = []
        for row in cursor.fetchall():
            if words and not set(words) <= set(words_of(row["text"])):
                continue
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

    def messages_before(self, cursor: Cursor, match: TranscriptMatch) -> int:
        """How many messages ``match``'s session holds below its stream version (a batch
        counts each of its messages)."""
        m = self.model.m
        in_session = self.sql.in_session
        cursor.execute(
            f"SELECT COALESCE(SUM(CASE WHEN role = '{BATCH_ROLE}' THEN {self.sql.count} "
            f"ELSE 1 END), 0) AS n FROM {self.model.events} "
            f"WHERE originator_id = {m} AND role IS NOT NULL AND originator_version < {m}"
            f"{in_session}",
            (
                self.model.log_id(match.stream),
                match.version,
                *((match.session_key,) if in_session else ()),
            ),
        )
        return int(cursor.fetchone()["n"])
