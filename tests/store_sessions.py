"""Sessions and runs built for store tests that save aggregates directly (no gateway)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from uuid import UUID

from sessionwire.domain.causality import Causality
from sessionwire.domain.run import Run
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


def started_run(
    session_key: str = "agent:main:main",
    *,
    at: datetime = AT,
    run_id: UUID | None = None,
    trace: str | None = None,
) -> Run:
    """A queued primary run of agent ``main`` (in trace ``trace``, if given)."""
    return Run.start(
        run_id=run_id or uuid.uuid4(),
        session_key=session_key,
        agent_id="main",
        step="primary",
        message="hello",
        timeout_seconds=600,
        at=at,
        causality=None if trace is None else Causality.root(trace),
    )
