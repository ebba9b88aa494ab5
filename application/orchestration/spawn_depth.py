"""How deep a session is in its spawn tree (decision 30).

Its own module, apart from the spawn driver: the tool gate asks it for a sub-agent's
call, and a process that only reads sessions loads it (and the spawn aggregate) then and
not before.
"""

from __future__ import annotations

from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.domain.keys import is_subagent_key
from sessionwire.domain.spawn import SpawnState, spawn_id_for


async def spawn_depth(store: AsyncStore, session_key: str) -> int:
    """How deep a session is in its spawn tree: 0 for a top-level session, its spawn's
    recorded depth for a sub-agent's (1 for one spawned before depths were recorded)."""
    if not is_subagent_key(session_key):
        return 0
    stored = await store.work(spawn_id_for(session_key))
    if stored is None:
        return 1
    return SpawnState.model_validate_json(stored.state_json).depth
