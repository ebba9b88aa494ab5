"""Who may reach which session: the agent-to-agent rule (openclaw-behaviour.md §2.7).

One place decides; the application asks it at every entry point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal


def _pattern_matches(pattern: str, agent_id: str) -> bool:
    pattern = pattern.strip()
    if not pattern:
        return False
    if pattern == "*":
        return True
    if "*" not in pattern:
        return pattern == agent_id
    regex = "^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$"
    return re.match(regex, agent_id, re.IGNORECASE) is not None


@dataclass(frozen=True)
class AgentToAgentPolicy:
    enabled: bool = False
    allow: tuple[str, ...] = ()

    def matches(self, agent_id: str) -> bool:
        return not self.allow or any(_pattern_matches(p, agent_id) for p in self.allow)

    def is_allowed(self, requester_agent: str, target_agent: str) -> bool:
        if requester_agent == target_agent:
            return True
        return self.enabled and self.matches(requester_agent) and self.matches(target_agent)

    def refusal(
        self, requester_agent: str, target_agent: str, *, access: Literal["history", "messaging"]
    ) -> str | None:
        """OpenClaw's exact refusal when ``requester_agent`` may not reach ``target_agent``."""
        if self.is_allowed(requester_agent, target_agent):
            return None
        if not self.enabled:
            purpose = "access" if access == "history" else "sends"
            return (
                f"Agent-to-agent {access} is disabled. Set tools.agentToAgent.enabled=true "
                f"to allow cross-agent {purpose}."
            )
        return f"Agent-to-agent {access} denied by tools.agentToAgent.allow."

    def open_to_all(self) -> bool:
        """True when every agent may reach every other (no per-agent filter needed)."""
        return self.enabled and (not self.allow or any(p.strip() == "*" for p in self.allow))
