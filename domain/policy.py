"""Who may reach which session, and which sessions take sends: every rule in one place.

Four rules decide, each from OpenClaw's behaviour (openclaw-behaviour.md):

* the agent-to-agent rule (§2.7): may an agent's sessions reach another agent's;
* the visibility scope (``tools.sessions.visibility``, contract decision 28): ``self``,
  ``tree`` (the default), ``agent`` or ``all``;
* sandbox visibility (§9): a sandboxed session sees only the sessions it spawned, whatever
  its scope says (the clamp);
* the send policy (§7): may anything be sent into (or delivered out of) a session.

A fourth, ours (ADR 0022), says what a send into a *busy* session does: the busy policy.

``AccessPolicy`` combines them for one requester. The application asks it at every entry
point (tools, exchange turns, announces) and records each refusal; nothing else decides.
Every answer is computed on the *session* (its canonical key and row), never on the way
it was named, so a key, an alias, a sessionId, a label or a case variant of a key all get
the same answer (contract decision 11).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sessionwire.domain.causality import hop_limit_message

SEND_BLOCKED = "send blocked by session policy"
SANDBOX_LABEL_LIMITED = "Sandboxed sessions_send label lookup is limited to this agent"

Access = Literal["history", "messaging"]
Action = Literal["allow", "deny"]
Check = Literal[
    "agent_to_agent",
    "sandbox",
    "visibility",
    "send_policy",
    "subagent_tools",
    "hop_limit",
    "trace_budget",
    "run_header",
]


def not_visible(reference: str) -> str:
    """The refusal a sandboxed session gets for anything it did not spawn."""
    return f"Session not visible from this sandboxed agent session: {reference}"


# The agent-to-agent rule ------------------------------------------------------------------


def glob_matches(pattern: str, text: str) -> bool:
    """``*``-only glob matching, case-insensitive, in time linear in the pattern and text.

    A regex built from the pattern (``a*b*c`` → ``a.*b.*c``) backtracks: six ``*`` in an
    ``allow`` pattern held the gateway for seconds per call. Here the first piece must
    start the text, the last must end it, and each piece between is taken at its leftmost
    place after the one before (leftmost is always safe: it leaves the most text behind).
    """
    pieces = pattern.casefold().split("*")
    text = text.casefold()
    if len(pieces) == 1:
        return text == pieces[0]
    first, *middle, last = pieces
    if len(first) + len(last) > len(text):
        return False
    if not (text.startswith(first) and text.endswith(last)):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def _pattern_matches(pattern: str, agent_id: str) -> bool:
    pattern = pattern.strip()
    if not pattern:
        return False
    if pattern == "*":
        return True
    if "*" not in pattern:
        return pattern == agent_id
    return glob_matches(pattern, agent_id)


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

    def refusal(self, requester_agent: str, target_agent: str, *, access: Access) -> str | None:
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


# The send policy ---------------------------------------------------------------------------


CHAT_TYPE_ALIASES = {"dm": "direct", "direct": "direct", "group": "group", "channel": "channel"}


def normalize_chat_type(value: str | None) -> str | None:
    if value is None:
        return None
    return CHAT_TYPE_ALIASES.get(value.strip().lower())


@dataclass(frozen=True)
class PolicyTarget:
    """What the rules look at in a session: its canonical key and a few row fields."""

    key: str
    rest: str
    """The key without its ``agent:<id>:`` prefix (``cron:job-1`` for ``agent:main:cron:job-1``)."""
    agent_id: str
    spawned_by: str | None = None
    ancestors: tuple[str, ...] = ()
    """The sessions above it in its spawn tree, nearest first (``spawned_by`` first)."""
    send_override: str | None = None
    busy_override: str | None = None
    channel: str | None = None
    """The first of the row's channel, last channel, or the channel a group key names."""
    chat_type: str | None = None


@dataclass(frozen=True)
class SendRule:
    action: Action = "allow"
    channel: str | None = None
    chat_type: str | None = None
    key_prefix: str | None = None

    def matches(self, target: PolicyTarget, channel: str | None) -> bool:
        if self.channel is not None and (channel or "").lower() != self.channel.strip().lower():
            return False
        if self.chat_type is not None and target.chat_type != normalize_chat_type(self.chat_type):
            return False
        if self.key_prefix is not None:
            # Matched on the canonical key and on its agent-relative rest, so
            # `keyPrefix: "cron:"` means every cron session however it was named
            # (OpenClaw compares the raw key, which canonical keys never start with).
            prefix = self.key_prefix.strip().lower()
            if not (target.key.startswith(prefix) or target.rest.startswith(prefix)):
                return False
        return True


