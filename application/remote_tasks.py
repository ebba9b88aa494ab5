"""Tasks a remote agent asks for over a protocol (A2A, contract decision 32, ADR 0035).

A remote task is a run: a remote context is one session of the agent
(``agent:<id>:a2a:<contextId>``), a task one run in it, started as a chain of its own and
recorded with the caller's scope (``remote_caller``), so its message's provenance is
``a2a-remote``. Nothing here knows the protocol's wire format: the adapter
(adapters/a2a) turns these answers into the SDK's types.

Who sees what: an operator caller every remote task of the agent; a caller whose token
is bound to a session only the tasks it started. A task hidden from the caller is
answered exactly as a missing one (``None``). Every call is recorded (``RemoteCall``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.application.gateway import GatewayService
from sessionwire.application.library_logging import library_logger
from sessionwire.application.orchestration.callbacks import callback_refusal, run_in_progress
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.store import StoreInUse
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.causality import Causality, hop_limit_reached
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import normalize_agent_id
from sessionwire.domain.policy import Refusal, hop_limit_refusal
from sessionwire.domain.push_request import PushRequest, PushRequestState, push_request_id
from sessionwire.domain.remote_call import CallOutcome, RemoteCall
from sessionwire.domain.run import Run, RunState

REMOTE_TASK_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/a2a/task")
OPERATOR_CALLER = "operator"
# A context id becomes part of a session key: kept to characters a key takes as they are.
CONTEXT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_REMOTE_MESSAGE = 100_000
# Rows of the runs read model a task listing reads at a time.
SCAN_PAGE = 500
# Runs whose remote caller a listing remembers (a few dozen bytes each).
REMEMBERED_CALLERS = 200_000

log = library_logger("sessionwire.remote")


class RemoteTaskRefused(SessionwireError):
    """The send is refused (the send policy, a closed session): the task is rejected."""

    def __init__(self, reason: str, session_key: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.session_key = session_key


@dataclass(frozen=True)
class RemoteCaller:
    """Who calls: ``scope`` is ``operator`` or the session its token is bound to."""

    scope: str

    @property
    def is_operator(self) -> bool:
        return self.scope == OPERATOR_CALLER

    @property
    def requester_key(self) -> str | None:
        """The session a bound caller acts as: it asks for the run (decision 22)."""
        return None if self.is_operator else self.scope


def remote_session_key(agent_id: str, context_id: str) -> str:
    """The session of a remote context (decision 32)."""
    return f"agent:{normalize_agent_id(agent_id)}:a2a:{context_id.lower()}"


def context_of(session_key: str) -> str | None:
    """The context id of a remote context's session key, or None for any other key."""
    parts = session_key.split(":", 3)
    if len(parts) == 4 and parts[0] == "agent" and parts[2] == "a2a":
        return parts[3]
    return None


