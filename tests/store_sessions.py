"""Sessions built for store tests that save aggregates directly (no gateway)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage, content_blocks

AT = datetime(2026, 1, 1, tzinfo=UTC)


def opened(key: str) -> Session:
    return Session.open(key=key, session_id=uuid.uuid4(), agent_id="main", at=AT)


def with_message(session: Session, text: str) -> Session:
    session.append_message(
        TranscriptMessage(role="user", content=content_blocks(text), timestamp=0), at=AT
    )
    return session
