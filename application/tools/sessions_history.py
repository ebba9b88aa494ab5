"""``sessions_history``: the last messages of one session, served from the transcript table."""

from __future__ import annotations

import json

from sessionwire.application.context import ToolContext
from sessionwire.application.tools.params import SessionsHistoryParams
from sessionwire.application.tools.results import SessionsHistoryResult
from sessionwire.application.tools.session_refs import resolve_session
from sessionwire.domain.causality import with_provenance
from sessionwire.domain.transcript import clean_for_reader

MAX_HISTORY_BYTES = 6 * 1024 * 1024


def sessions_history(context: ToolContext, params: SessionsHistoryParams) -> SessionsHistoryResult:
    stored = resolve_session(context, params.sessionKey, access="history")
    texts = context.store.transcript(
        stored.id, limit=params.limit, include_tools=params.includeTools
    )
    messages = context.reader_view(
        stored.state.key,
        [
            with_provenance(clean_for_reader(json.loads(t)))
            for t in cap_bytes(texts, MAX_HISTORY_BYTES)
        ],
    )
    return SessionsHistoryResult(
        sessionKey=context.display_key(stored.state.key), messages=messages
    )


def cap_bytes(texts: list[str], limit: int) -> list[str]:
    """Drop the oldest messages until the JSON array fits ``limit`` bytes; keep at least one."""
    sizes = [len(t.encode()) for t in texts]
    total = sum(sizes) + max(0, len(sizes) - 1) + 2
    start = 0
    while total > limit and start < len(texts) - 1:
        total -= sizes[start] + 1
        start += 1
    return texts[start:]