@dataclass(frozen=True)
class SendDecision:
    action: Action
    rule: str
    """Which rule decided, for the record: an override, a rule by index, the default."""

    @property
    def allowed(self) -> bool:
        return self.action == "allow"


@dataclass(frozen=True)
class SendPolicy:
    """``session.sendPolicy`` (rules in order, then the default) plus per-session overrides."""

    rules: tuple[SendRule, ...] = ()
    default: Action = "allow"
    configured: bool = False

    def decide(self, target: PolicyTarget, *, channel: str | None = None) -> SendDecision:
        """OpenClaw's resolveSendPolicy (§7): an override wins, then the first matching
        deny, then any matching allow, then the default."""
        override = (target.send_override or "").strip().lower()
        if override in {"allow", "deny"}:
            action: Action = "allow" if override == "allow" else "deny"
            return SendDecision(action, f"session override (sendPolicy={override})")
        if not self.configured:
            return SendDecision("allow", "no session.sendPolicy configured")
        effective_channel = (channel or "").strip().lower() or target.channel
        allowed_by: str | None = None
        for index, rule in enumerate(self.rules):
            if not rule.matches(target, effective_channel):
                continue
            if rule.action == "deny":
                return SendDecision("deny", f"session.sendPolicy.rules[{index}]")
            allowed_by = allowed_by or f"session.sendPolicy.rules[{index}]"
        if allowed_by is not None:
            return SendDecision("allow", allowed_by)
        return SendDecision(self.default, "session.sendPolicy.default")


# The busy policy (ADR 0022) ---------------------------------------------------------------

BusyAction = Literal["enqueue", "reject", "interrupt", "steer"]
BUSY_ACTIONS: tuple[BusyAction, ...] = ("enqueue", "reject", "interrupt", "steer")
DEFAULT_BUSY: BusyAction = "enqueue"


@dataclass(frozen=True)
class BusyChoice:
    action: BusyAction
    rule: str
    """Which setting decided, for the record: the session's override or the config."""


@dataclass(frozen=True)
class BusyPolicy:
    """``session.agentToAgent.busy`` plus per-session overrides: what a ``sessions_send``
    into a session with a run in flight does (queue behind it, be refused, cancel it, or
    be injected into it)."""

    default: BusyAction = DEFAULT_BUSY

    def decide(self, target: PolicyTarget) -> BusyChoice:
        override = (target.busy_override or "").strip().lower()
        for action in BUSY_ACTIONS:
            if override == action:
                return BusyChoice(action, f"session override (busy={action})")
        return BusyChoice(self.default, "session.agentToAgent.busy")


# Sandbox visibility --------------------------------------------------------------------------


SandboxMode = Literal["off", "non-main", "all"]
Visibility = Literal["spawned", "all"]


@dataclass(frozen=True)
class SandboxSettings:
    mode: SandboxMode = "off"
    visibility: Visibility = "spawned"


@dataclass(frozen=True)
class SandboxPolicy:
    """Which sessions run sandboxed (``sandbox.mode``) and what they may see
    (``sandbox.sessionToolsVisibility``), per agent with a default."""

    default: SandboxSettings = SandboxSettings()
    per_agent: Mapping[str, SandboxSettings] = field(default_factory=dict)

    def settings_for(self, agent_id: str) -> SandboxSettings:
        return self.per_agent.get(agent_id, self.default)

    def restricts(self, *, agent_id: str, is_main: bool, is_subagent: bool) -> bool:
        """True when a session sees only what it spawned (OpenClaw's restrictToSpawned)."""
        settings = self.settings_for(agent_id)
        if settings.mode == "off" or (settings.mode == "non-main" and is_main):
            return False
        return settings.visibility == "spawned" and not is_subagent


# Visibility scopes (contract decision 28) ---------------------------------------------------


SessionsVisibility = Literal["self", "tree", "agent", "all"]
SESSIONS_VISIBILITIES: tuple[SessionsVisibility, ...] = ("self", "tree", "agent", "all")
# Not OpenClaw's later `agent` (PR #133469): that widened every user of an agent at once.
DEFAULT_SESSIONS_VISIBILITY: SessionsVisibility = "tree"
VISIBILITY_RULE = "tools.sessions.visibility"
AGENT_VISIBILITY_RULE = "agents.list[].tools.sessions.visibility"


