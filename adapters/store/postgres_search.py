"""The transcript search's index on PostgreSQL (ADR 0050): a GIN expression index.

``sw_search_text(state)`` is the ``simple`` text search vector of a message row's text
blocks (one message, or a batch of them), read from the row's JSON bytes; a partial GIN
index over it on the events table's message rows is kept by the server with every
insert, in the insert's transaction, so no append path of sessionwire's computes it and
rows from any writer (an import, another gateway) are indexed alike. The query uses the
same expression, so the planner answers it from the index.

Punctuation and spaces become spaces before the parser reads the text, so the words
are runs of letters and digits as ``domain.transcript_search.words_of`` reads them (the
parser would otherwise keep ``a@b.example`` or ``3.14`` as one token). A message's first
``MAX_INDEXED_CHARS`` characters are indexed (a vector holds at most 1 MB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessionwire.adapters.store.transcript_search import SearchSql

MAX_INDEXED_CHARS = 100_000
INDEX_NAME = "sw_search"


def _texts(doc: str, path: str) -> str:
    return (
        f"coalesce((SELECT string_agg(t #>> '{{}}', ' ') FROM jsonb_path_query({doc}, "
        f"'{path} ? (@.type() == \"string\")') AS t), '')"
    )


def create_statements(schema: str, events: str) -> list[str]:
    """The function and the index (idempotent)."""
    text = (
        f"{_texts('doc', '$.message.content[*].text')} || ' ' || "
        f"{_texts('doc', '$.messages[*].content[*].text')}"
    )
    return [
        # IMMUTABLE so that it may be indexed: its answer depends on its argument alone
        # (convert_from reads UTF-8, the encoding the store writes, whatever the
        # server's). jsonb refuses the escape \u0000 that JSON allows (a message may hold
        # one), so it is read as a space; and whatever else a row's bytes hold, the
        # index never fails an append: a row it cannot read is indexed without words.
        f'CREATE OR REPLACE FUNCTION "{schema}".sw_search_text(state bytea) RETURNS tsvector '
        # Costly to the planner (it is, per row): a search reads the index, never walks
        # the events computing it.
        "LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE COST 10000 AS $$ DECLARE doc jsonb; BEGIN "
        "doc := replace(convert_from(state, 'UTF8'), '\\u0000', '\\u0020')::jsonb; "
        "RETURN to_tsvector('simple', "
        f"regexp_replace(left({text}, {MAX_INDEXED_CHARS}), '[[:punct:][:space:]]+', ' ', 'g')); "
        "EXCEPTION WHEN others THEN RETURN ''::tsvector; END $$",
        f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON {events} USING gin "
        f'("{schema}".sw_search_text(state)) WHERE role IS NOT NULL',
    ]


def ensure_index(cursor: Any, schema: str, table: str) -> None:
    """Create the index on a schema made before it (its events table ``table`` v3: with
    ``role``); no DDL at all when it is there. Run under the setup lock."""
    cursor.execute(
        "SELECT to_regclass(%s) IS NOT NULL AS present, EXISTS (SELECT 1 FROM "
        "information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "AND column_name = 'role') AS v3",
        (f'"{schema}".{INDEX_NAME}', schema, table),
    )
    found = cursor.fetchone()
    if found["present"] or not found["v3"]:
        return
    for statement in create_statements(schema, f'"{schema}"."{table}"'):
        cursor.execute(statement)


def search_sql(schema: str, events: str, *, by_shard: bool = False) -> SearchSql:
    """``by_shard``: the tables are distributed by session (Citus, ADR 0051), and the
    join names the distribution columns too (a message row's shard key is its session's
    key), since Citus joins distributed tables on nothing else."""
    same_shard = " AND s.key = e.shard_key" if by_shard else ""
    return SearchSql(
        rows=f'{events} e JOIN "{schema}".sw_sessions s '
        f"ON s.id = replace(e.originator_id::text, '-', ''){same_shard}",
        position="e.notification_id",
        match=f"\"{schema}\".sw_search_text(e.state) @@ plainto_tsquery('simple', %s)",
        count="(convert_from(state, 'UTF8')::jsonb ->> 'count')::bigint",
        terms=_terms,
        # A message row's shard key is its session's key.
        in_session=" AND shard_key = %s" if by_shard else "",
    )


def _terms(words: Sequence[str]) -> str:
    return " ".join(words)
