"""Session keys: parse, canonicalise, classify and display them.

OpenClaw's rules (openclaw-behaviour.md §2) with the contract's decision 5.1: every key
is stored in the canonical form ``agent:<agentId>:<rest>`` and its kind and display key
are computed on that form, so ``agent:main:main`` lists as ``main`` with kind ``main``.
Keys are case-insensitive: the canonical form is lower-cased, so ``AGENT:Main:MAIN`` and
``agent:main:main`` name the same session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

from sessionwire.domain.errors import SessionwireError

DEFAULT_AGENT_ID = "main"
DEFAULT_MAIN_KEY = "main"
RESERVED_KEYS = frozenset({"global", "unknown"})
MAX_KEY_LENGTH = 512

SessionKind = Literal["main", "group", "cron", "hook", "node", "other"]
SESSION_KINDS: tuple[SessionKind, ...] = ("main", "group", "cron", "hook", "node", "other")

_VALID_AGENT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$", re.IGNORECASE)
_INVALID_AGENT_ID_CHARS = re.compile(r"[^a-z0-9_-]+")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class InvalidSessionKey(SessionwireError, ValueError):
    """A session key that cannot name a session; the message says why."""


def is_encodable(text: str) -> bool:
    """False for strings holding lone surrogates, which no store or JSON writer accepts."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def has_control_characters(text: str) -> bool:
    return _CONTROL_CHARS.search(text) is not None


def normalize_agent_id(value: str | None) -> str:
    """Agent ids are lower-case ``[a-z0-9][a-z0-9_-]{0,63}``; anything else is mapped onto that."""
    trimmed = (value or "").strip()
    if not trimmed:
        return DEFAULT_AGENT_ID
    if _VALID_AGENT_ID.match(trimmed):
        return trimmed.lower()
    collapsed = _INVALID_AGENT_ID_CHARS.sub("-", trimmed.lower()).strip("-")[:64]
    return collapsed or DEFAULT_AGENT_ID


def normalize_main_key(value: str | None) -> str:
    return (value or "").strip().lower() or DEFAULT_MAIN_KEY


@dataclass(frozen=True)
class ParsedAgentKey:
    agent_id: str
    rest: str


def parse_agent_session_key(key: str | None) -> ParsedAgentKey | None:
    """``agent:<id>:<rest>`` split in parts; empty parts drop, so ``agent::x`` fails."""
    if key and key.startswith("agent:") and "::" not in key and key.count(":") >= 2:
        # A canonical key (every stored one): no part is empty, so splitting twice
        # splits it as the general case below does, without a list of its parts.
        last = key[-1]
        if last != ":" and not last.isspace():
            _, agent_id, rest = key.split(":", 2)
            return ParsedAgentKey(agent_id=agent_id, rest=rest)
    parts = [part for part in (key or "").strip().split(":") if part]
    if len(parts) < 3 or parts[0].lower() != "agent":
        return None
    return ParsedAgentKey(agent_id=parts[1], rest=":".join(parts[2:]))


def is_subagent_key(key: str) -> bool:
    lowered = key.strip().lower()
    if lowered.startswith("subagent:"):
        return True
    parsed = parse_agent_session_key(lowered)
    return parsed is not None and parsed.rest.startswith("subagent:")


def is_thread_key(key: str) -> bool:
    """A key that ends in ``:thread:<id>``: a chat thread's session (OpenClaw's generic
    thread suffix), which ``sessions_send`` never targets."""
    head, marker, thread_id = key.strip().lower().rpartition(":thread:")
    return bool(marker and head and thread_id.strip())


def agent_id_of(key: str) -> str:
    """The agent a key belongs to; un-prefixed keys belong to ``main`` (OpenClaw's constant)."""
    parsed = parse_agent_session_key(key)
    return normalize_agent_id(parsed.agent_id if parsed else None)


def looks_like_session_id(value: str) -> bool:
    return bool(_UUID.match(value.strip()))


def looks_like_session_key(value: str) -> bool:
    v = value.strip().lower()
    if v in {"main", "global", "unknown"}:
        return True
    if v.startswith(("agent:", "cron:", "hook:", "node-", "node:", "acp:", "subagent:")):
        return True
    return ":group:" in v or ":channel:" in v