@dataclass(frozen=True)
class VisibilityPolicy:
    """``tools.sessions.visibility`` with its per-agent overrides
    (``agents.list[].tools.sessions.visibility``)."""

    default: SessionsVisibility = DEFAULT_SESSIONS_VISIBILITY
    per_agent: Mapping[str, SessionsVisibility] = field(default_factory=dict)

    def mode_for(self, agent_id: str) -> SessionsVisibility:
        return self.per_agent.get(agent_id, self.default)

    def rule_for(self, agent_id: str) -> str:
        return AGENT_VISIBILITY_RULE if agent_id in self.per_agent else VISIBILITY_RULE


def _action(access: Access) -> str:
    return "Session history" if access == "history" else "Session send"


def scope_message(mode: SessionsVisibility, access: Access, *, cross_agent: bool) -> str:
    """The refusal for a session outside the requester's scope: OpenClaw's text for
    another agent's session (the same whether it exists or not), ours for its own."""
    if cross_agent:
        return (
            f"{_action(access)} visibility is restricted. Set tools.sessions.visibility=all "
            "and tools.agentToAgent.enabled=true to allow cross-agent access; use "
            "tools.agentToAgent.allow to restrict permitted agent pairs."
        )
    # Decision 41: one text for a session outside the scope and one that does not exist,
    # naming the scope, so an agent still learns what to configure.
    return hidden_or_absent(mode)


def hidden_or_absent(mode: SessionsVisibility) -> str:
    """The answer for a session of the requester's agent it may not see, or that is not
    there: the same text, whichever it is."""
    return f"Session not found, or not visible under tools.sessions.visibility={mode}."


def list_warning(mode: SessionsVisibility) -> str:
    """What a scoped ``sessions_list`` says about itself (OpenClaw PR #86944)."""
    return (
        f"Session visibility is restricted (effective tools.sessions.visibility={mode}). "
        "Results may omit sessions outside the current scope. The count field reflects "
        "only sessions within the current scope."
    )


# One requester's view ------------------------------------------------------------------------


def subagent_tool_refusal(tool: str) -> Refusal:
    """A sub-agent asking for a tool its tool set leaves out (session tools by default)."""
    message = (
        "sessions_spawn is not allowed from sub-agent sessions"
        if tool == "sessions_spawn"
        else f"{tool} is not available to sub-agent sessions"
    )
    return Refusal("forbidden", message, "subagent_tools", "tools.subagents.tools")


def hop_limit_refusal(max_hops: int) -> Refusal:
    """A send or spawn from a run whose chain has ``max_hops`` hops already (decision 17)."""
    return Refusal(
        "forbidden", hop_limit_message(max_hops), "hop_limit", "session.agentToAgent.maxHops"
    )


@dataclass(frozen=True)
class Refusal:
    """Why a tool may not touch a session, in OpenClaw's words, with the rule that said so."""

    status: Literal["forbidden", "error"]
    message: str
    check: Check
    rule: str


@dataclass(frozen=True)
class ListScope:
    """Which sessions ``sessions_list`` may show, before the agent-to-agent rule."""

    requester: bool
    """The requester's own session."""
    tree: bool
    """The sessions it spawned, transitively (whatever their agent)."""
    agent: bool
    """Every session of its agent."""
    every: bool
    """Every session (``all``)."""


