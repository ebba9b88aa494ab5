"""``sessions_history``: the last messages of one session, served from the transcript table."""

from __future__ import annotations

from sessionwire.application.context import ToolContext
from sessionwire.application.tools.params import SessionsHistoryParams
from sessionwire.application.tools.results import ReadAnswer
from sessionwire.application.tools.session_refs import resolve_session

MAX_HISTORY_BYTES = 6 * 1024 * 1024


async def sessions_history(context: ToolContext, params: SessionsHistoryParams) -> ReadAnswer:
    stored = await resolve_session(context, params.sessionKey, access="history")
    texts = await context.store.transcript(
        stored.id, limit=params.limit, include_tools=params.includeTools
    )
    messages = context.reader_messages(stored.state.key, cap_bytes(texts, MAX_HISTORY_BYTES))
    return ReadAnswer({"sessionKey": context.display_key(stored.state.key), "messages": messages})


def cap_bytes(texts: list[str], limit: int) -> list[str]:
    """Drop the oldest messages until the JSON array fits ``limit`` bytes; keep at least one."""
    if 4 * sum(map(len, texts)) + len(texts) + 1 <= limit:
        return texts  # a character is at most 4 bytes of UTF-8: it fits, whatever they hold
    sizes = [len(t.encode()) for t in texts]
    total = sum(sizes) + max(0, len(sizes) - 1) + 2
    start = 0
    while total > limit and start < len(texts) - 1:
        total -= sizes[start] + 1
        start += 1
    return texts[start:]
