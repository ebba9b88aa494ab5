"""``sessions_list``: rows from the read model, newest first, filtered, then limited.

The filters agents use (OpenClaw's ``label``, ``agentId``, ``search``, ``archived``) are
matched here, on the rows the store's existing reads give: a label's sessions through its
index, anything else by walking the sessions newest first a page at a time until the
limit is met. Matching in Python answers the same on every store (SQLite's ``LOWER``
folds ASCII only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.ports.session_read_model import (
    SessionListing,
    SessionPage,
    SessionQuery,
)
from sessionwire.application.ports.store import Store
from sessionwire.application.tools.params import SessionsListParams
from sessionwire.application.tools.results import ReadAnswer, SessionRow, SessionsListAnswer
from sessionwire.domain.keys import (
    KeyRules,
    SessionKind,
    agent_id_of,
    derive_channel,
    normalize_agent_id,
)
from sessionwire.domain.policy import list_warning
from sessionwire.domain.session_ids import to_millis

# Rows read per trip while walking the sessions for a filter the store cannot apply.
SCAN_PAGE = 200


async def sessions_list(context: ToolContext, params: SessionsListParams) -> ReadAnswer:
    rules = context.rules
    since = None
    if params.activeMinutes is not None:
        since = to_millis(context.clock.now()) - params.activeMinutes * 60_000
    access = context.access
    queries = visible_queries(
        context, limit=params.limit, kinds=params.kinds, since=since, agent_id=params.agentId
    )
    message_limit = params.messageLimit

    def listed(store: Store) -> list[tuple[SessionListing, list[str] | None]]:
        # What the scope needs (the agents present, the spawn tree), the rows and their
        # last messages in one trip off the loop.
        filters = [
            RowFilter(
                query=each,
                rules=rules,
                label=params.label,
                search=params.search.lower() if params.search else None,
                archived=params.archived,
            )
            for each in queries(store)
        ]
        found: dict[str, SessionListing] = {}
        for matching in filters:
            found.update((listing.key, listing) for listing in matching.rows(store))
        newest = sorted(found.values(), key=newest_first)[: params.limit]
        if message_limit <= 0:
            return [(listing, None) for listing in newest]
        return [
            (
                listing,
                store.transcript(UUID(listing.stream), limit=message_limit, include_tools=False),
            )
            for listing in newest
        ]

    rows = shown_rows(context, await context.store.read(listed))
    answer: SessionsListAnswer = {"count": len(rows), "sessions": rows}
    mode = access.effective_visibility
    if mode != "all":
        # Say that the list is scoped, so that a short one is not read as everything
        # (OpenClaw PR #86944).
        answer["visibility"] = {"mode": mode, "restricted": True, "warning": list_warning(mode)}
    return ReadAnswer(answer)


def visible_queries(
    context: ToolContext,
    *,
    limit: int,
    kinds: frozenset[str] | None = None,
    since: int | None = None,
    agent_id: str | None = None,
) -> Callable[[Store], list[SessionQuery]]:
    """The requester's visibility scope as read-model queries (run on a reader thread):
    the sessions their rows together hold are those the policy lets the requester list
    (domain/policy.py ``sees``), each newest first. ``sessions_list`` merges and limits
    them; ``sessions_search`` searches only the transcripts of their sessions."""
    rules = context.rules
    excluded = {"unknown"} if rules.is_global else {"global", "unknown"}
    access = context.access
    if access.sandboxed:
        # A sandboxed session lists only what it spawned (§9), never global or unknown.
        excluded = {"global", "unknown"}
    scope = access.list_scope()
    own = context.requester.agent_id
    requester = context.requester.key
    present = agents_present(context)
    asked = normalize_agent_id(agent_id) if agent_id is not None else None

    def only_asked(ids: frozenset[str] | None) -> frozenset[str] | None:
        # `agentId`: one agent, if the requester may see it at all (else nothing).
        if asked is None:
            return ids
        return frozenset({asked} if ids is None or asked in ids else ())

    def query(*, agent_ids: frozenset[str] | None, keys: frozenset[str] | None) -> SessionQuery:
        return SessionQuery(
            limit=limit,
            updated_since_ms=since,
            kinds=kinds,
            agent_ids=only_asked(agent_ids),
            exclude_keys=frozenset(excluded),
            keys=keys,
        )

    def queries(store: Store) -> list[SessionQuery]:
        agents = present(store)
        found: list[SessionQuery] = []
        if scope.every:
            found.append(query(agent_ids=agents, keys=None))
        if scope.agent:
            found.append(query(agent_ids=frozenset({own}), keys=None))
        if not scope.every:
            wanted = {requester} if scope.requester else set()
            # With its whole agent in scope, only the tree's other agents' sessions add
            # anything: no walk when no other agent's session may be listed.
            if scope.tree and not (scope.agent and agents == frozenset({own})):
                wanted |= spawn_tree(store, requester)
            if scope.agent:
                wanted = {key for key in wanted if agent_id_of(key) != own}
            if wanted:
                found.append(query(agent_ids=agents, keys=frozenset(wanted)))
        return found

    return queries


# Spawns nest at most five deep (agents.defaults.subagents.maxSpawnDepth); a bound anyway.
MAX_TREE_DEPTH = 16
MAX_TREE_SESSIONS = 10_000


def spawn_tree(store: Store, key: str) -> frozenset[str]:
    """The active sessions ``key`` spawned, transitively (on a reader thread): one query
    per level of the tree."""
    found: set[str] = set()
    level = frozenset({key})
    for _ in range(MAX_TREE_DEPTH):
        query = SessionQuery(limit=MAX_TREE_SESSIONS, spawned_by_any=level)
        children = {listing.key for listing in store.list_listings(query)}
        level = frozenset(children - found - {key})
        if not level:
            break
        found |= level
    return frozenset(found)


@dataclass(frozen=True)
class RowFilter:
    """``query`` (what the read model filters) plus the agent-facing filters."""

    query: SessionQuery
    rules: KeyRules
    label: str | None
    search: str | None
    """Lower-cased."""
    archived: bool

    def rows(self, store: Store) -> list[SessionListing]:
        if self.label is None and self.search is None and not self.archived:
            return store.list_listings(self.query)
        for named in (self.query.agent_ids, self.query.keys):
            if named is not None and not named:
                return []
        if self.label is not None and not self.archived:
            # The label's index holds every active session with it: few rows.
            found = sorted(store.listings_by_label(self.label), key=newest_first)
            candidates: Iterator[SessionListing] = iter(found)
        else:
            candidates = self._walk(store)
        rows: list[SessionListing] = []
        for stored in candidates:
            if self.query.limit <= len(rows):
                break
            if self.matches(stored):
                rows.append(stored)
        return rows

    def _walk(self, store: Store) -> Iterator[SessionListing]:
        """Sessions of the listed status, newest first, a page at a time, ending at the
        activity window (the order is by ``updatedAt``, so nothing older can match)."""
        agents = self.query.agent_ids
        page = SessionPage(
            limit=SCAN_PAGE,
            status="archived" if self.archived else "active",
            agent_id=next(iter(agents)) if agents is not None and len(agents) == 1 else None,
        )
        since = self.query.updated_since_ms
        while True:
            found = store.listing_page(page)
            for listing in found:
                if since is not None and listing.updated_at < since:
                    return
                yield listing
            if len(found) < SCAN_PAGE:
                return
            last = found[-1]
            page = SessionPage(
                limit=page.limit,
                status=page.status,
                agent_id=page.agent_id,
                after=(last.updated_at, last.key),
            )

    def matches(self, state: SessionListing) -> bool:
        query = self.query
        if state.status != ("archived" if self.archived else "active"):
            return False
        if query.updated_since_ms is not None and state.updated_at < query.updated_since_ms:
            return False
        if query.agent_ids is not None and state.agent_id not in query.agent_ids:
            return False
        if query.kinds is not None and self.rules.kind(state.key, state.chat_type) not in (
            query.kinds
        ):
            return False
        if query.spawned_by is not None and state.spawned_by != query.spawned_by:
            return False
        if query.keys is not None and state.key not in query.keys:
            return False
        if state.key in query.exclude_keys:
            return False
        if self.label is not None and state.label != self.label:
            return False
        return self.search is None or any(
            self.search in field.lower()
            for field in (state.key, state.session_id, state.label, state.display_name)
            if field
        )


def newest_first(listing: SessionListing) -> tuple[int, str]:
    """The listing's order (``updatedAt`` descending, then key) as a sort key."""
    return (-listing.updated_at, listing.key)


