"""What every tool call runs with: the store, the config, the clock and the caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from pydantic import BaseModel
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.clock_and_ids import Clock, IdSource
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.session_read_model import ViewWanted
from sessionwire.application.ports.store import StoreInUse
from sessionwire.domain.causality import Causality, hop_limit_reached
from sessionwire.domain.keys import InvalidSessionKey, KeyRules, agent_id_of, is_subagent_key
from sessionwire.domain.policy import (
    AccessPolicy,
    AgentToAgentPolicy,
    Refusal,
    hop_limit_refusal,
)
from sessionwire.domain.reader_view import history_view, reader_messages, view_stamp
from sessionwire.domain.redaction import Redactor

if TYPE_CHECKING:
    # Named only in annotations: the read tools (sessions_list, sessions_history,
    # agents_list) run on a context without them, in a process that never loads the
    # orchestration drivers or the run, exchange, spawn and outbox aggregates.
    from sessionwire.application.orchestration.cancellation import RunCancellation
    from sessionwire.application.orchestration.exchanges import ExchangeDriver
    from sessionwire.application.orchestration.runs import RunEngine, RunTurn
    from sessionwire.application.orchestration.spawns import SpawnDriver
    from sessionwire.application.orchestration.trace_budgets import TraceBudgets
    from sessionwire.application.orchestration.yields import YieldDriver
    from sessionwire.domain.run import RunState
    from sessionwire.domain.trace_budget import BudgetExceeded

log = library_logger("sessionwire.tools")

T = TypeVar("T")


@dataclass(frozen=True)
class Requester:
    """The calling session, by canonical key."""

    key: str
    agent_id: str
    raw: str
    """The key as the caller gave it (trimmed), quoted back in agent-to-agent texts."""

    @classmethod
    def from_key(cls, rules: KeyRules, raw: str) -> Requester:
        key = rules.canonical(raw)
        return cls(key=key, agent_id=agent_id_of(key), raw=raw.strip())


def access_policy(config: GatewayConfig, requester: Requester) -> AccessPolicy:
    """The policy ``config`` sets for ``requester``: what the tools ask, and what
    ``sessionwire policy diff`` asks of a candidate config (one answer, not a copy)."""
    key = requester.key
    agent_id = requester.agent_id
    rules = config.key_rules
    is_main = rules.is_main(key)
    sandboxed = config.sandbox_policy.restricts(
        agent_id=agent_id, is_main=is_main, is_subagent=is_subagent_key(key)
    )
    visibility = config.visibility_policy
    return AccessPolicy(
        requester_key=key,
        requester_agent=agent_id,
        a2a=config.agent_to_agent_policy,
        send=config.send_policy,
        sandboxed=sandboxed,
        visibility=visibility.mode_for(agent_id),
        requester_is_main=is_main,
        visibility_rule=visibility.rule_for(agent_id),
    )


@dataclass(frozen=True)
class ToolServices:
    """What the tools that start runs need besides the store."""

    runs: RunEngine
    exchanges: ExchangeDriver
    spawns: SpawnDriver
    ids: IdSource
    run_timeout_seconds: float
    cancellation: RunCancellation
    budgets: TraceBudgets
    yields: YieldDriver


@dataclass(frozen=True)
class ToolContext:
    store: AsyncStore
    config: GatewayConfig
    clock: Clock
    requester: Requester
    services: ToolServices | None = None
    ids: IdSource | None = None
    """Where a refusal's id comes from: the gateway's ids (a reader without the
    gateway's services records refusals too)."""
    caller_run: RunState | None = None
    """The run making this call, when an agent calls the tool during its turn."""
    caller_turn: RunTurn | None = None
    """That run's turn (its dispatch now), which numbers the runs its calls start."""

    def new_run_id(self, tool: str, params: BaseModel) -> UUID:
        """The id of the run this call starts: from inside a turn, the same in every
        attempt of the calling run (``RunTurn.call_id``); from outside, a fresh one."""
        if self.caller_turn is not None:
            return self.caller_turn.call_id(tool, params.model_dump_json())
        assert self.services is not None, "runs are started through the gateway's ids"
        return self.services.ids.new_id()

    async def once_more_on_conflict(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call`` (a send or spawn that first looks for what an earlier attempt of the
        calling run recorded of it), and once more if its save conflicts.

        From a turn, the records a call starts have ids derived from the call's, the same
        in every attempt of the calling run: a conflict saving them is another attempt
        (the gateway that took the run over from this one, paused past its lease) making
        this very call meanwhile. The second call finds what that one recorded and
        answers for it, as for an attempt before a crash. From outside a turn the ids
        are new, and a conflict is the caller's to see."""
        try:
            return await call()
        except StoreConflict:
            if self.caller_turn is None:
                raise
            log.info(
                "call made meanwhile by another attempt of its run", requester=self.requester.raw
            )
            return await call()

    @cached_property
    def rules(self) -> KeyRules:
        return self.config.key_rules

    @cached_property
    def a2a(self) -> AgentToAgentPolicy:
        return self.config.agent_to_agent_policy

    @cached_property
    def access(self) -> AccessPolicy:
        """What this requester may reach: the domain's one policy module decides."""
        return access_policy(self.config, self.requester)

    def next_hop(self, run_id: str) -> Causality:
        """The chain of a run this call starts: the caller's next hop, or a new chain."""
        caller = self.caller_run
        if caller is None:
            return Causality.root(run_id)
        return caller.causality.next_hop(caller.run_id)

    def hop_refusal(self) -> Refusal | None:
        """Refuses a send or spawn from a run whose chain is at the hop limit."""
        caller = self.caller_run
        max_hops = self.config.session.agentToAgent.maxHops
        if caller is None or not hop_limit_reached(caller.causality.hops, max_hops):
            return None
        return hop_limit_refusal(max_hops)

    async def record_refusal(
        self, refusal: Refusal, *, tool: str, reference: str, target_key: str | None
    ) -> None:
        """Keep a refused request as evidence (who, what, which rule, from which chain)."""
        # Imported here: a refusal is rare, and a read that is not refused never loads
        # the refusal aggregate.
        from sessionwire.domain.access_refusal import AccessRefusal

        ids = self.ids or (self.services.ids if self.services is not None else None)
        assert ids is not None, "refusals are recorded through the gateway's ids"
        caller = self.caller_run
        refused = AccessRefusal.record(
            id=ids.new_id(),
            refusal=refusal,
            requester_key=self.requester.key,
            tool=tool,
            reference=reference,
            target_key=target_key,
            at=self.clock.now(),
            caller=caller.causality if caller else None,
            caller_run_id=caller.run_id if caller else None,
        )
        try:
            await self.store.save(refused)
        except StoreInUse:
            # A reader beside the SQLite file's live writer may not write (decision 20);
            # the refusal still answers, and the log says what was not kept.
            log.warning("refusal not recorded: another gateway holds the store", tool=tool)

    async def refuse_over_budget(
        self, exceeded: BudgetExceeded, chain: Causality, *, tool: str, reference: str
    ) -> None:
        """Record a call refused by its trace's budget (and cancel the trace's work in
        flight when the budget says so)."""
        assert self.services is not None, "budgets are kept by the gateway's services"
        caller = self.caller_run
        await self.services.budgets.refuse(
            exceeded,
            chain=chain,
            requester_key=self.requester.key,
            tool=tool,
            reference=reference,
            target_key=None,
            caller_run_id=caller.run_id if caller else None,
        )

    @cached_property
    def redactor(self) -> Redactor | None:
        """What masks another session's messages for this call (``redaction`` config)."""
        return self.config.redaction.redactor()

    def reader_messages(self, target_key: str, lines: Sequence[str]) -> list[dict[str, Any]]:
        """Stored lines of session ``target_key`` as this requester reads them: secrets
        masked when it is another session's, as stored when its own."""
        own = target_key == self.requester.key
        return reader_messages(lines, None if own else self.redactor)

    def history_view(
        self, target_key: str, lines: Sequence[str]
    ) -> tuple[list[dict[str, Any]], bool, int]:
        """``reader_messages``, whether any was masked, and their JSON's length in bytes."""
        own = target_key == self.requester.key
        return history_view(lines, None if own else self.redactor)

    def view_wanted(self, raw_key: str, max_bytes: int) -> ViewWanted | None:
        """How this requester reads the session ``raw_key`` names from stored views (ADR
        0054): masked unless it is its own (``history_view``'s choice, made on the key the
        caller gave; the store reads it for the session the key resolves to, and a key
        that is not canonical resolves through the slower path, which decides again)."""
        try:
            key = self.rules.canonical(raw_key, agent_id=self.requester.agent_id)
        except InvalidSessionKey:
            return None  # refused as before, by the resolution
        own = key == self.requester.key
        redactor = None if own else self.redactor
        return ViewWanted(
            masked=redactor is not None, stamp=view_stamp(redactor), max_bytes=max_bytes
        )

    def display_key(self, key: str) -> str:
        return "main" if key == self._own_main_key else key

    @cached_property
    def _own_main_key(self) -> str:
        # KeyRules.display for this requester, its one varying part computed once per call.
        return self.rules.main_key_of(self.requester.agent_id)
