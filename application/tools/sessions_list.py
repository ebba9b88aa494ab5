"""``sessions_list``: rows from the read model, newest first, filtered, then limited.

The filters agents use (OpenClaw's ``label``, ``agentId``, ``search``, ``archived``) are
matched here, on the rows the store's existing reads give: a label's sessions through its
index, anything else by walking the sessions newest first a page at a time until the
limit is met. Matching in Python answers the same on every store (SQLite's ``LOWER``
folds ASCII only).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sessionwire.application.context import ToolContext
from sessionwire.application.ports.session_read_model import (
    SessionPage,
    SessionQuery,
    StoredSession,
)
from sessionwire.application.ports.store import Store
from sessionwire.application.tools.params import SessionsListParams
from sessionwire.application.tools.results import ReadAnswer, SessionRow, SessionsListAnswer
from sessionwire.domain.keys import KeyRules, agent_id_of, derive_channel, normalize_agent_id
from sessionwire.domain.policy import list_warning
from sessionwire.domain.session import to_millis

# Rows read per trip while walking the sessions for a filter the store cannot apply.
SCAN_PAGE = 200


async def sessions_list(context: ToolContext, params: SessionsListParams) -> ReadAnswer:
    rules = context.rules
    excluded = {"unknown"} if rules.is_global else {"global", "unknown"}
    since = None
    if params.activeMinutes is not None:
        since = to_millis(context.clock.now()) - params.activeMinutes * 60_000
    access = context.access
    if access.sandboxed:
        # A sandboxed session lists only what it spawned (§9), never global or unknown.
        excluded = {"global", "unknown"}
    scope = access.list_scope()
    own = context.requester.agent_id
    agents = await visible_agents(context)
    asked = normalize_agent_id(params.agentId) if params.agentId is not None else None

    def only_asked(ids: frozenset[str] | None) -> frozenset[str] | None:
        # `agentId`: one agent, if the requester may see it at all (else nothing).
        if asked is None:
            return ids
        return frozenset({asked} if ids is None or asked in ids else ())

    def query(*, agent_ids: frozenset[str] | None, keys: frozenset[str] | None) -> SessionQuery:
        return SessionQuery(
            limit=params.limit,
            updated_since_ms=since,
            kinds=params.kinds,
            agent_ids=only_asked(agent_ids),
            exclude_keys=frozenset(excluded),
            keys=keys,
        )

    # The scope as queries whose rows together are what the policy lets the requester
    # see (domain/policy.py ``sees``): each newest first, merged, then limited.
    queries: list[SessionQuery] = []
    if scope.every:
        queries.append(query(agent_ids=agents, keys=None))
    if scope.agent:
        queries.append(query(agent_ids=frozenset({own}), keys=None))
    if not scope.every:
        requester = context.requester.key
        wanted = {requester} if scope.requester else set()
        # With its whole agent in scope, only the tree's other agents' sessions add
        # anything: no walk when no other agent's session may be listed.
        if scope.tree and not (scope.agent and agents == frozenset({own})):
            wanted |= await context.store.read(spawn_tree, requester)
        if scope.agent:
            wanted = {key for key in wanted if agent_id_of(key) != own}
        if wanted:
            queries.append(query(agent_ids=agents, keys=frozenset(wanted)))
    message_limit = params.messageLimit
    filters = [
        RowFilter(
            query=each,
            rules=rules,
            label=params.label,
            search=params.search.lower() if params.search else None,
            archived=params.archived,
        )
        for each in queries
    ]

    def listed(store: Store) -> list[tuple[StoredSession, list[str] | None]]:
        # The rows and their last messages in one trip off the loop.
        found: dict[str, StoredSession] = {}
        for matching in filters:
            found.update((stored.state.key, stored) for stored in matching.rows(store))
        newest = sorted(found.values(), key=newest_first)[: params.limit]
        return [
            (
                stored,
                store.transcript(stored.id, limit=message_limit, include_tools=False)
                if message_limit > 0
                else None,
            )
            for stored in newest
        ]

    rows = [row(context, stored, texts) for stored, texts in await context.store.read(listed)]
    answer: SessionsListAnswer = {"count": len(rows), "sessions": rows}
    mode = access.effective_visibility
    if mode != "all":
        # Say that the list is scoped, so that a short one is not read as everything
        # (OpenClaw PR #86944).
        answer["visibility"] = {"mode": mode, "restricted": True, "warning": list_warning(mode)}
    return ReadAnswer(answer)


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
        children = {stored.state.key for stored in store.list_sessions(query)}
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

    def rows(self, store: Store) -> list[StoredSession]:
        if self.label is None and self.search is None and not self.archived:
            return store.list_sessions(self.query)
        for named in (self.query.agent_ids, self.query.keys):
            if named is not None and not named:
                return []
        if self.label is not None and not self.archived:
            # The label's index holds every active session with it: few rows.
            found = sorted(store.sessions_by_label(self.label), key=newest_first)
            candidates: Iterator[StoredSession] = iter(found)
        else:
            candidates = self._walk(store)
        rows: list[StoredSession] = []
        for stored in candidates:
            if self.query.limit <= len(rows):
                break
            if self.matches(stored):
                rows.append(stored)
        return rows

    def _walk(self, store: Store) -> Iterator[StoredSession]:
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
            found = store.session_page(page)
            for stored in found:
                if since is not None and stored.state.updated_at < since:
                    return
                yield stored
            if len(found) < SCAN_PAGE:
                return
            last = found[-1].state
            page = SessionPage(
                limit=page.limit,
                status=page.status,
                agent_id=page.agent_id,
                after=(last.updated_at, last.key),
            )

    def matches(self, stored: StoredSession) -> bool:
        state = stored.state
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


def newest_first(stored: StoredSession) -> tuple[int, str]:
    """The listing's order (``updatedAt`` descending, then key) as a sort key."""
    return (-stored.state.updated_at, stored.state.key)


