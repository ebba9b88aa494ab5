"""Forks (decision 34, ADR 0048): a session whose history starts with another's up to a
position, by reference to the source's chain, never by copied rows.

A fork's view is the lines it inherits (the source's first lines, those at or below the
fork's version, and what the source inherited itself) then its own. The source's later
lines are never taken: the fork point says how many lines it inherits, and a page of the
source is kept only when its count of lines is the one the page was placed by (else it
is read again; the source's stream up to the fork's version is the last resort). The
reads here are blocking: they run on a reader thread of the store (``AsyncStore.read``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sessionwire.application.audit.state import batch_holding
from sessionwire.application.ports.session_read_model import StoredSession, TranscriptWindow
from sessionwire.application.ports.store import Store
from sessionwire.domain.base import DomainEvent
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.session import ForkPoint, Session

TOOL_RESULT = "toolResult"
# Forks of forks followed at most this deep: each level is one more stream to read.
MAX_FORK_DEPTH = 64
# Reads of a source's inherited lines that may meet a source growing in between.
PAGE_RETRIES = 4


class ForkRefused(SessionwireError, ValueError):
    """A fork the source cannot give: a position it never had, or a key already taken."""


@dataclass(frozen=True)
class InheritedLine:
    role: str
    line: str
    """The transcript line as the transcript table keeps it (JSON text)."""


@dataclass(frozen=True)
class ForkedTranscript:
    """A window of a fork's view: inherited lines first, then its own."""

    lines: list[str]
    inherited: int
    """How many of ``lines`` (the first ones) are inherited."""
    total: int | None
    """The view's size (inherited and own), for a window with an offset."""


def fork_json(point: ForkPoint) -> dict[str, object]:
    """A fork point as the API and the tools show it."""
    return {
        "sessionKey": point.source_key,
        "version": point.version,
        "recordVersion": point.record_version,
        "streamHash": point.stream_hash,
        "messages": point.messages,
        "toolResults": point.tool_results,
    }


def fork_point(store: Store, source: StoredSession, at_version: object | None) -> ForkPoint:
    """Where a fork of ``source`` at ``at_version`` (None: its latest version) starts.

    Raises ForkRefused with the reason for a position the source does not have.
    """
    latest = _latest_counts(store, source) if at_version is None else None
    if latest is not None:
        # The source as it stands: its lines counted by the read model, no replay.
        source, lines, tools = latest
        version = record_version = source.version
    else:
        version = source.version if at_version is None else _position(at_version, source)
        events = _stream_up_to(store, source, version)
        replayed = _lines_up_to(events, version)
        lines, tools = len(replayed), sum(line.role == TOOL_RESULT for line in replayed)
        record_version = events[-1].originator_version if events else version
    found = store.stream_hash(source.id, record_version)
    above = source.state.forked_from
    return ForkPoint(
        source_key=source.state.key,
        version=version,
        record_version=record_version,
        stream_hash=None if found is None else found.hex(),
        messages=lines + (above.messages if above is not None else 0),
        tool_results=tools + (above.tool_results if above is not None else 0),
    )


def _latest_counts(store: Store, source: StoredSession) -> tuple[StoredSession, int, int] | None:
    """The source's row as it stands, its own lines and how many are tool results: each
    count read with the row in one transaction, kept when both saw the same version (a
    source written in between is read again). None after a few such races."""

    def everything(found: StoredSession) -> bool:
        return True

    for _ in range(PAGE_RETRIES):
        counts = []
        for include_tools in (True, False):
            window = TranscriptWindow(limit=0, include_tools=include_tools, offset=0)
            read = store.session_transcript(source.state.key, window, everything)
            if read.session is None or read.total is None:
                return None
            counts.append((read.session, read.total))
        (first, lines), (second, plain) = counts
        if first.version == second.version:
            return second, lines, lines - plain
    return None


@dataclass(frozen=True)
class _Level:
    """One source a fork inherits from: its first ``lines`` lines of the view read."""

    source: StoredSession
    version: int
    lines: int


def _levels(store: Store, point: ForkPoint, include_tools: bool) -> list[_Level]:
    """The sources a fork at ``point`` inherits from, the farthest first: a source that
    is itself a fork gives its own inheritance before its lines."""
    levels: list[_Level] = []
    current: ForkPoint | None = point
    while current is not None and len(levels) < MAX_FORK_DEPTH:
        source = store.session(current.source_key)
        if source is None:
            break  # a source that is gone from the read model: it inherits nothing more
        above = source.state.forked_from
        lines = current.messages - (above.messages if above is not None else 0)
        if not include_tools:
            lines -= current.tool_results - (above.tool_results if above is not None else 0)
        levels.append(_Level(source, current.version, max(0, lines)))
        current = above
    levels.reverse()
    return levels