def check_context_id(context_id: str) -> str:
    if not CONTEXT_ID.match(context_id):
        raise ValueError(
            "contextId must be 1-128 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return context_id


def remote_task_id(caller: RemoteCaller, agent_id: str, message_id: str) -> UUID:
    """The run a message starts: the same caller sending the same message id again (a
    retry after a lost answer) finds the same run instead of starting a second one."""
    return uuid5(REMOTE_TASK_NAMESPACE, f"{caller.scope}\n{agent_id}\n{message_id}")


@dataclass(frozen=True)
class TaskCursor:
    """A place in a task listing: the last listed task's run (when it was recorded, its
    id), the runs read model's keyset order."""

    created_at: int
    run_id: str

    def follows(self, other: TaskCursor) -> bool:
        """Whether this place comes after ``other`` (newest first)."""
        return (self.created_at, self.run_id) < (other.created_at, other.run_id)


@dataclass(frozen=True)
class TaskPage:
    tasks: list[RunState]
    # Every task the caller may see under the listing's filters, on all pages.
    total: int
    # Where the next page starts; None on the last page.
    next: TaskCursor | None


class RemoteTasks:
    def __init__(self, service: GatewayService, *, protocol: str = "a2a") -> None:
        self.service = service
        self.protocol = protocol
        # Run id -> its remote caller (None: not a remote task), for listings: fixed when
        # the run starts, so a run is loaded for it once, not at every listing.
        self._callers: dict[str, str | None] = {}

    # Commands -----------------------------------------------------------------------

    async def start(
        self,
        caller: RemoteCaller,
        agent_id: str,
        *,
        context_id: str,
        message_id: str,
        text: str,
    ) -> RunState:
        """Start (or find again) the run for a remote message: its state as recorded.

        ValueError for a bad context id or message; RemoteTaskRefused when the send
        policy denies sends into the context's session, or the context belongs to
        another caller (answered as a refusal, never naming the other caller).
        """
        service = self.service
        check_context_id(context_id)
        if not text.strip():
            raise ValueError("the message has no text")
        if len(text) > MAX_REMOTE_MESSAGE:
            raise ValueError(f"the message is longer than {MAX_REMOTE_MESSAGE} characters")
        key = service.rules.canonical(remote_session_key(agent_id, context_id))
        run_id = remote_task_id(caller, agent_id, message_id)
        existing = await service.run_engine.load(run_id)
        if existing is not None:
            return existing.state
        if not caller.is_operator and not await self._context_is_callers(caller, key):
            raise RemoteTaskRefused("this context belongs to another caller", key)
        await service.ensure_session(key)
        stored = await service.store.session(key)
        if stored is None or stored.state.status != "active":
            raise RemoteTaskRefused(f"the session {key} is closed", key)
        decision = service.config.send_policy.decide(
            stored.state.policy_target(service.rules), channel=self.protocol
        )
        if not decision.allowed:
            raise RemoteTaskRefused(f"send policy denies sends into {key} ({decision.rule})", key)
        chain = await self._chain(caller, run_id, key)
        run = Run.start(
            run_id=run_id,
            session_key=key,
            agent_id=normalize_agent_id(agent_id),
            step="primary",
            message=text,
            timeout_seconds=service.config.agents.defaults.timeoutSeconds,
            at=service.clock.now(),
            requester_key=caller.requester_key,
            causality=chain,
            remote_caller=caller.scope,
        )
        # The task is a run of its trace: the trace's budget admits it (ADR 0034).
        async with service.budgets.admit(chain.trace_id) as exceeded:
            if exceeded is None:
                await service.run_engine.ensure_started(run)
        if exceeded is not None:
            await service.budgets.refuse(
                exceeded,
                chain=chain,
                requester_key=caller.requester_key or key,
                tool=self.protocol,
                reference=key,
                target_key=key,
                caller_run_id=chain.parent_run_id,
            )
            raise RemoteTaskRefused(exceeded.message, key)
        found = await service.run_engine.load(run_id)
        assert found is not None
        log.info("remote task started", session_key=key, run_id=str(run_id), caller=caller.scope)
        return found.state

    async def _chain(self, caller: RemoteCaller, run_id: UUID, key: str) -> Causality:
        """The task's chain: its own, unless the caller's bound session has a run in
        progress, whose agent is then the one calling back (ADR 0034): the task is that
        run's next hop, in its trace, or refused (``callbacksWithoutRun``, the hop limit)."""
        service = self.service
        bound = caller.requester_key
        found = None
        if bound is not None:
            found = await run_in_progress(service.run_engine, service.store, bound)
        if found is None:
            return Causality.root(str(run_id))
        sender = found[0]
        agent_to_agent = service.config.session.agentToAgent
        refusal = None
        if agent_to_agent.callbacksWithoutRun == "refuse":
            refusal = callback_refusal(sender.session_key, sender.run_id)
        elif hop_limit_reached(sender.causality.hops, agent_to_agent.maxHops):
            refusal = hop_limit_refusal(agent_to_agent.maxHops)
        if refusal is not None:
            await self._record_refusal(refusal, sender, key)
            raise RemoteTaskRefused(refusal.message, key)
        return sender.causality.next_hop(sender.run_id)

    async def _record_refusal(self, refusal: Refusal, sender: RunState, key: str) -> None:
        service = self.service
        refused = AccessRefusal.record(
            id=service.ids.new_id(),
            refusal=refusal,
            requester_key=sender.session_key,
            tool=self.protocol,
            reference=key,
            target_key=key,
            at=service.clock.now(),
            caller=sender.causality,
            caller_run_id=sender.run_id,
        )
        with suppress(StoreInUse):
            await service.store.save(refused)

    async def cancel(self, caller: RemoteCaller, agent_id: str, task_id: str) -> RunState | None:
        """Cancel the task (and the runs it caused); None when not found or hidden."""
        found = await self.task(caller, agent_id, task_id)
        if found is None:
            return None
        await self.service.cancel_run(found.run_id, f"cancelled by {self.protocol} caller")
        return await self.task(caller, agent_id, task_id)

    async def wait(
        self, run_id: str, timeout: float | None = None, *, until_input: bool = False
    ) -> RunState | None:
        """The task's final state, or None if ``timeout`` seconds pass on the clock;
        ``until_input``: its state once it asks for input, too (A2A's input-required
        ends a blocking send: the answer is the caller's next message)."""
        return await self.service.run_engine.wait(UUID(run_id), timeout, until_input=until_input)

    # Push requests ------------------------------------------------------------------

    async def request_push(
        self, state: RunState, *, config_id: str, url: str, token: str | None, channel: str
    ) -> PushRequestState:
        """Notify ``url`` when the run ends (recorded; kept across restarts). The same
        config id again finds the request already made."""
        service = self.service
        push = PushRequest.request(
            run_id=state.run_id,
            session_key=state.session_key,
            config_id=config_id,
            channel=channel,
            url=url,
            token=token,
            at=service.clock.now(),
        )
        existing = await service.store.work(push.id)
        if existing is not None:
            return existing.to_aggregate(PushRequest, PushRequestState).state
        # Made meanwhile (a retry, another gateway): the same request.
        with suppress(StoreConflict):
            await service.store.save(push)
        service.pushes.start(push.id)
        return push.state

    async def pushes_of(self, state: RunState) -> list[PushRequestState]:
        """The run's push requests not withdrawn, oldest first."""
        stored = await self.service.store.pending_work(
            "push", ("waiting", "queued"), session_key=state.session_key
        )
        found = [work.to_aggregate(PushRequest, PushRequestState).state for work in stored]
        return [push for push in found if push.run_id == state.run_id]

    async def withdraw_push(self, state: RunState, config_id: str) -> bool:
        """Withdraw a request whose run has not ended (after, its push is queued already)."""
        push_id = push_request_id(state.run_id, config_id)
        async for uow in retrying(self.service.store, f"push {push_id}"):
            with uow:
                push = await uow.work(push_id, PushRequest, PushRequestState)
                if push is None:
                    return False
                push.withdraw(at=self.service.clock.now())
                await uow.commit()
        return True

    # Queries ------------------------------------------------------------------------

    async def task(self, caller: RemoteCaller, agent_id: str, task_id: str) -> RunState | None:
        """The task's run, when it is one of the agent's remote tasks the caller may see."""
        try:
            run_id = UUID(str(task_id).strip())
        except ValueError:
            return None
        run = await self.service.run_engine.load(run_id)
        if run is None or not self.sees(caller, agent_id, run.state):
            return None
        return run.state

    async def tasks(
        self,
        caller: RemoteCaller,
        agent_id: str,
        *,
        context_id: str | None = None,
        keep: Callable[[StoredRun], bool] | None = None,
        size: int = 50,
        after: TaskCursor | None = None,
    ) -> TaskPage:
        """A page of the caller's remote tasks of the agent (those whose read-model row
        ``keep`` keeps), newest first: the ``size`` that follow ``after`` (from the
        newest without it).

        The order is the runs read model's (when each run was recorded, then its id),
        which never changes for a run, so a cursor stays where it is however the tasks
        change or new ones come: every task is listed once across the pages. ``total``
        counts only what the caller may see, so every listing reads the agent's runs
        whole: each row is judged by its columns and its run's remote caller (loaded
        once per run, then remembered); only the page's runs are loaded in full."""
        session_key = None
        if context_id is not None:
            check_context_id(context_id)
            session_key = self.service.rules.canonical(remote_session_key(agent_id, context_id))
        agent = normalize_agent_id(agent_id)
        page: list[RunState] = []
        total = 0
        last: TaskCursor | None = None
        more = False
        query = RunQuery(limit=SCAN_PAGE, session_key=session_key)
        while True:
            rows = await self.service.store.list_runs(query)
            for row in rows:
                if row.agent_id != agent or context_of(row.session_key) is None:
                    continue
                if keep is not None and not keep(row):
                    continue
                if not await self._callers_task(caller, row.run_id):
                    continue
                total += 1
                position = TaskCursor(row.created_at, row.run_id)
                if after is not None and not position.follows(after):
                    continue
                if len(page) >= size:
                    more = True
                    continue
                state = await self.task(caller, agent_id, row.run_id)
                if state is not None:
                    page.append(state)
                    last = position
            if len(rows) < query.limit:
                break
            query = replace(query, before=(rows[-1].created_at, rows[-1].run_id))
        return TaskPage(tasks=page, total=total, next=last if more else None)

    async def _callers_task(self, caller: RemoteCaller, run_id: str) -> bool:
        """Whether the run is a remote task the caller may see (by its remote caller)."""
        if run_id not in self._callers:
            run = await self.service.run_engine.load(UUID(run_id))
            if len(self._callers) >= REMEMBERED_CALLERS:
                self._callers.pop(next(iter(self._callers)))  # the oldest remembered
            self._callers[run_id] = None if run is None else run.state.remote_caller
        remote_caller = self._callers[run_id]
        return remote_caller is not None and (caller.is_operator or remote_caller == caller.scope)

    def sees(self, caller: RemoteCaller, agent_id: str, state: RunState) -> bool:
        if state.remote_caller is None or state.agent_id != normalize_agent_id(agent_id):
            return False
        if context_of(state.session_key) is None:
            return False
        return caller.is_operator or state.remote_caller == caller.scope

    async def _context_is_callers(self, caller: RemoteCaller, key: str) -> bool:
        """No run of another caller is in the context's session (its newest runs)."""
        listed = await self.service.runs(session_key=key, limit=20)
        for row in listed["runs"]:
            run = await self.service.run_engine.load(UUID(row["runId"]))
            if run is not None and run.state.remote_caller not in (None, caller.scope):
                return False
        return True

    # The record ---------------------------------------------------------------------

    async def record_call(
        self,
        caller: RemoteCaller,
        agent_id: str,
        method: str,
        outcome: CallOutcome,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        session_key: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Keep the call as an event (who, which method, which task, what answer)."""
        service = self.service
        call = RemoteCall.record(
            id=service.ids.new_id(),
            protocol="a2a",
            method=method,
            caller=caller.scope,
            agent_id=normalize_agent_id(agent_id),
            outcome=outcome,
            at=service.clock.now(),
            session_key=session_key,
            task_id=task_id,
            context_id=context_id,
            detail=detail[:500] if detail else None,
        )
        try:
            await service.store.save(call)
        except StoreInUse:
            log.warning("remote call not recorded: another gateway holds the store", method=method)