async def visible_agents(context: ToolContext) -> frozenset[str] | None:
    """The agents whose sessions the requester may list; None means every agent."""
    a2a = context.a2a
    own = context.requester.agent_id
    if a2a.open_to_all():
        return None
    if not a2a.enabled or not a2a.matches(own):
        return frozenset({own})
    configured = {entry.id.strip().lower() for entry in context.config.agents.list}
    present = set(await context.store.agent_ids())
    return frozenset({own} | {a for a in configured | present if a2a.is_allowed(own, a)})


def row(context: ToolContext, stored: StoredSession, texts: list[str] | None) -> SessionRow:
    """One row; ``texts``: its last messages as stored, when the caller asked for them."""
    state = stored.state
    kind, group_channel = context.rules.kind_and_group_channel(state.key, state.chat_type)
    channel = derive_channel(
        kind, channel=state.channel, last_channel=state.last_channel, group_channel=group_channel
    )
    delivery = None
    if state.last_channel or state.last_to or state.last_account_id:
        delivery = {
            "channel": state.last_channel,
            "to": state.last_to,
            "accountId": state.last_account_id,
        }
    shown: SessionRow = {
        "key": context.display_key(state.key),
        "kind": kind,
        "channel": channel,
        "label": state.label,
        "displayName": state.display_name or state.label,
        "updatedAt": state.updated_at,
        "sessionId": state.session_id,
        "model": state.model,
        "contextTokens": state.context_tokens,
        "totalTokens": state.total_tokens,
        "thinkingLevel": state.thinking_level,
        "verboseLevel": state.verbose_level,
        "systemSent": state.system_sent,
        "abortedLastRun": state.aborted_last_run,
        "sendPolicy": state.send_policy,
        "lastChannel": state.last_channel,
        "lastTo": state.last_to,
        "lastAccountId": state.last_account_id,
        "deliveryContext": delivery,
        "transcriptPath": context.transcript_path(state),
    }
    if texts is not None:
        shown["messages"] = context.reader_messages(state.key, texts)
    return shown