def _inherited_range(
    store: Store, levels: list[_Level], first: int, last: int, include_tools: bool
) -> list[str]:
    """Lines ``first`` to ``last`` (exclusive) of the inherited view, oldest first."""
    taken: list[str] = []
    start = 0
    for level in levels:
        low, high = max(first, start), min(last, start + level.lines)
        if low < high:
            taken += _source_range(store, level, low - start, high - start, include_tools)
        start += level.lines
    return taken


def _source_range(
    store: Store, level: _Level, first: int, last: int, include_tools: bool
) -> list[str]:
    """Lines ``first`` to ``last`` of the source's first ``level.lines`` lines of the view
    (those at or below the fork's version).

    Read from the transcript read model as a page counted back from its newest line, and
    kept only when the page's count of lines (read in the same transaction) is the one the
    offset was placed by: a source that grew in between is read again, so no line it
    recorded after the fork is ever taken. After a few such races, or when the counts
    cannot hold (a read model behind its log), the source's stream up to the version.
    """
    source = level.source
    wanted = last - first
    total = store.transcript_page(source.id, offset=0, limit=0, include_tools=include_tools).total
    for _ in range(PAGE_RETRIES):
        if total < level.lines:
            break
        page = store.transcript_page(
            source.id, offset=total - last, limit=wanted, include_tools=include_tools
        )
        if page.total == total and len(page.messages) == wanted:
            return page.messages
        total = page.total
    lines = _lines_up_to(_stream_up_to(store, source, level.version), level.version)
    kept = [line.line for line in lines if include_tools or line.role != TOOL_RESULT]
    return kept[first:last]


def forked_window(
    store: Store,
    stored: StoredSession,
    own: Sequence[str],
    own_total: int | None,
    window: TranscriptWindow,
) -> ForkedTranscript:
    """The ``window`` of ``stored``'s view, given the window of its own lines read already
    (``own``, and with an offset ``own_total``: how many own lines the view holds)."""
    point = stored.state.forked_from
    if point is None or (window.offset is None and len(own) >= window.limit):
        return ForkedTranscript(list(own), 0, own_total)
    levels = _levels(store, point, window.include_tools)
    size = sum(level.lines for level in levels)
    if window.offset is None:
        wanted = min(size, max(0, window.limit - len(own)))
        first, last = size - wanted, size
        total = None
    else:
        own_count = own_total or 0
        total = own_count + size
        # The window counted back from the newest line of the view: own lines first,
        # then the inherited ones before them.
        last = size - max(0, window.offset - own_count)
        first = max(0, size - max(0, window.offset + window.limit - own_count))
    taken = [
        flagged(line, point.source_key)
        for line in _inherited_range(store, levels, first, last, window.include_tools)
    ]
    return ForkedTranscript([*taken, *own], len(taken), total)


def flagged(line: str, source_key: str) -> str:
    """The line with ``"forkedFrom"``: the session it was inherited from."""
    return f'{line[:-1]},"forkedFrom":{json.dumps(source_key)}}}'


def _position(at_version: object, source: StoredSession) -> int:
    if isinstance(at_version, bool) or not isinstance(at_version, int):
        raise ForkRefused(f"invalid fork position {at_version!r}: a stream version (integer)")
    if at_version < 1:
        raise ForkRefused(f"invalid fork position {at_version}: versions start at 1")
    if at_version > source.version:
        raise ForkRefused(
            f"invalid fork position {at_version}: {source.state.key} is at version {source.version}"
        )
    return at_version


def _stream_up_to(store: Store, source: StoredSession, version: int) -> list[DomainEvent]:
    events = list(store.stream(source.id, up_to_version=version))
    if not events or events[-1].originator_version < version:
        # The position may be inside a batch of messages, stored at its last version.
        events += batch_holding(store, source.id, version)
    return events


def _lines_up_to(events: Sequence[DomainEvent], version: int) -> list[InheritedLine]:
    lines: list[InheritedLine] = []
    for event in events:
        if isinstance(event, Session.MessageAppended):
            message = event.transcript_message()
            lines.append(InheritedLine(message.role, message.to_json()))
        elif isinstance(event, Session.MessagesAppended):
            count = min(len(event.messages), version - event.first_version + 1)
            lines.extend(
                InheritedLine(message.role, message.to_json())
                for message in event.transcript_messages()[:count]
            )
    return lines
