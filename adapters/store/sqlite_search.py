"""The transcript search's index on SQLite (ADR 0050): an FTS5 table the database keeps.

``sw_search`` is a contentless FTS5 table (the text is in the events already): one row
per message row of the log, under the event's rowid, holding its text blocks. An AFTER
INSERT trigger on ``stored_events`` writes the row's text (read from its JSON with
``json_each``) in the statement's own transaction, so no append path of sessionwire's
computes it and an import's rows are indexed as a gateway's are. It writes it to
``sw_search_pending``, a plain table the FTS5 table takes in ``FLUSH_ROWS`` rows at a
time (a trigger on it, in the append's transaction that fills it): a search reads those
few rows as candidates beside the FTS5 matches. A store made before the index gets it
filled once, when it is opened (``ensure_index``).

The tokenizer is ``unicode61`` without diacritics removal: words are runs of letters and
digits, case folded, as ``domain.transcript_search.words_of`` reads them. The table keeps
neither positions nor column sizes (``detail=none``, ``columnsize=0``): a query is words
that must all be there, never a phrase, and results are not ranked; each append's
commit writes fewer pages for it (benchmarks/results/search.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessionwire.adapters.store.transcript_search import SearchSql


def _text_of(state: str) -> str:
    """The text blocks of a message row (one message, or a batch of them) as SQL. The
    escape \\u0000 is read as a space (SQLite's text would end at the NUL), and a row
    that is not JSON is indexed without words: the index never fails an append."""
    doc = f"replace(CAST({state} AS TEXT), '\\u0000', '\\u0020')"
    return (
        "(SELECT CASE WHEN json_valid(d) THEN coalesce("
        "(SELECT group_concat(json_extract(b.value, '$.text'), ' ') "
        "FROM json_each(d, '$.message.content') AS b), "
        "(SELECT group_concat(json_extract(b.value, '$.text'), ' ') "
        "FROM json_each(d, '$.messages') AS m, json_each(m.value, '$.content') AS b), '') "
        f"ELSE '' END FROM (SELECT {doc} AS d))"
    )


FLUSH_ROWS = 64
"""Message rows held back before the index takes them in, together."""


def create_statements() -> list[str]:
    """The index, the rows it holds back, and their triggers (idempotent)."""
    return [
        "CREATE VIRTUAL TABLE IF NOT EXISTS sw_search USING fts5(text, content='', "
        "columnsize=0, detail=none, tokenize='unicode61 remove_diacritics 0')",
        "CREATE TABLE IF NOT EXISTS sw_search_pending (rowid INTEGER PRIMARY KEY, "
        "text TEXT NOT NULL)",
        "CREATE TRIGGER IF NOT EXISTS sw_search_index AFTER INSERT ON stored_events "
        "WHEN NEW.role IS NOT NULL BEGIN INSERT INTO sw_search_pending (rowid, text) "
        f"VALUES (NEW.rowid, {_text_of('NEW.state')}); END",
        # FTS5 writes a segment per transaction that adds to it (most of an indexed
        # append's cost, ADR 0050): rows are taken in FLUSH_ROWS at a time, in the
        # transaction of the append that makes them that many.
        "CREATE TRIGGER IF NOT EXISTS sw_search_flush AFTER INSERT ON sw_search_pending "
        f"WHEN (SELECT count(*) FROM sw_search_pending) >= {FLUSH_ROWS} BEGIN "
        "INSERT INTO sw_search (rowid, text) SELECT rowid, text FROM sw_search_pending; "
        "DELETE FROM sw_search_pending; END",
    ]


def ensure_index(cursor: Any) -> bool:
    """Create the index and fill it from the log's message rows unless that was done
    (``sw_format.search``), in the caller's transaction; True if it filled it."""
    cursor.execute("SELECT value FROM sw_format WHERE name = 'search'")
    if cursor.fetchone() is not None:
        return False
    for statement in create_statements():
        cursor.execute(statement)
    # Rows the trigger indexed before the marker (none in a store made before it).
    cursor.execute("INSERT INTO sw_search (sw_search) VALUES ('delete-all')")
    cursor.execute("DELETE FROM sw_search_pending")
    cursor.execute(
        f"INSERT INTO sw_search (rowid, text) SELECT rowid, {_text_of('state')} "
        "FROM stored_events WHERE role IS NOT NULL"
    )
    cursor.execute("INSERT INTO sw_format (name, value) VALUES ('search', 1)")
    return True


def _terms(words: Sequence[str]) -> str:
    # Each word a quoted string (letters and digits only): every one must be there.
    return " ".join(f'"{word}"' for word in words)


SEARCH_SQL = SearchSql(
    # CROSS JOIN: SQLite keeps this order (the index's rows drive; a scope's conditions
    # on the sessions could otherwise make it walk every session's events).
    rows="sw_search CROSS JOIN stored_events e ON e.rowid = sw_search.rowid "
    "CROSS JOIN sw_sessions s ON s.id = e.originator_id",
    position="sw_search.rowid",
    match="sw_search MATCH ?",
    # The rows held back, their text (``text``) checked for the words before decoding.
    pending=(
        "sw_search_pending p CROSS JOIN stored_events e ON e.rowid = p.rowid "
        "CROSS JOIN sw_sessions s ON s.id = e.originator_id",
        "p.rowid",
    ),
    count="json_extract(CAST(state AS TEXT), '$.count')",
    terms=_terms,
)
