"""``sessions_search`` (decision 35): the messages of the transcripts the caller may see
that hold every word of a query, newest first.

What the caller may see is what ``sessions_list`` lists: its scopes (``visible_queries``)
are the filter the store's index searches within, so a hidden session's messages never
reach a page, never count and never make ``truncated``. A ``sessionKey`` resolves as
``sessions_history``'s does (a hidden one answers as a missing one, decision 41). Each
row the index proposes is read as history reads it (``reader_messages``: envelopes
cleaned, another session's secrets masked) and kept only when that text holds every
word: a word that only a masked secret held finds nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sessionwire.application.context import ToolContext
from sessionwire.application.ports.session_read_model import SessionQuery
from sessionwire.application.ports.store import Store
from sessionwire.application.ports.transcript_search import TranscriptMatch, TranscriptSearchQuery
from sessionwire.application.tools.params import SessionsSearchParams
from sessionwire.application.tools.results import ReadAnswer, SearchHitRow, SessionsSearchAnswer
from sessionwire.application.tools.session_refs import resolve_session
from sessionwire.application.tools.sessions_list import visible_queries
from sessionwire.domain.transcript_search import message_text, snippet, words_of

# Rows asked of the index per page, at least; a page of twice the limit usually ends it.
MIN_PAGE = 50


async def sessions_search(context: ToolContext, params: SessionsSearchParams) -> ReadAnswer:
    words = words_of(params.query)
    only: frozenset[str] | None = None
    if params.sessionKey is not None:
        stored = await resolve_session(context, params.sessionKey, access="history")
        only = frozenset({stored.state.key})
    scopes = visible_queries(context, limit=1, kinds=params.kinds)
    limit = params.limit
    page = max(MIN_PAGE, 2 * limit)
    # Computed here, not on the reader thread: the context's cached properties.
    _ = context.redactor

    def found(store: Store) -> tuple[list[SearchHitRow], bool]:
        query = TranscriptSearchQuery(
            words=words,
            scopes=tuple(_within(scope, only) for scope in scopes(store)),
            include_tools=params.includeTools,
            limit=page,
        )
        hits: list[SearchHitRow] = []
        while True:
            matches = store.search_transcripts(query)
            for match in matches:
                hits.extend(_hits(context, store, match, words, params.includeTools))
                if len(hits) > limit:
                    return hits[:limit], True
            if len(matches) < page:
                return hits, False
            query = replace(query, before=matches[-1].position)

    hits, truncated = await context.store.read(found)
    return ReadAnswer(SessionsSearchAnswer(results=hits, truncated=truncated))


def _within(scope: SessionQuery, only: frozenset[str] | None) -> SessionQuery:
    """``scope`` narrowed to the one session asked for, if one was."""
    if only is None:
        return scope
    return replace(scope, keys=only if scope.keys is None else scope.keys & only)


def _hits(
    context: ToolContext,
    store: Store,
    match: TranscriptMatch,
    words: tuple[str, ...],
    include_tools: bool,
) -> list[SearchHitRow]:
    """The messages of ``match`` (newest first) that hold the words as the caller reads
    them."""
    key = match.session_key
    shown: list[tuple[int, dict[str, Any], str]] = []
    for index in reversed(range(len(match.lines))):
        role, line = match.lines[index]
        if role == "toolResult" and not include_tools:
            continue
        (message,) = context.reader_messages(key, [line])
        piece = snippet(words, message_text(message))
        if piece is not None:
            shown.append((index, message, piece))
    if not shown:
        return []
    first = store.messages_before(match)
    display = context.display_key(key)
    return [
        SearchHitRow(
            sessionKey=display,
            messageIndex=first + index,
            role=str(message.get("role", "")),
            snippet=piece,
            timestamp=message.get("timestamp"),
        )
        for index, message, piece in shown
    ]