@dataclass(frozen=True)
class AccessPolicy:
    """Everything one requester session may and may not do, decided in one place.

    An answer about a session depends only on its key, its agent and whether the
    requester spawned it (its ``ancestors``), never on whether it exists: a hidden session
    and a missing one get the same answer.
    """

    requester_key: str
    requester_agent: str
    a2a: AgentToAgentPolicy
    send: SendPolicy
    sandboxed: bool
    """True when the requester sees only the sessions it spawned."""
    visibility: SessionsVisibility = "all"
    """The requester's configured scope (``tools.sessions.visibility``)."""
    requester_is_main: bool = False
    """The requester is its agent's canonical main session (``tree`` widens for it)."""
    visibility_rule: str = VISIBILITY_RULE

    @property
    def effective_visibility(self) -> SessionsVisibility:
        """The scope in force: the sandbox clamps ``agent`` and ``all`` to ``tree`` (and
        narrows it further, to the spawned sessions alone); ``self`` stays ``self``."""
        if self.sandboxed and self.visibility in ("agent", "all"):
            return "tree"
        return self.visibility

    def spawned(self, target: PolicyTarget | None) -> bool:
        """Did the requester spawn this session (directly or through its children)?"""
        return target is not None and self.requester_key in target.ancestors

    def agent_refusal(self, target_agent: str, *, access: Access) -> Refusal | None:
        message = self.a2a.refusal(self.requester_agent, target_agent, access=access)
        if message is None:
            return None
        rule = "tools.agentToAgent.enabled" if not self.a2a.enabled else "tools.agentToAgent.allow"
        return Refusal("forbidden", message, "agent_to_agent", rule)

    def sandbox_refusal(self, target: PolicyTarget | None, reference: str) -> Refusal | None:
        """A sandboxed requester reaches only its own spawned sessions; anything else,
        existing or not, gets the same answer (so the answer tells nothing)."""
        if not self.sandboxed or self.spawned(target):
            return None
        return Refusal(
            "forbidden", not_visible(reference), "sandbox", "sandbox.sessionToolsVisibility"
        )

    def scope_refusal(
        self, target: PolicyTarget | None, *, target_key: str, target_agent: str, access: Access
    ) -> Refusal | None:
        """``tools.sessions.visibility``: is the session inside the requester's scope?
        (The agent-to-agent rule still applies to another agent's session after this.)"""
        mode = self.effective_visibility
        if mode == "all" or target_key == self.requester_key:
            return None
        if mode == "tree" and self.spawned(target):
            return None
        cross_agent = target_agent != self.requester_agent
        if not cross_agent and (mode == "agent" or (mode == "tree" and self.requester_is_main)):
            return None
        message = scope_message(mode, access, cross_agent=cross_agent)
        return Refusal("forbidden", message, "visibility", self.visibility_rule)

    def label_refusal(self, requested_agent: str | None) -> Refusal | None:
        """``sessions_send`` by label naming another agent (§6.2 step 2)."""
        if requested_agent is None or requested_agent == self.requester_agent:
            return None
        if self.sandboxed:
            return Refusal(
                "forbidden", SANDBOX_LABEL_LIMITED, "sandbox", "sandbox.sessionToolsVisibility"
            )
        if self.effective_visibility != "all":
            message = scope_message(self.effective_visibility, "messaging", cross_agent=True)
            return Refusal("forbidden", message, "visibility", self.visibility_rule)
        return self.agent_refusal(requested_agent, access="messaging")

    def sees(self, target: PolicyTarget) -> bool:
        """May the requester learn that this session exists (list, lookups by id or label)?"""
        refusal = self.reach_refusal(
            target,
            target.key,
            access="history",
            target_key=target.key,
            target_agent=target.agent_id,
        )
        return refusal is None

    def reach_refusal(
        self,
        target: PolicyTarget | None,
        reference: str,
        *,
        access: Access,
        target_key: str,
        target_agent: str,
    ) -> Refusal | None:
        """The sandbox first, then the scope, then the agent-to-agent rule (the order of
        §5 and §6.2). ``target`` is None for a key nothing is stored under: it gets the
        answer a stored session outside the requester's tree would get."""
        return (
            self.sandbox_refusal(target, reference)
            or self.scope_refusal(
                target, target_key=target_key, target_agent=target_agent, access=access
            )
            or self.agent_refusal(target_agent, access=access)
        )

    def send_refusal(self, target: PolicyTarget) -> Refusal | None:
        """Sending into ``target``: its send policy (checked after it may be reached)."""
        decision = self.send.decide(target)
        if decision.allowed:
            return None
        return Refusal("error", SEND_BLOCKED, "send_policy", decision.rule)

    def list_scope(self) -> ListScope:
        """What ``sessions_list`` may show (the same rules as ``sees``, as query terms)."""
        if self.sandboxed:
            # OpenClaw's restrictToSpawned: not even the requester's own session.
            spawned = self.effective_visibility != "self"
            return ListScope(requester=False, tree=spawned, agent=False, every=False)
        mode = self.visibility
        return ListScope(
            requester=True,
            tree=mode == "tree",
            agent=mode == "agent" or (mode == "tree" and self.requester_is_main),
            every=mode == "all",
        )
