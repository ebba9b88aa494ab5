"""A fork's inherited lines read while its source grows (ADR 0048): a page whose count of
lines is not the one its offset was placed by is read again, so a line the source
recorded after the fork is never taken."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast
from uuid import uuid4

from sessionwire.application.forks import forked_window
from sessionwire.application.ports.session_read_model import (
    StoredSession,
    TranscriptPage,
    TranscriptWindow,
)
from sessionwire.application.ports.store import Store
from sessionwire.domain.session import ForkPoint, SessionState

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def stored(key: str, point: ForkPoint | None = None) -> StoredSession:
    state = SessionState(
        key=key,
        session_id=str(uuid4()),
        agent_id="main",
        created_at=0,
        updated_at=0,
        forked_from=point,
    )
    return StoredSession(id=uuid4(), version=9, created_on=NOW, modified_on=NOW, state=state)


class GrowingSource:
    """The source's transcript: ``lines``, one more line appended after each count read
    ``grow`` times (another writer between this reader's two reads)."""

    def __init__(self, source: StoredSession, lines: list[str], grow: int) -> None:
        self.source, self.lines, self.grow = source, lines, grow

    def session(self, key: str) -> StoredSession | None:
        return self.source if key == self.source.state.key else None

    def transcript_page(
        self, session: Any, *, offset: int, limit: int, include_tools: bool
    ) -> TranscriptPage:
        total = len(self.lines)
        page = self.lines[max(0, total - offset - limit) : total - offset] if limit > 0 else []
        if self.grow:
            self.grow -= 1
            self.lines.append(f'{{"role":"user","n":"later {len(self.lines)}"}}')
        return TranscriptPage(messages=page, total=total)


def test_a_source_that_grows_between_the_reads_is_read_again() -> None:
    source = stored("agent:main:main")
    lines = [f'{{"role":"user","n":"m{n}"}}' for n in range(3)]
    point = ForkPoint(
        source_key="agent:main:main", version=4, record_version=4, stream_hash=None, messages=3
    )
    store = GrowingSource(source, lines, grow=2)

    read = forked_window(
        cast(Store, store),
        stored("agent:main:fork", point),
        [],
        0,
        TranscriptWindow(limit=10, include_tools=True, offset=0),
    )

    assert [line.split('"n":')[1] for line in read.lines] == [
        '"m0","forkedFrom":"agent:main:main"}',
        '"m1","forkedFrom":"agent:main:main"}',
        '"m2","forkedFrom":"agent:main:main"}',
    ]
    assert (read.inherited, read.total) == (3, 3)
