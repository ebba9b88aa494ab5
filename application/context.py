"""What every tool call runs with: the store, the config, the clock and the caller."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.orchestration.exchanges import ExchangeDriver
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.application.orchestration.spawns import SpawnDriver
from sessionwire.application.ports.clock_and_ids import Clock, IdSource
from sessionwire.application.ports.store import Store
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.keys import KeyRules, agent_id_of, is_subagent_key
from sessionwire.domain.policy import AccessPolicy, AgentToAgentPolicy, Refusal
from sessionwire.domain.session import SessionState


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


@dataclass(frozen=True)
class ToolServices:
    """What the tools that start runs need besides the store."""

    runs: RunEngine
    exchanges: ExchangeDriver
    spawns: SpawnDriver
    ids: IdSource
    run_timeout_seconds: float


@dataclass(frozen=True)
class ToolContext:
    store: Store
    config: GatewayConfig
    clock: Clock
    requester: Requester
    services: ToolServices | None = None

    @cached_property
    def rules(self) -> KeyRules:
        return self.config.key_rules

    @cached_property
    def a2a(self) -> AgentToAgentPolicy:
        return self.config.agent_to_agent_policy

    @cached_property
    def access(self) -> AccessPolicy:
        """What this requester may reach: the domain's one policy module decides."""
        key = self.requester.key
        agent_id = self.requester.agent_id
        sandboxed = self.config.sandbox_policy.restricts(
            agent_id=agent_id, is_main=self.rules.is_main(key), is_subagent=is_subagent_key(key)
        )
        return AccessPolicy(
            requester_key=key,
            requester_agent=agent_id,
            a2a=self.a2a,
            send=self.config.send_policy,
            sandboxed=sandboxed,
        )

    def record_refusal(
        self, refusal: Refusal, *, tool: str, reference: str, target_key: str | None
    ) -> None:
        """Keep a refused request as evidence (who, what, which rule)."""
        assert self.services is not None, "refusals are recorded through the gateway's ids"
        self.store.save(
            AccessRefusal.record(
                id=self.services.ids.new_id(),
                refusal=refusal,
                requester_key=self.requester.key,
                tool=tool,
                reference=reference,
                target_key=target_key,
                at=self.clock.now(),
            )
        )

    def display_key(self, key: str) -> str:
        return self.rules.display(key, agent_id=self.requester.agent_id)

    def transcript_path(self, state: SessionState) -> str:
        # A reference an auditor can follow: the store, and the sessionId its tools accept.
        return f"{self.store.location}#{state.session_id}"
