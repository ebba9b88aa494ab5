"""Resolving what an agent calls a session (key, alias, sessionId, label) to a stored
session the requester may reach.

The lookups are here; every yes or no comes from the requester's ``AccessPolicy``
(domain/policy.py). Lookups by sessionId and by label only ever search the sessions the
requester may see, and a key naming a session it may not reach is refused whether or not
that session exists: a refusal never tells the caller what is hidden.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessionwire.application.context import ToolContext
from sessionwire.application.ports.session_read_model import (
    SessionTranscript,
    StoredSession,
    TranscriptWindow,
)
from sessionwire.application.ports.store import Store
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import (
    InvalidSessionKey,
    agent_id_of,
    looks_like_session_id,
    looks_like_session_key,
    normalize_agent_id,
)
from sessionwire.domain.policy import Access, Refusal


@dataclass(frozen=True)
class SessionNotResolved(SessionwireError):
    message: str


class SessionRefused(SessionwireError):
    """A policy said no; ``display_key`` is only set when the caller named the key."""

    def __init__(
        self,
        refusal: Refusal,
        *,
        reference: str,
        target_key: str | None = None,
        display_key: str | None = None,
    ) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
        self.reference = reference
        self.target_key = target_key
        self.display_key = display_key


async def resolve_session(context: ToolContext, raw: str, *, access: Access) -> StoredSession:
    """The active session ``raw`` names, if the requester may reach it.

    Raises SessionNotResolved (OpenClaw's "not found" wording) or SessionRefused.
    """
    key = _canonical(context, raw)
    return await _resolved(context, raw, key, await context.store.session(key), access)


async def read_session(
    context: ToolContext, raw: str, *, access: Access, window: TranscriptWindow
) -> tuple[StoredSession, SessionTranscript]:
    """``resolve_session``, and the ``window`` of the session's transcript.

    When ``raw`` is the key of an active session the requester may reach (what agents
    send), the row, the access check and the messages take one trip to a reader thread
    and one read transaction; anything else resolves as ``resolve_session`` does, then
    reads the messages.
    """
    key = _canonical(context, raw)
    policy = context.access
    rules = context.rules
    reference = raw.strip()

    def reachable(stored: StoredSession) -> bool:
        # On the reader thread: the policy is pure and computed before the trip.
        state = stored.state
        return state.status == "active" and not policy.reach_refusal(
            state.policy_target(rules),
            reference,
            access=access,
            target_key=key,
            target_agent=state.agent_id,
        )

    read = await context.store.read(_session_transcript, key, window, reachable)
    if read.session is not None and (read.messages is not None or read.rendered is not None):
        return read.session, read
    stored = await _resolved(context, raw, key, read.session, access)
    return stored, await context.store.read(_transcript_of, stored, window)


def _session_transcript(
    store: Store, key: str, window: TranscriptWindow, wanted: Callable[[StoredSession], bool]
) -> SessionTranscript:
    return store.session_transcript(key, window, wanted)


def _transcript_of(
    store: Store, stored: StoredSession, window: TranscriptWindow
) -> SessionTranscript:
    if window.offset is None:
        tail = store.transcript(stored.id, limit=window.limit, include_tools=window.include_tools)
        return SessionTranscript(stored, tail)
    page = store.transcript_page(
        stored.id, offset=window.offset, limit=window.limit, include_tools=window.include_tools
    )
    return SessionTranscript(stored, page.messages, page.total)


def _canonical(context: ToolContext, raw: str) -> str:
    try:
        return context.rules.canonical(raw, agent_id=context.requester.agent_id)
    except InvalidSessionKey as error:
        raise SessionNotResolved(f"invalid sessionKey: {error}") from error


async def _resolved(
    context: ToolContext, raw: str, key: str, found: StoredSession | None, access: Access
) -> StoredSession:
    """``resolve_session`` once the session stored under ``key`` was read (``found``)."""
    store = context.store
    policy = context.access
    reference = raw.strip()
    a_key = looks_like_session_key(raw) and not looks_like_session_id(raw)
    if found is not None and found.state.status == "active":
        target = found.state.policy_target(context.rules)
        refusal = policy.reach_refusal(
            target, reference, access=access, target_key=key, target_agent=found.state.agent_id
        )
        if refusal:
            if not a_key:
                # Hidden is absent, in time too (decision 41): a missing session named so
                # is looked up by sessionId before it is refused; a hidden one is too.
                await store.sessions_by_session_id(reference.lower())
            raise _refused(context, refusal, reference, key)
        return found
    if a_key:
        # Not stored: refused exactly as a stored session would be, so the answer says
        # nothing about whether the session exists.
        refusal = policy.reach_refusal(
            None, reference, access=access, target_key=key, target_agent=agent_id_of(key)
        )
        if refusal:
            raise _refused(context, refusal, reference, key)
        raise SessionNotResolved(f"Session not found: {raw}")
    matches = [
        stored
        for stored in await store.sessions_by_session_id(reference.lower())
        if stored.state.status == "active"
        and policy.sees(stored.state.policy_target(context.rules))
    ]
    if len(matches) == 1:
        return matches[0]
    sandbox_refusal = policy.sandbox_refusal(None, reference)
    if sandbox_refusal:
        if looks_like_session_id(raw):
            raise SessionRefused(sandbox_refusal, reference=reference)
        # A key names what a stored session it may not see would: the same answer, its
        # sessionKey included (leaving it out only when nothing is stored tells).
        raise _refused(context, sandbox_refusal, reference, key)
    if len(matches) > 1:
        keys = ", ".join(m.state.key for m in matches)
        raise SessionNotResolved(f"Multiple sessions found for sessionId: {raw} ({keys})")
    if not looks_like_session_id(raw):
        # Read as a key (`webchat:dm:alice`): outside the scope, what a stored session
        # under it would get, so a missing one and a hidden one answer alike.
        refusal = policy.reach_refusal(
            None, reference, access=access, target_key=key, target_agent=agent_id_of(key)
        )
        if refusal:
            raise _refused(context, refusal, reference, key)
    raise SessionNotResolved(
        f"Session not found: {raw} (use the full sessionKey from sessions_list)"
    )


async def resolve_label(context: ToolContext, label: str, agent_id: str | None) -> str:
    """The canonical key of the one session with ``label`` the requester may reach
    (``sessions_send`` by label, openclaw-behaviour.md §6.2 step 2)."""
    policy = context.access
    requested = normalize_agent_id(agent_id) if agent_id else None
    reference = f"label={label}"
    refusal = policy.label_refusal(requested)
    if refusal:
        raise SessionRefused(refusal, reference=reference)
    # A sandboxed lookup is limited to the requester's own agent.
    scope = context.requester.agent_id if policy.sandboxed else requested
    matches = [
        stored
        for stored in await context.store.sessions_by_label(label)
        if (scope is None or stored.state.agent_id == scope)
        and policy.sees(stored.state.policy_target(context.rules))
    ]
    if len(matches) == 1:
        return matches[0].state.key
    sandbox_refusal = policy.sandbox_refusal(None, reference)
    if sandbox_refusal:
        raise SessionRefused(sandbox_refusal, reference=reference)
    if not matches:
        raise SessionNotResolved(f"No session found with label: {label}")
    keys = ", ".join(stored.state.key for stored in matches[:2])
    raise SessionNotResolved(f"Multiple sessions found with label: {label} ({keys})")


def _refused(context: ToolContext, refusal: Refusal, reference: str, key: str) -> SessionRefused:
    return SessionRefused(
        refusal, reference=reference, target_key=key, display_key=context.display_key(key)
    )
