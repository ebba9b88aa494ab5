"""What every tool call runs with: the store, the config, the clock and the caller."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sessionwire.application.config import GatewayConfig
from sessionwire.application.exchanges import ExchangeDriver
from sessionwire.application.ports import Clock, IdSource, SessionStore
from sessionwire.application.runs import RunEngine
from sessionwire.application.spawns import SpawnDriver
from sessionwire.domain.keys import KeyRules, agent_id_of
from sessionwire.domain.policy import AgentToAgentPolicy
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
    store: SessionStore
    config: GatewayConfig
    clock: Clock
    requester: Requester
    services: ToolServices | None = None

    @cached_property
    def rules(self) -> KeyRules:
        return self.config.key_rules

    @cached_property
    def a2a(self) -> AgentToAgentPolicy:
        section = self.config.tools.agentToAgent
        return AgentToAgentPolicy(enabled=section.enabled, allow=tuple(section.allow))

    def display_key(self, key: str) -> str:
        return self.rules.display(key, agent_id=self.requester.agent_id)

    def transcript_path(self, state: SessionState) -> str:
        # A reference an auditor can follow: the store, and the sessionId its tools accept.
        return f"{self.store.location}#{state.session_id}"