def agents_present(context: ToolContext) -> Callable[[Store], frozenset[str] | None]:
    """The agents whose sessions the requester may list (None: every agent), as read on
    the reader thread: the store is read only when the allow list needs the agents that
    have sessions."""
    a2a = context.a2a
    own = context.requester.agent_id
    if a2a.open_to_all():
        return lambda _: None
    if not a2a.enabled or not a2a.matches(own):
        return lambda _: frozenset({own})
    configured = {entry.id.strip().lower() for entry in context.config.agents.list}

    def visible(store: Store) -> frozenset[str]:
        present = set(store.agent_ids())
        return frozenset({own} | {a for a in configured | present if a2a.is_allowed(own, a)})

    return visible


def row(context: ToolContext, listing: SessionListing, texts: list[str] | None) -> SessionRow:
    """One row; ``texts``: its last messages as stored, when the caller asked for them."""
    return shown_rows(context, [(listing, texts)])[0]


def shown_rows(
    context: ToolContext, found: list[tuple[SessionListing, list[str] | None]]
) -> list[SessionRow]:
    """The rows of ``found`` listings, each with its last messages when given. Built
    straight from the listings' fields: what every row looks up the same way (the
    requester's main key, the store's location) is looked up once."""
    rules = context.rules
    display_key = context.display_key
    location = context.store.location
    shown: list[SessionRow] = []
    for listing, texts in found:
        (
            _,
            key,
            session_id,
            _,
            _,
            _,
            label,
            updated_at,
            channel,
            chat_type,
            display_name,
            last_channel,
            last_to,
            last_account_id,
            model,
            total_tokens,
            context_tokens,
            thinking_level,
            verbose_level,
            system_sent,
            aborted_last_run,
            send_policy,
        ) = listing
        kind, channel_shown = _kind_and_channel(rules, key, chat_type, channel, last_channel)
        one: SessionRow = {
            "key": display_key(key),
            "kind": kind,
            "channel": channel_shown,
            "label": label,
            "displayName": display_name or label,
            "updatedAt": updated_at,
            "sessionId": session_id,
            "model": model,
            "contextTokens": context_tokens,
            "totalTokens": total_tokens,
            "thinkingLevel": thinking_level,
            "verboseLevel": verbose_level,
            "systemSent": system_sent,
            "abortedLastRun": aborted_last_run,
            "sendPolicy": send_policy,
            "lastChannel": last_channel,
            "lastTo": last_to,
            "lastAccountId": last_account_id,
            "deliveryContext": (
                {"channel": last_channel, "to": last_to, "accountId": last_account_id}
                if last_channel or last_to or last_account_id
                else None
            ),
            # A reference an auditor can follow: the store, and the sessionId its tools accept.
            "transcriptPath": f"{location}#{session_id}",
        }
        if texts is not None:
            one["messages"] = context.reader_messages(key, texts)
        shown.append(one)
    return shown


@lru_cache(maxsize=4096)
def _kind_and_channel(
    rules: KeyRules, key: str, chat_type: str | None, channel: str | None, last: str | None
) -> tuple[SessionKind, str]:
    """A row's ``kind`` and ``channel``: a pure function of its arguments, and a list shows
    the same recent sessions call after call, so each key is parsed once (bounded, as
    ``KeyRules.canonical``'s cache is)."""
    kind, group_channel = rules.kind_and_group_channel(key, chat_type)
    return kind, derive_channel(
        kind, channel=channel, last_channel=last, group_channel=group_channel
    )
