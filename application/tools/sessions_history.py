"""``sessions_history``: one session's messages, served from the transcript table.

Without ``offset``: the newest ``limit`` messages (the source document's tail). With
``offset``: a page counted back from the newest message (0 = the newest page), oldest
first, with ``nextOffset`` while older messages remain (decision 27). Every answer says
what it left out; nothing is dropped silently.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from sessionwire.application.context import ToolContext
from sessionwire.application.forks import forked_window
from sessionwire.application.ports.session_read_model import (
    RenderedWindow,
    TranscriptWindow,
)
from sessionwire.application.tools.params import SessionsHistoryParams
from sessionwire.application.tools.results import ReadAnswer, SessionsHistoryAnswer
from sessionwire.application.tools.session_refs import read_session

MAX_HISTORY_BYTES = 6 * 1024 * 1024


async def sessions_history(context: ToolContext, params: SessionsHistoryParams) -> ReadAnswer:
    offset = params.offset
    window = TranscriptWindow(
        limit=params.limit,
        include_tools=params.includeTools,
        offset=offset,
        view=context.view_wanted(params.sessionKey, MAX_HISTORY_BYTES),
    )
    stored, read = await read_session(context, params.sessionKey, access="history", window=window)
    if read.rendered is not None:
        return rendered_answer(context, stored.state.key, read.rendered, offset)
    texts, total = read.messages or [], read.total
    inherited = 0
    point = stored.state.forked_from
    if point is not None:
        # A fork: the lines it inherits come first, paged with its own (decision 34).
        forked = await context.store.read(forked_window, stored, texts, total, window)
        texts, total, inherited = forked.lines, forked.total, forked.inherited
    kept = cap_bytes(texts, MAX_HISTORY_BYTES)
    # The byte cap drops the oldest lines: the inherited ones go first.
    inherited = max(0, inherited - (len(texts) - len(kept)))
    messages, redacted, size = context.history_view(stored.state.key, kept[inherited:])
    if inherited:
        assert point is not None
        # Read as the source's lines are read: a fork never shows more than its source.
        earlier, masked, earlier_size = context.history_view(point.source_key, kept[:inherited])
        size = earlier_size + size - 1 if messages else earlier_size
        messages, redacted = [*earlier, *messages], redacted or masked
    dropped = len(kept) < len(texts)
    answer: SessionsHistoryAnswer = {
        "sessionKey": context.display_key(stored.state.key),
        "messages": messages,
        "truncated": dropped,
        "droppedMessages": dropped,
        # Messages are stored within the message cap and returned whole: none is cut.
        "contentTruncated": False,
        "contentRedacted": redacted,
        "bytes": size,
    }
    if offset is not None and total is not None:
        paged(answer, offset, len(kept), total)
    return ReadAnswer(answer)


def rendered_answer(
    context: ToolContext, key: str, rendered: RenderedWindow, offset: int | None
) -> ReadAnswer:
    """The answer from a window the store read as this reader reads it (ADR 0054): the
    stored views' one JSON array, decoded once; within the byte cap, so nothing dropped."""
    messages: list[dict[str, Any]]
    if rendered.exact:
        messages = json.loads(rendered.messages)
    else:
        try:
            messages = orjson.loads(rendered.messages)
        except orjson.JSONDecodeError:  # a number orjson refuses (NaN, 1e400)
            messages = json.loads(rendered.messages)
    answer: SessionsHistoryAnswer = {
        "sessionKey": context.display_key(key),
        "messages": messages,
        "truncated": False,
        "droppedMessages": False,
        "contentTruncated": False,
        "contentRedacted": rendered.redacted,
        "bytes": rendered.size,
    }
    if offset is not None and rendered.total is not None:
        paged(answer, offset, rendered.count, rendered.total)
    return ReadAnswer(answer)


def paged(answer: SessionsHistoryAnswer, offset: int, returned: int, total: int) -> None:
    """A page's fields: the next page starts right before the oldest message returned, so
    the messages the byte cap left out of this page open the next one."""
    next_offset = offset + returned
    has_more = next_offset < total
    answer["offset"] = offset
    answer["totalMessages"] = total
    answer["hasMore"] = has_more
    if has_more:
        answer["nextOffset"] = next_offset


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