@dataclass(frozen=True)
class KeyRules:
    """The parts of the configuration that shape keys (session.mainKey, session.scope)."""

    main_key: str = DEFAULT_MAIN_KEY
    scope: str = "per-sender"
    default_agent_id: str = DEFAULT_AGENT_ID

    @property
    def is_global(self) -> bool:
        return self.scope == "global"

    def main_session_key(self, agent_id: str) -> str:
        if self.is_global:
            return "global"
        return f"agent:{normalize_agent_id(agent_id)}:{normalize_main_key(self.main_key)}"

    def check(self, raw: str) -> str:
        """Reject what can never be a key, with a message a user understands."""
        if not isinstance(raw, str):
            raise InvalidSessionKey("session key must be a string")
        key = raw.strip()
        if not key:
            raise InvalidSessionKey("session key is empty")
        if len(key) > MAX_KEY_LENGTH:
            raise InvalidSessionKey(
                f"session key is too long ({len(key)} characters, max {MAX_KEY_LENGTH})"
            )
        if _CONTROL_CHARS.search(key):
            raise InvalidSessionKey("session key contains control characters")
        if not is_encodable(key):
            raise InvalidSessionKey("session key is not valid Unicode text (lone surrogate)")
        return key

    def canonical(self, raw: str, *, agent_id: str | None = None) -> str:
        """The one stored form of a key.

        ``agent_id`` is the agent the key is read for (the calling agent); bare keys
        such as ``main`` or ``cron:job-1`` belong to it, or to the default agent when
        no agent is calling (contract decision 5.1).
        """
        if type(raw) is str:
            # Every recorded message and tool call canonicalises its key: the same few
            # keys, over and over. Bounded; a refused key raises again each time.
            return _canonical(self, raw, agent_id)
        return self._canonical(raw, agent_id=agent_id)

    def _canonical(self, raw: str, *, agent_id: str | None) -> str:
        key = self.check(raw).lower()
        if key in RESERVED_KEYS:
            return key
        main_key = normalize_main_key(self.main_key)
        if key.startswith("agent:"):
            parsed = parse_agent_session_key(key)
            if parsed is None:
                raise InvalidSessionKey(
                    f"invalid session key: {raw.strip()!r} (expected agent:<agentId>:<rest>)"
                )
            owner = normalize_agent_id(parsed.agent_id)
            rest = parsed.rest
        else:
            owner = normalize_agent_id(agent_id or self.default_agent_id)
            rest = ":".join(part for part in key.split(":") if part)
            if not rest:
                raise InvalidSessionKey(f"invalid session key: {raw.strip()!r}")
        if rest in {main_key, DEFAULT_MAIN_KEY}:
            return self.main_session_key(owner)
        canonical = f"agent:{owner}:{rest}"
        if len(canonical) > MAX_KEY_LENGTH:
            # Checked again on the canonical form, so every key we hand out can be read back.
            raise InvalidSessionKey(
                f"session key is too long ({len(canonical)} characters as "
                f"agent:{owner}:…, max {MAX_KEY_LENGTH})"
            )
        return canonical

    def rest_of(self, canonical_key: str) -> str:
        parsed = parse_agent_session_key(canonical_key)
        return parsed.rest if parsed else canonical_key

    def is_main(self, canonical_key: str) -> bool:
        return self._is_main(canonical_key, self.rest_of(canonical_key))

    def _is_main(self, canonical_key: str, rest: str) -> bool:
        if canonical_key == "global":
            return self.is_global
        return rest == self._main_rest

    @cached_property
    def _main_rest(self) -> str:
        # Computed once: every listed row and every policy check compares against it.
        return normalize_main_key(self.main_key)

    def kind(self, canonical_key: str, chat_type: str | None = None) -> SessionKind:
        """Classification of openclaw-behaviour.md §2.4, on the canonical key's rest."""
        return self._kind(canonical_key, self.rest_of(canonical_key), chat_type)

    def kind_and_group_channel(
        self, canonical_key: str, chat_type: str | None = None
    ) -> tuple[SessionKind, str | None]:
        """``kind`` and ``group_channel`` from one parse of the key (a listed row shows both)."""
        rest = self.rest_of(canonical_key)
        return self._kind(canonical_key, rest, chat_type), _group_channel(rest)

    def _kind(self, canonical_key: str, rest: str, chat_type: str | None) -> SessionKind:
        if self._is_main(canonical_key, rest):
            return "main"
        if rest.startswith("cron:"):
            return "cron"
        if rest.startswith("hook:"):
            return "hook"
        if rest.startswith(("node-", "node:")):
            return "node"
        if chat_type in {"group", "channel"}:
            return "group"
        if ":group:" in f":{rest}" or ":channel:" in f":{rest}":
            return "group"
        return "other"

    def display(self, canonical_key: str, *, agent_id: str | None = None) -> str:
        """``main`` for the calling agent's main session (and ``global``); the key otherwise."""
        return "main" if canonical_key == self.main_key_of(agent_id) else canonical_key

    def main_key_of(self, agent_id: str | None) -> str:
        """The key ``display`` shows as ``main`` to ``agent_id`` (``global`` in global scope)."""
        return self.main_session_key(normalize_agent_id(agent_id or self.default_agent_id))

    def group_channel(self, canonical_key: str) -> str | None:
        """``discord`` for ``agent:x:discord:group:dev``: the channel a group key names."""
        return _group_channel(self.rest_of(canonical_key))


def _group_channel(rest: str) -> str | None:
    parts = rest.split(":")
    if len(parts) >= 3 and parts[1] in {"group", "channel"}:
        return parts[0]
    return None


def derive_channel(
    kind: SessionKind,
    *,
    channel: str | None,
    last_channel: str | None,
    group_channel: str | None,
) -> str:
    """The row's ``channel`` field (openclaw-behaviour.md §2.5)."""
    if kind in {"cron", "hook", "node"}:
        return "internal"
    for candidate in (channel, last_channel, group_channel):
        if candidate and candidate.strip():
            return candidate.strip()
    return "unknown"


@lru_cache(maxsize=4096)
def _canonical(rules: KeyRules, raw: str, agent_id: str | None) -> str:
    return rules._canonical(raw, agent_id=agent_id)
