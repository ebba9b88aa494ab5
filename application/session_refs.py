"""Resolving what an agent calls a session (key, alias, sessionId) to a stored session."""

from __future__ import annotations

from dataclasses import dataclass

from sessionwire.application.context import ToolContext
from sessionwire.application.ports import StoredSession
from sessionwire.domain.keys import InvalidSessionKey, looks_like_session_id, looks_like_session_key


@dataclass(frozen=True)
class SessionNotResolved(Exception):
    message: str


def resolve_session(context: ToolContext, raw: str) -> StoredSession:
    """The active session ``raw`` names, or SessionNotResolved with OpenClaw's wording."""
    store = context.store
    try:
        key = context.rules.canonical(raw, agent_id=context.requester.agent_id)
    except InvalidSessionKey as error:
        raise SessionNotResolved(f"invalid sessionKey: {error}") from error
    found = store.session(key)
    if found is not None and found.state.status == "active":
        return found
    if looks_like_session_key(raw) and not looks_like_session_id(raw):
        raise SessionNotResolved(f"Session not found: {raw}")
    matches = store.sessions_by_session_id(raw.strip().lower())
    if len(matches) > 1:
        keys = ", ".join(m.state.key for m in matches)
        raise SessionNotResolved(f"Multiple sessions found for sessionId: {raw} ({keys})")
    if not matches:
        raise SessionNotResolved(
            f"Session not found: {raw} (use the full sessionKey from sessions_list)"
        )
    return matches[0]
