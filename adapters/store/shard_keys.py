"""The shard key of a stream: which session's shard its events live in (ADR 0021,
"Sharding by session key"; ADR 0051).

A stream's key is the key of the session it belongs to, read from its state: a session's
own key, else the session it runs in (``session_key``: a run, a yield, a push, a busy
decision, an outbound delivery, a schedule), else the session that asked for it
(``requester_key``: an exchange, a spawn, an access refusal). Each of those is set when the
stream is created and never changes, so a stream's key is the same in every save: the
events' primary key ``(shard_key, originator_id, originator_version)`` still catches two
writers of one version. A stream that names no session (a remote call made outside any)
is its own shard key.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

_FIELDS = ("key", "session_key", "requester_key")


def shard_key_of(stream_id: UUID, state: Any) -> str:
    """The shard key of the stream ``stream_id`` whose state (or creation event) is
    ``state``."""
    for name in _FIELDS:
        value = getattr(state, name, None)
        if isinstance(value, str) and value:
            return value
    return stream_id.hex


def shard_keys_of(aggregates: Any) -> dict[UUID, str]:
    """Each aggregate's stream id and shard key."""
    return {
        aggregate.id: shard_key_of(aggregate.id, getattr(aggregate, "state", None))
        for aggregate in aggregates
    }
