"""The visibility scope a workload configures (contract decision 28), as the simulator
checks each ``sessions_list``, ``sessions_history``, ``sessions_send`` and
``sessions_search`` answer against it (a search shows nothing the caller cannot list,
decision 35). Written from the contract's words, not from the gateway's policy module, so that a
bug there shows here:

- ``self``: the requester's own session only;
- ``tree``: its own session and the sessions it spawned, transitively (by the log's
  ``SubagentSpawned``) — and, for its agent's main session, every session of its agent;
- ``agent``: every session of its agent;
- ``all``: every session (the workloads allow every agent pair).

Two directions, each judged where it cannot be wrong: a session outside the scope given
every spawn recorded so far (a superset of what the call could know) is never listed,
read or sent into; a session inside the scope without any spawn (its own, its agent's)
is never refused for visibility. Sub-agent sessions are refused the session tools
whatever the scope, so only the first direction applies to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.domain.keys import InvalidSessionKey, agent_id_of, is_subagent_key

SCOPED_TOOLS = frozenset({"sessions_list", "sessions_history", "sessions_send", "sessions_search"})
# Another agent's session ("… visibility is restricted. Set …"), or the requester's own
# agent's (decision 41: "Session not found, or not visible under …").
VISIBILITY_REFUSED = ("visibility is restricted", "not visible under tools.sessions.visibility=")
# A send answered with one of these started (or joined) a run: its message was delivered.
DELIVERED = frozenset({"accepted", "ok", "timeout"})


@dataclass(frozen=True)
class ScopedCall:
    """A session tool call as the simulator made it, and its answer."""

    requester: str
    tool: str
    params: Mapping[str, Any]
    result: Mapping[str, Any]


@dataclass(frozen=True)
class ScopeCheck:
    config: GatewayConfig

    def mode_for(self, requester: str) -> str:
        return str(self.config.visibility_policy.mode_for(agent_id_of(requester)))

    def visible(self, requester: str, target: str, spawned_by: Mapping[str, str] | None) -> bool:
        """Is ``target`` in ``requester``'s scope? ``spawned_by`` (child -> the session
        that spawned it) widens ``tree``; None judges without any spawn."""
        mode = self.mode_for(requester)
        if mode == "all" or target == requester:
            return True
        same_agent = agent_id_of(target) == agent_id_of(requester)
        if mode == "agent":
            return same_agent
        if mode != "tree":
            return False
        if same_agent and requester == self.config.key_rules.main_key_of(agent_id_of(requester)):
            return True
        return spawned_by is not None and _spawned(requester, target, spawned_by)

    def problems(self, call: ScopedCall, spawned_by: Mapping[str, str]) -> list[str]:
        """What ``call``'s answer shows against the scope."""
        if call.tool not in SCOPED_TOOLS:
            return []
        requester = self._canonical(call.requester, None)
        if requester is None:
            return []
        mode = self.mode_for(requester)
        if call.tool == "sessions_list":
            listed = call.result.get("sessions") or []
            return [
                f"sessions_list by {requester} (visibility {mode}) listed {key}, outside its scope"
                for row in listed
                if (key := self._canonical(str(row.get("key")), requester)) is not None
                and not self.visible(requester, key, spawned_by)
            ]
        if call.tool == "sessions_search":
            found = call.result.get("results") or []
            return [
                f"sessions_search by {requester} (visibility {mode}) found a message of "
                f"{key}, outside its scope"
                for hit in found
                if (key := self._canonical(str(hit.get("sessionKey")), requester)) is not None
                and not self.visible(requester, key, spawned_by)
            ]
        target = self._canonical(str(call.params.get("sessionKey") or ""), requester)
        if target is None:
            return []
        reached = (
            "messages" in call.result
            if call.tool == "sessions_history"
            else call.result.get("status") in DELIVERED
        )
        if reached and not self.visible(requester, target, spawned_by):
            what = "read" if call.tool == "sessions_history" else "sent into"
            return [
                f"{call.tool} by {requester} (visibility {mode}) {what} {target}, outside "
                f"its scope (answered {call.result.get('status', 'ok')})"
            ]
        refused = any(text in str(call.result.get("error", "")) for text in VISIBILITY_REFUSED)
        if refused and not is_subagent_key(requester) and self.visible(requester, target, None):
            return [
                f"{call.tool} by {requester} (visibility {mode}) was refused {target}, inside "
                f"its scope: {call.result.get('error')}"
            ]
        return []

    def _canonical(self, reference: str, requester: str | None) -> str | None:
        if not reference:
            return None
        agent = agent_id_of(requester) if requester is not None else None
        try:
            return self.config.key_rules.canonical(reference, agent_id=agent)
        except InvalidSessionKey:
            return None


def _spawned(requester: str, target: str, spawned_by: Mapping[str, str]) -> bool:
    seen: set[str] = set()
    key = spawned_by.get(target)
    while key is not None and key not in seen:
        if key == requester:
            return True
        seen.add(key)
        key = spawned_by.get(key)
    return False
