"""Run status and listings (``gw.run``, ``gw.runs``), served from the runs read model.

With a requester, a run is seen only when its session is one the requester may read the
history of (the tools' one access policy, domain/policy.py): a hidden run is "not
found", exactly like a missing one, so an answer never tells what is hidden. Each
answer is read and filtered whole on a reader thread of the store (decision 23).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import Requester, ToolContext
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.run_read_model import RUN_STATUSES, RunQuery, StoredRun
from sessionwire.application.ports.store import Store
from sessionwire.domain.policy import AccessPolicy
from sessionwire.domain.run import RunState

RUNS_DEFAULT_LIMIT = 50
RUNS_MAX_LIMIT = 1000
# Rows read per page while a requester's listing skips runs it may not see.
VISIBLE_PAGE = 200


def run_uuid(run_id: object) -> str | None:
    """The canonical form of a run id, or None when it is not a UUID at all."""
    if not isinstance(run_id, str):
        return None
    try:
        return str(UUID(run_id.strip()))
    except ValueError:
        return None


class RunQueries:
    def __init__(self, store: AsyncStore, config: GatewayConfig, clock: Clock) -> None:
        self.store = store
        self.config = config
        self.clock = clock

    async def find(self, run_id: object, *, requester: str | None = None) -> StoredRun | None:
        """The run, if it exists and ``requester`` (when given) may see it."""
        key = run_uuid(run_id)
        if key is None:
            return None
        visibility = None if requester is None else _Visibility(self, requester)
        return await self.store.read(_find, key, visibility)

    async def run(self, run_id: object, *, requester: str | None = None) -> dict[str, Any] | None:
        found = await self.find(run_id, requester=requester)
        return None if found is None else found.to_json_dict()

    async def runs(
        self,
        *,
        session_key: str | None = None,
        status: str | None = None,
        trace_id: str | None = None,
        limit: int = RUNS_DEFAULT_LIMIT,
        requester: str | None = None,
    ) -> dict[str, Any]:
        if status is not None and status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= RUNS_MAX_LIMIT
        ):
            raise ValueError(f"limit must be an integer from 1 to {RUNS_MAX_LIMIT}, not {limit!r}")
        for name, value in (("session_key", session_key), ("trace_id", trace_id)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string")
        key = None
        if session_key is not None:
            # As the tools take keys: an alias or a short key names its canonical session.
            key = self.config.key_rules.canonical(session_key)
        query = RunQuery(limit=limit, session_key=key, status=status, trace_id=trace_id)
        if requester is None:
            found = await self.store.read(_listed, query)
        else:
            found = await self.store.read(_visible_runs, query, _Visibility(self, requester))
        return {"runs": [run.to_json_dict() for run in found]}


def _find(store: Store, key: str, visibility: _Visibility | None) -> StoredRun | None:
    found = store.run(key)
    if found is None or (visibility is not None and not visibility.sees(store, found)):
        return None
    return _with_question(store, found)


def _listed(store: Store, query: RunQuery) -> list[StoredRun]:
    return [_with_question(store, run) for run in store.list_runs(query)]


def _with_question(store: Store, run: StoredRun) -> StoredRun:
    """A waiting run with what it asks, from its own row (the read model keeps only its
    status): one more read for a run that waits, none for any other."""
    if run.status != "input_required":
        return run
    stored = store.work(UUID(run.run_id))
    if stored is None:
        return run
    asked = RunState.model_validate_json(stored.state_json).input_request
    if asked is None:
        return run
    return dataclasses.replace(run, input_request=asked.to_json())


def _visible_runs(store: Store, query: RunQuery, visibility: _Visibility) -> list[StoredRun]:
    """On a reader thread: page on (keyset) past hidden runs until the limit is met or
    the runs run out."""
    found: list[StoredRun] = []
    page = RunQuery(
        limit=max(query.limit, VISIBLE_PAGE),
        session_key=query.session_key,
        status=query.status,
        trace_id=query.trace_id,
    )
    while len(found) < query.limit:
        rows = store.list_runs(page)
        found.extend(_with_question(store, run) for run in rows if visibility.sees(store, run))
        if len(rows) < page.limit:
            break
        last = rows[-1]
        page = RunQuery(
            limit=page.limit,
            session_key=page.session_key,
            status=page.status,
            trace_id=page.trace_id,
            before=(last.created_at, last.run_id),
        )
    return found[: query.limit]


class _Visibility:
    """Which runs one requester may see, by their session (answers cached per session)."""

    def __init__(self, queries: RunQueries, requester: str) -> None:
        self._queries = queries
        self._rules = queries.config.key_rules
        caller = Requester.from_key(self._rules, requester)
        self._access: AccessPolicy = ToolContext(
            store=queries.store, config=queries.config, clock=queries.clock, requester=caller
        ).access
        self._seen: dict[str, bool] = {}

    def sees(self, store: Store, run: StoredRun) -> bool:
        known = self._seen.get(run.session_key)
        if known is None:
            known = self._seen[run.session_key] = self._sees_session(store, run.session_key)
        return known

    def _sees_session(self, store: Store, key: str) -> bool:
        # The rule sessions_history applies: the sandbox, the visibility scope, then
        # agent-to-agent history access.
        stored = store.session(key)
        if stored is None:
            return False
        refusal = self._access.reach_refusal(
            stored.state.policy_target(self._rules),
            key,
            access="history",
            target_key=key,
            target_agent=stored.state.agent_id,
        )
        return refusal is None
