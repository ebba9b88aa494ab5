"""A session's stream id and the millisecond timestamps of its row.

Apart from the session aggregate (``session.py``), whose models a process that only lists
sessions never builds (issue 38 item 7): the read models find a session's stream by its
key, and the listing compares its ``updatedAt`` in milliseconds, with these alone.
"""

from __future__ import annotations

from datetime import datetime
from uuid import NAMESPACE_URL, UUID, uuid5

SESSION_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/sessions")


def session_uuid(canonical_key: str) -> UUID:
    """Aggregate id of a session: the same key always names the same stream."""
    return uuid5(SESSION_NAMESPACE, canonical_key)


def to_millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
