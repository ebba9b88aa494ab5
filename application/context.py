"""What every tool call runs with: the store, the config, the clock and the caller."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sessionwire.application.config import GatewayConfig
from sessionwire.application.ports import Clock, SessionStore
from sessionwire.domain.keys import KeyRules, agent_id_of
from sessionwire.domain.policy import AgentToAgentPolicy
from sessionwire.domain.session import SessionState


@dataclass(frozen=True)
class Requester:
    """The calling session, by canonical key."""

    key: str
    agent_id: str

    @classmethod
    def from_key(cls, rules: KeyRules, raw: str) -> Requester:
        key = rules.canonical(raw)
        return cls(key=key, agent_id=agent_id_of(key))


@dataclass(frozen=True)
class ToolContext:
    store: SessionStore
    config: GatewayConfig
    clock: Clock
    requester: Requester

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
