"""``sessionwire policy diff``: every recorded tool call's access decision, asked again of
a candidate config, and the ones whose answer would flip.

What is recorded (ADR 0006): each refusal a policy made (``AccessRefused``, any tool),
each send that went through (``ExchangeOpened``) and each spawn (``SubagentSpawned``).
Reads that were allowed write nothing, so they are not here: an allowed ``sessions_list``
or ``sessions_history`` call cannot be replayed, and the report says how many records it
could not judge. Each record is asked of the candidate through the policy the tools ask
(``access_policy`` and domain/policy.py), in the tools' order: the sub-agent tool set,
the hop limit, the sandbox, the visibility scope, the agent-to-agent rule, then the
target's send policy. The sessions are judged as the store holds them now (a session's
spawn tree never changes; its send override may have).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import Requester, access_policy
from sessionwire.application.ports.store import Store
from sessionwire.application.tools.registry import REGISTRY
from sessionwire.domain.access_refusal import AccessRefusal
from sessionwire.domain.causality import hop_limit_reached
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.keys import InvalidSessionKey, agent_id_of, is_subagent_key
from sessionwire.domain.policy import (
    Refusal,
    hop_limit_refusal,
    subagent_tool_refusal,
)
from sessionwire.domain.spawn import Spawn
from sessionwire.domain.subagents import subagent_tools

Outcome = Literal["granted", "refused"]
REACHING_TOOLS = {"sessions_history": "history", "sessions_send": "messaging"}


@dataclass(frozen=True)
class RecordedDecision:
    """One tool call's access decision as the store recorded it."""

    position: int
    at: datetime
    requester_key: str
    tool: str
    reference: str
    target_key: str | None
    outcome: Outcome
    rule: str | None = None
    """The rule that refused it (None when it was granted)."""
    caller_hops: int | None = None
    """The hops of the run that made the call (None: made from outside any run)."""


@dataclass(frozen=True)
class Flip:
    decision: RecordedDecision
    now: Outcome
    refusal: Refusal | None
    """The candidate's refusal, when it refuses."""

    def to_json_dict(self) -> dict[str, Any]:
        decision = self.decision
        shown: dict[str, Any] = {
            "position": decision.position,
            "at": decision.at.isoformat(),
            "requester": decision.requester_key,
            "tool": decision.tool,
            "reference": decision.reference,
            "target": decision.target_key,
            "recorded": decision.outcome,
            "candidate": self.now,
            "flip": f"{decision.outcome}->{self.now}",
        }
        if decision.rule is not None:
            shown["recordedRule"] = decision.rule
        if self.refusal is not None:
            shown["candidateRule"] = self.refusal.rule
            shown["candidateCheck"] = self.refusal.check
            shown["candidateError"] = self.refusal.message
        return shown


@dataclass(frozen=True)
class PolicyDiff:
    decisions: int
    unjudged: int
    """Records the candidate could not be asked about (a refused label or sessionId
    lookup names no session, so there is nothing to ask again)."""
    flips: list[Flip]

    def to_json_dict(self) -> dict[str, Any]:
        by_kind = {"granted->refused": 0, "refused->granted": 0}
        for flip in self.flips:
            by_kind[f"{flip.decision.outcome}->{flip.now}"] += 1
        return {
            "decisions": self.decisions,
            "unjudged": self.unjudged,
            "flips": len(self.flips),
            "grantedToRefused": by_kind["granted->refused"],
            "refusedToGranted": by_kind["refused->granted"],
            "changes": [flip.to_json_dict() for flip in self.flips],
        }


def recorded_decisions(store: Store) -> Iterator[RecordedDecision]:
    """Every recorded access decision, in log order."""
    for position, event in store.events():
        if isinstance(event, AccessRefusal.AccessRefused):
            yield RecordedDecision(
                position=position,
                at=event.timestamp,
                requester_key=event.requester_key,
                tool=event.tool,
                reference=event.reference,
                target_key=event.target_key,
                outcome="refused",
                rule=event.rule,
                caller_hops=event.hops,
            )
        elif isinstance(event, Exchange.ExchangeOpened):
            yield RecordedDecision(
                position=position,
                at=event.timestamp,
                requester_key=event.requester_key,
                tool="sessions_send",
                reference=event.target_key,
                target_key=event.target_key,
                outcome="granted",
                caller_hops=_caller_hops(event.hops),
            )
        elif isinstance(event, Spawn.SubagentSpawned):
            yield RecordedDecision(
                position=position,
                at=event.timestamp,
                requester_key=event.requester_key,
                tool="sessions_spawn",
                reference=event.task[:80],
                target_key=event.child_key,
                outcome="granted",
                caller_hops=_caller_hops(event.hops),
            )


def _caller_hops(hops: int) -> int | None:
    # A call from outside any run starts a chain at hop 1; one from inside a run at
    # hops h makes its run hop h + 1 (domain/causality.py).
    return hops - 1 if hops > 1 else None


def decide(store: Store, config: GatewayConfig, decision: RecordedDecision) -> Refusal | str | None:
    """What ``config`` says of the recorded call: its refusal, None (granted), or a
    string saying why it cannot be judged."""
    rules = config.key_rules
    try:
        requester = Requester.from_key(rules, decision.requester_key)
    except InvalidSessionKey:
        return "requester key no longer valid"
    tool = decision.tool
    if is_subagent_key(requester.key):
        policy_section = config.tools.subagents.tools
        allowed = subagent_tools(REGISTRY.catalogue, policy_section.allow, policy_section.deny)
        if tool not in allowed:
            return subagent_tool_refusal(tool)
    if tool == "sessions_spawn" and is_subagent_key(requester.key):
        return subagent_tool_refusal(tool)
    max_hops = config.session.agentToAgent.maxHops
    if (
        tool in {"sessions_send", "sessions_spawn"}
        and decision.caller_hops is not None
        and hop_limit_reached(decision.caller_hops, max_hops)
    ):
        return hop_limit_refusal(max_hops)
    if decision.target_key is None:
        # A hop or sub-agent refusal was made before any session was looked up: the gate
        # that refused it is what is judged. Anything else named no session.
        if decision.rule in {"session.agentToAgent.maxHops", "tools.subagents.tools"}:
            return None
        return "the call named no session (a label or sessionId lookup)"
    policy = access_policy(config, requester)
    stored = store.session(decision.target_key)
    target = stored.state.policy_target(rules) if stored is not None else None
    if tool == "sessions_spawn":
        return policy.send_refusal(target) if target is not None else None
    access = REACHING_TOOLS.get(tool)
    if access is None:
        return f"{tool} names no session"
    refusal = policy.reach_refusal(
        target,
        decision.reference,
        access="history" if access == "history" else "messaging",
        target_key=decision.target_key,
        target_agent=stored.state.agent_id if stored else agent_id_of(decision.target_key),
    )
    if refusal is None and tool == "sessions_send" and target is not None:
        refusal = policy.send_refusal(target)
    return refusal


def policy_diff(store: Store, candidate: GatewayConfig) -> PolicyDiff:
    """Replay every recorded decision under ``candidate``; list the ones that flip."""
    decisions = unjudged = 0
    flips: list[Flip] = []
    for decision in recorded_decisions(store):
        decisions += 1
        answer = decide(store, candidate, decision)
        if isinstance(answer, str):
            unjudged += 1
            continue
        now: Outcome = "granted" if answer is None else "refused"
        if now != decision.outcome:
            flips.append(Flip(decision=decision, now=now, refusal=answer))
    return PolicyDiff(decisions=decisions, unjudged=unjudged, flips=flips)
