"""The gateway methods the session tools rest on (openclaw-behaviour.md §11).

``sessions.list``, ``sessions.resolve``, ``sessions.patch``, ``chat.history`` and
``agent.wait`` as OpenClaw's gateway offers them to operators: no requester, so no
visibility or agent-to-agent filtering. Keys come back canonical (``agent:<id>:<rest>``).
A method either returns its result or raises ``MethodFailed`` (``invalid`` for bad
parameters, ``not_found`` for a missing session or run, ``forbidden`` for a policy).

``GatewayMethods(gateway, requester=key)`` scopes the methods to one session (an HTTP
token bound to it, contract decision 22): every answer then goes through the same
``AccessPolicy`` as the tools. Lists and lookups only see what the session may see (a
hidden session is "not found", exactly like a missing one), ``chat.history`` is refused
as ``sessions_history`` would be (and the refusal recorded), and ``sessions.patch`` is an
operator's method only.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError
from sessionwire.application.context import Requester, ToolContext
from sessionwire.application.forks import forked_window
from sessionwire.application.gateway import GatewayService, SessionNotFound
from sessionwire.application.ports.session_read_model import (
    SessionListing,
    SessionQuery,
    StoredSession,
    TranscriptWindow,
)
from sessionwire.application.tools.params import MAX_ACTIVE_MINUTES
from sessionwire.application.tools.read_result_models import SessionListRow
from sessionwire.application.tools.session_refs import (
    SessionNotResolved,
    SessionRefused,
    resolve_session,
)
from sessionwire.application.tools.sessions_history import MAX_HISTORY_BYTES, cap_bytes
from sessionwire.application.tools.sessions_list import row
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import InvalidSessionKey, normalize_agent_id
from sessionwire.domain.session import InvalidPatch, to_millis, validate_patch
from sessionwire.domain.transcript import clean_for_reader

LIST_DEFAULT_LIMIT = 200
LIST_MAX_LIMIT = 1000
HISTORY_DEFAULT_LIMIT = 200
HISTORY_MAX_LIMIT = 1000
WAIT_DEFAULT_MS = 30_000
# An HTTP request should not be held open for hours; a longer wait can simply be repeated.
WAIT_MAX_MS = 600_000
WAIT_POLL_SECONDS = 1.0


class MethodFailed(SessionwireError):
    """A method's refusal: ``code`` is ``invalid`` (bad parameters), ``not_found`` or
    ``forbidden`` (the scoped session may not do this)."""

    def __init__(self, code: Literal["invalid", "not_found", "forbidden"], message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _not_a_boolean(value: object) -> object:
    # JSON true is not the number 1, though pydantic's lax mode reads it so; 3.0 is 3,
    # as JSON Schema's "integer" says.
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


JsonInt = Annotated[int, BeforeValidator(_not_a_boolean)]
"""An integer parameter as JSON Schema reads one: 3 and 3.0, never true."""


class MethodModel(BaseModel):
    # Built at import (no defer_build): only the HTTP gateway imports these, and FastAPI
    # wraps each body model in a TypeAdapter with its own Field(alias=...) while it
    # silences pydantic's UnsupportedFieldAttributeWarning about that alias. A deferred
    # model put the build off to the first request or /openapi.json, outside that
    # silence: the warning was printed once `serve` was answering (issue 24).
    model_config = ConfigDict(extra="forbid", frozen=True)


# Parameters -----------------------------------------------------------------------------


class SessionsListMethodParams(MethodModel):
    limit: JsonInt = Field(default=LIST_DEFAULT_LIMIT, ge=1, description="clamped to 1000")
    activeMinutes: Annotated[int, Field(ge=1), BeforeValidator(_not_a_boolean)] | None = None
    agentId: str | None = Field(default=None, max_length=64)
    spawnedBy: str | None = Field(default=None, max_length=512)
    includeGlobal: bool = False
    includeUnknown: bool = False


class SessionsResolveParams(MethodModel):
    """Exactly one of ``key``, ``sessionId`` and ``label``."""

    key: str | None = Field(default=None, max_length=512)
    sessionId: str | None = Field(default=None, max_length=128)
    label: str | None = Field(default=None, max_length=256)
    agentId: str | None = Field(default=None, max_length=64)


class SessionsPatchParams(MethodModel):
    """``null`` clears a field; a field left out stays as it is."""

    key: str = Field(max_length=512)
    label: str | None = Field(default=None, max_length=256)
    model: str | None = Field(default=None, max_length=256)
    thinkingLevel: str | None = Field(default=None, max_length=32)
    verboseLevel: str | None = Field(default=None, max_length=32)
    sendPolicy: str | None = Field(default=None, max_length=32, description='"allow" or "deny"')
    busy: str | None = Field(
        default=None,
        max_length=32,
        description=(
            "what a sessions_send into this session does while a run of it is in flight: "
            '"enqueue", "reject" or "interrupt" (null inherits session.agentToAgent.busy)'
        ),
    )


class ChatHistoryParams(MethodModel):
    sessionKey: str = Field(max_length=512)
    limit: JsonInt = Field(default=HISTORY_DEFAULT_LIMIT, ge=1, le=HISTORY_MAX_LIMIT)


class AgentWaitParams(MethodModel):
    runId: str = Field(max_length=64)
    timeoutMs: JsonInt = Field(default=WAIT_DEFAULT_MS, ge=0, description="clamped to 600000")


# Results --------------------------------------------------------------------------------


class SessionsListMethodResult(MethodModel):
    ts: int
    path: str
    count: int
    sessions: list[SessionListRow]


class SessionsResolveResult(MethodModel):
    ok: Literal[True] = True
    key: str


class SessionsPatchResult(MethodModel):
    ok: Literal[True] = True
    path: str
    key: str
    entry: dict[str, Any]


class ChatHistoryResult(MethodModel):
    sessionKey: str
    sessionId: str
    messages: list[dict[str, Any]]
    thinkingLevel: str | None


class AgentWaitResult(MethodModel):
    runId: str
    status: Literal["ok", "error", "timeout"]
    startedAt: int | None = None
    endedAt: int | None = None
    error: str | None = None


# The methods ----------------------------------------------------------------------------


class GatewayMethods:
    """The gateway's methods over one open gateway: an operator's (``requester`` None)
    or scoped to the session ``requester``."""

    def __init__(self, gateway: GatewayService, *, requester: str | None = None) -> None:
        self.gateway = gateway
        self.rules = gateway.config.key_rules
        self.scope: ToolContext | None = None
        if requester is not None:
            self.scope = ToolContext(
                store=gateway.store,
                config=gateway.config,
                clock=gateway.clock,
                requester=Requester.from_key(self.rules, requester),
                services=gateway.services,
            )

    def _visible(self, stored: StoredSession) -> bool:
        return self.scope is None or self.scope.access.sees(stored.state.policy_target(self.rules))

    async def sessions_list(self, params: SessionsListMethodParams) -> SessionsListMethodResult:
        now = to_millis(self.gateway.clock.now())
        excluded = set()
        if not params.includeGlobal:
            excluded.add("global")
        if not params.includeUnknown:
            excluded.add("unknown")
        query = SessionQuery(
            limit=min(params.limit, LIST_MAX_LIMIT),
            # Beyond the tool's bound every session counts as active (as in sessions_list).
            updated_since_ms=(
                now - params.activeMinutes * 60_000
                if params.activeMinutes is not None and params.activeMinutes <= MAX_ACTIVE_MINUTES
                else None
            ),
            agent_ids=(
                frozenset({normalize_agent_id(params.agentId)})
                if params.agentId is not None
                else None
            ),
            spawned_by=self._canonical(params.spawnedBy) if params.spawnedBy else None,
            exclude_keys=frozenset(excluded),
        )
        context = self._context()
        rows = [
            self._row(context, stored)
            for stored in await self.gateway.store.list_sessions(query)
            if self._visible(stored)
        ]
        return SessionsListMethodResult(
            ts=now, path=self.gateway.store.location, count=len(rows), sessions=rows
        )

    async def sessions_resolve(self, params: SessionsResolveParams) -> SessionsResolveResult:
        given = [
            name
            for name, value in (
                ("key", params.key),
                ("sessionId", params.sessionId),
                ("label", params.label),
            )
            if value is not None
        ]
        if len(given) > 1:
            raise MethodFailed("invalid", "Provide either key, sessionId, or label (not multiple)")
        if not given:
            raise MethodFailed("invalid", "Either key, sessionId, or label is required")
        agent = normalize_agent_id(params.agentId) if params.agentId is not None else None
        if params.key is not None:
            found = await self.gateway.store.session(self._canonical(params.key, agent_id=agent))
            if found is None or found.state.status != "active" or not self._visible(found):
                raise MethodFailed("not_found", f"No session found: {params.key}")
            return SessionsResolveResult(key=found.state.key)
        if params.sessionId is not None:
            wanted = params.sessionId.strip().lower()
            matches = self._of_agent(await self.gateway.store.sessions_by_session_id(wanted), agent)
            return self._one(
                matches,
                missing=f"No session found: {params.sessionId}",
                several=f"Multiple sessions found for sessionId: {params.sessionId}",
            )
        try:
            label = validate_patch({"label": params.label})["label"] or ""
        except InvalidPatch as error:
            raise MethodFailed("invalid", str(error)) from None
        matches = self._of_agent(await self.gateway.store.sessions_by_label(label), agent)
        return self._one(
            matches,
            missing=f"No session found with label: {label}",
            several=f"Multiple sessions found with label: {label}",
        )

    async def sessions_patch(self, params: SessionsPatchParams) -> SessionsPatchResult:
        if self.scope is not None:
            raise MethodFailed("forbidden", "sessions.patch needs an operator token")
        changes = params.model_dump(exclude={"key"}, exclude_unset=True)
        try:
            patched = await self.gateway.patch_session(params.key, **changes)
        except SessionNotFound as error:
            raise MethodFailed("not_found", str(error)) from None
        except ValueError as error:  # InvalidPatch, InvalidSessionKey, label in use
            raise MethodFailed("invalid", str(error)) from None
        return SessionsPatchResult(
            path=self.gateway.store.location, key=patched["key"], entry=patched["entry"]
        )

    async def chat_history(self, params: ChatHistoryParams) -> ChatHistoryResult:
        """The session's transcript, toolResult messages included (the tool filters them).

        Archived and deleted sessions still answer: their history stays for auditors.
        """
        stored: StoredSession | None
        if self.scope is not None:
            stored = await self._reachable(self.scope, params.sessionKey)
        else:
            stored = await self.gateway.store.session(self._canonical(params.sessionKey))
        if stored is None:
            raise MethodFailed("not_found", f"Session not found: {params.sessionKey}")
        key = stored.state.key
        texts = await self.gateway.store.transcript(
            stored.id, limit=params.limit, include_tools=True
        )
        if stored.state.forked_from is not None:
            # A fork: its inherited lines before its own, as sessions_history shows them.
            window = TranscriptWindow(limit=params.limit, include_tools=True)
            read = await self.gateway.store.read(forked_window, stored, texts, None, window)
            texts = read.lines
        messages = [clean_for_reader(json.loads(t)) for t in cap_bytes(texts, MAX_HISTORY_BYTES)]
        return ChatHistoryResult(
            sessionKey=key,
            sessionId=stored.state.session_id,
            messages=messages,
            thinkingLevel=stored.state.thinking_level,
        )

    async def agent_wait(self, params: AgentWaitParams) -> AgentWaitResult:
        """Wait (on the gateway clock) until the run ends or ``timeoutMs`` passes."""
        try:
            run_id = UUID(params.runId.strip())
        except ValueError:
            raise MethodFailed("invalid", f"invalid runId: {params.runId!r}") from None
        runs = self.gateway.run_engine
        first = await runs.load(run_id)
        if first is None or not await self._run_visible(first.state.session_key):
            raise MethodFailed("not_found", f"Run not found: {params.runId}")
        timeout = min(params.timeoutMs, WAIT_MAX_MS) / 1000
        waited = 0.0
        while True:
            # The store, not only this process's wait, says when the run ended: another
            # gateway process sharing the store may run it, and this one is never told.
            run = await runs.load(run_id)
            assert run is not None
            if run.state.ended or waited >= timeout:
                break
            step = min(WAIT_POLL_SECONDS, timeout - waited)
            await runs.wait(run_id, timeout=step)
            waited += step
        state = run.state
        if not state.ended:
            return AgentWaitResult(runId=str(run_id), status="timeout")
        status: Literal["ok", "error", "timeout"] = "ok" if state.status == "ok" else "error"
        error = state.error
        if state.status == "timeout":
            # agent.wait reports an ended run as ok or error (§11); "timeout" means the wait.
            error = error or "run timed out"
        return AgentWaitResult(
            runId=str(run_id),
            status=status,
            startedAt=state.started_at,
            endedAt=state.ended_at,
            error=error,
        )

    # Shared steps -----------------------------------------------------------------------

    async def _reachable(self, scope: ToolContext, reference: str) -> StoredSession:
        """The session ``sessions_history`` would read for the scoped requester, or the
        refusal it would give (recorded as the tool records it)."""
        try:
            return await resolve_session(scope, reference, access="history")
        except SessionNotResolved as error:
            raise MethodFailed("not_found", error.message) from None
        except SessionRefused as refused:
            await scope.record_refusal(
                refused.refusal,
                tool="chat.history",
                reference=refused.reference,
                target_key=refused.target_key,
            )
            raise MethodFailed("forbidden", refused.refusal.message) from None

    async def _run_visible(self, session_key: str) -> bool:
        if self.scope is None:
            return True
        stored = await self.gateway.store.session(session_key)
        return stored is not None and self._visible(stored)

    def _canonical(self, raw: str, *, agent_id: str | None = None) -> str:
        try:
            return self.rules.canonical(raw, agent_id=agent_id)
        except InvalidSessionKey as error:
            raise MethodFailed("invalid", str(error)) from None

    def _context(self) -> ToolContext:
        # The rows need a context only for derived fields; keys are made canonical after.
        return ToolContext(
            store=self.gateway.store,
            config=self.gateway.config,
            clock=self.gateway.clock,
            requester=Requester.from_key(self.rules, "main"),
        )

    @staticmethod
    def _row(context: ToolContext, stored: StoredSession) -> SessionListRow:
        return SessionListRow.model_validate(
            {**row(context, SessionListing.of(stored), None), "key": stored.state.key}
        )

    def _of_agent(self, matches: list[StoredSession], agent: str | None) -> list[StoredSession]:
        return [
            m for m in matches if (agent is None or m.state.agent_id == agent) and self._visible(m)
        ]

    @staticmethod
    def _one(matches: list[StoredSession], *, missing: str, several: str) -> SessionsResolveResult:
        if not matches:
            raise MethodFailed("not_found", missing)
        if len(matches) > 1:
            keys = ", ".join(m.state.key for m in matches[:2])
            raise MethodFailed("invalid", f"{several} ({keys})")
        return SessionsResolveResult(key=matches[0].state.key)
