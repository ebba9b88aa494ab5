"""Who may reach which session: the session tools' security as one table.

Every row is requester × tool × target × naming form under one config, with the outcome
the rules give (openclaw-behaviour.md §2.7, §5, §6.2, §7, §9; conformance B, C, D4, F;
contract decisions 10 and 11): allowed, or the exact refusal, and exactly one
``AccessRefused`` event for each refusal a policy makes (none for anything else).

Every config names its visibility scope (``tools.sessions.visibility``, contract decision
28): the configs written before scopes existed keep ``all``, what every session saw then;
the ``scope-*`` configs add ``self``, ``tree`` (the default, left unset), ``agent`` and
per-agent overrides, alone and with sandboxing.

The world is the same under every config: agent ``main`` has its main session, a discord
group ``dev`` and a cron job; agent ``other`` has its main session and a discord group
``ops``; ``main``, ``dev`` and ``other`` each spawned one labelled sub-agent. Each config
builds the world once and runs all its rows against it, reporting every failing row
together. The rows follow from a few facts per config (who is sandboxed, which sessions a
send may not enter), so a naming form can never get a different answer than another.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import AgentRuntime, Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
# A send let in: the matrix's sends pile up in sessions that run nothing between rows, so
# its message is started or queued (what delivery says is tested in test_sessions_send).
PENDING = {"status": "started or queued", "mode": "announce"}


class Silent(AgentRuntime):
    """Answers every run at once with no reply. The rows are decided when a tool is
    called; a reply would only go on to a ping-pong turn and an announce run (started in
    the background, CPU the matrix spent for nothing): with none, the exchange closes."""

    async def run(self, request: RunRequest) -> RunReply:
        return RunReply(text=None)


SANDBOX_RULE = "sandbox.sessionToolsVisibility"
SEND_BLOCKED = "send blocked by session policy"
SUBAGENT = "agent:main:subagent:worker"

# The stored sessions (kids get their keys when spawned) -----------------------------------

KEYS = {
    "main": "agent:main:main",
    "dev": "agent:main:discord:group:dev",
    "cron": "agent:main:cron:job-1",
    "other": "agent:other:main",
    "ops": "agent:other:discord:group:ops",
    "ghost": "agent:main:discord:group:ghost",
    "ghost-other": "agent:other:discord:group:ghost",
}
AGENT = {
    "main": "main",
    "dev": "main",
    "cron": "main",
    "other": "other",
    "ops": "other",
    "kid-main": "main",
    "kid-dev": "main",
    "kid-other": "other",
    "ghost": "main",
    "ghost-other": "other",
}
PARENT = {"kid-main": "main", "kid-dev": "dev", "kid-other": "other"}
LABELS = {
    "dev": "dev-room",
    "other": "other-room",
    "kid-main": "kid-main",
    "kid-dev": "kid-dev",
    "kid-other": "kid-other",
}
STORED = ["main", "dev", "cron", "other", "ops", "kid-main", "kid-dev", "kid-other"]
TARGETS = [*STORED, "ghost", "ghost-other"]
# How each requester names itself to call_tool.
REQUESTERS = {
    "main": "main",
    "dev": "discord:group:dev",
    "other": "agent:other:main",
    "ops": "agent:other:discord:group:ops",
    "sub": SUBAGENT,
}
FORMS = ["key", "bare", "alias", "upper", "spaced", "sessionId", "label", "label+agent"]
MANY = ("main", "dev", "other", "ops", "sub")


@dataclass(frozen=True)
class Case:
    """One config and the facts the expected outcomes follow from."""

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    restricted: frozenset[str] = frozenset()
    """Requesters that see only what they spawned."""
    send_denied: dict[str, str] = field(default_factory=dict)
    """Stored sessions a send may not enter, with the rule that says so."""
    setup: tuple[tuple[str, str, Any], ...] = ()
    """Done to the world first: ("patch", session, sendPolicy), ("owner"|"guest", session,
    message), or ("direct", "main", None) to make agent main's main session a direct chat."""
    spawn_denied_by: str | None = None
    requesters: tuple[str, ...] = ("main", "dev", "other", "sub")
    visibility: str | None = "all"
    """``tools.sessions.visibility`` (None: unset, so the default ``tree``)."""
    agent_visibility: dict[str, str] = field(default_factory=dict)
    """Per-agent ``agents.list[].tools.sessions.visibility``."""

    def gateway_config(self) -> dict[str, Any]:
        config = {**self.config}
        if self.visibility is not None:
            tools = {**config.get("tools", {}), "sessions": {"visibility": self.visibility}}
            config["tools"] = tools
        if self.agent_visibility:
            agents = {**config.get("agents", {})}
            # Agent main first: the first listed agent is the default one.
            listed = agents.get("list") or [{"id": "main"}]
            entries = {entry["id"]: dict(entry) for entry in listed}
            for agent_id, mode in self.agent_visibility.items():
                entries.setdefault(agent_id, {"id": agent_id})["tools"] = {
                    "sessions": {"visibility": mode}
                }
            agents["list"] = list(entries.values())
            config["agents"] = agents
        return config

    def scope(self, requester: str) -> str:
        """The requester's effective scope: the sandbox clamps ``agent`` and ``all``."""
        mode = self.agent_visibility.get(requester_agent(requester)) or self.visibility or "tree"
        if requester in self.restricted and mode in {"agent", "all"}:
            return "tree"
        return mode

    def scope_rule(self, requester: str) -> str:
        if requester_agent(requester) in self.agent_visibility:
            return "agents.list[].tools.sessions.visibility"
        return "tools.sessions.visibility"


def a2a(enabled: bool, allow: list[str] | None = None) -> dict[str, Any]:
    section: dict[str, Any] = {"enabled": enabled}
    if allow is not None:
        section["allow"] = allow
    return {"tools": {"agentToAgent": section}}


def sandbox(mode: str, visibility: str, **more: Any) -> dict[str, Any]:
    return {
        "agents": {
            "defaults": {"sandbox": {"mode": mode, "sessionToolsVisibility": visibility}},
            **more,
        }
    }


def send_policy(rules: list[dict[str, Any]], default: str = "allow") -> dict[str, Any]:
    return {"session": {"sendPolicy": {"rules": rules, "default": default}}}


DENY_DISCORD_GROUPS = [{"action": "deny", "match": {"channel": "discord", "chatType": "group"}}]
RULE0 = "session.sendPolicy.rules[0]"
OVERRIDE_DENY = "session override (sendPolicy=deny)"

CASES = [
    Case("a2a-off"),
    Case("a2a-on", a2a(True)),
    Case("a2a-allow-main-only", a2a(True, ["main"])),
    Case("a2a-allow-globs", a2a(True, ["ma*", "OTH*"])),
    Case("a2a-allow-near-miss", a2a(True, ["main", "oth"])),
    Case(
        "sandbox-all-spawned",
        sandbox("all", "spawned"),
        restricted=frozenset({"main", "dev", "other", "ops"}),
        requesters=("main", "dev", "other", "ops", "sub"),
    ),
    Case(
        "sandbox-all-spawned+a2a-on",
        {**sandbox("all", "spawned"), **a2a(True)},
        restricted=frozenset({"main", "dev", "other"}),
    ),
    Case(
        "sandbox-non-main-spawned",
        {**sandbox("non-main", "spawned"), **a2a(True)},
        restricted=frozenset({"dev", "ops"}),
        requesters=("main", "dev", "other", "ops", "sub"),
    ),
    Case("sandbox-all-visibility-all", {**sandbox("all", "all"), **a2a(True)}),
    Case(
        "sandbox-per-agent-override",
        {
            **sandbox("all", "spawned", list=[{"id": "main", "sandbox": {"mode": "off"}}]),
            **a2a(True),
        },
        restricted=frozenset({"other", "ops"}),
        requesters=("main", "dev", "other", "ops"),
    ),
    Case(
        "sandbox-per-agent-non-main",
        {
            "agents": {"list": [{"id": "main"}, {"id": "other", "sandbox": {"mode": "non-main"}}]},
            **a2a(True),
        },
        restricted=frozenset({"ops"}),
        requesters=("main", "dev", "other", "ops"),
    ),
    Case(
        "send-deny-discord-groups",
        {**send_policy(DENY_DISCORD_GROUPS), **a2a(True)},
        send_denied={"dev": RULE0, "ops": RULE0},
    ),
    Case(
        "send-deny-legacy-provider",
        {**send_policy([{"action": "deny", "match": {"provider": "discord"}}]), **a2a(True)},
        send_denied={"dev": RULE0, "ops": RULE0},
    ),
    Case(
        "send-deny-dm-chat-type",
        {
            **send_policy([{"action": "deny", "match": {"chatType": "dm"}}]),
            **a2a(True),
        },
        send_denied={"main": RULE0},
        setup=(("direct", "main", None),),
    ),
    Case(
        "send-deny-cron-prefix",
        send_policy([{"action": "deny", "match": {"keyPrefix": "cron:"}}]),
        send_denied={"cron": RULE0},
    ),
    Case(
        "send-default-deny-allow-mains",
        {**send_policy([{"action": "allow", "match": {"keyPrefix": "main"}}], "deny"), **a2a(True)},
        send_denied=dict.fromkeys(("dev", "cron", "ops"), "session.sendPolicy.default"),
        spawn_denied_by="session.sendPolicy.default",
    ),
    Case(
        "send-later-deny-beats-allow",
        send_policy(
            [
                {"action": "allow", "match": {"channel": "discord"}},
                {"action": "deny", "match": {"chatType": "group"}},
            ]
        ),
        send_denied={"dev": "session.sendPolicy.rules[1]", "ops": "session.sendPolicy.rules[1]"},
    ),
    Case(
        "send-override-patch-deny",
        a2a(True),
        send_denied={"dev": OVERRIDE_DENY},
        setup=(("patch", "dev", "deny"),),
    ),
    Case(
        "send-override-allow-beats-rule",
        {**send_policy(DENY_DISCORD_GROUPS), **a2a(True)},
        send_denied={"ops": RULE0},
        setup=(("patch", "dev", "allow"),),
    ),
    Case(
        "send-override-cleared",
        {**send_policy(DENY_DISCORD_GROUPS), **a2a(True)},
        send_denied={"dev": RULE0, "ops": RULE0},
        setup=(("patch", "dev", "allow"), ("patch", "dev", None)),
    ),
    Case(
        "send-owner-send-off",
        a2a(True),
        send_denied={"dev": OVERRIDE_DENY},
        setup=(("owner", "dev", "/send off"),),
    ),
    Case(
        "send-owner-send-inherit",
        a2a(True),
        setup=(("owner", "dev", "/send off"), ("owner", "dev", "/send inherit")),
    ),
    Case(
        "send-guest-send-off-ignored",
        a2a(True),
        setup=(("guest", "dev", "/send off"),),
    ),
    Case(
        # The built-in sub-agent deny list wins over tools.subagents.tools.allow (§8.4).
        "subagent-allow-list-cannot-reopen-session-tools",
        {"tools": {"subagents": {"tools": {"allow": ["sessions_*", "*"]}}}},
        requesters=("sub", "main"),
    ),
    Case(
        "spawn-deny-subagent-prefix",
        send_policy([{"action": "deny", "match": {"keyPrefix": "subagent:"}}]),
        spawn_denied_by=RULE0,
        requesters=("main", "dev", "sub"),
    ),
    Case(
        "spawn-deny-full-subagent-prefix",
        send_policy([{"action": "deny", "match": {"keyPrefix": "agent:main:subagent:"}}]),
        spawn_denied_by=RULE0,
        requesters=("main", "dev"),
    ),
    # Visibility scopes (decision 28): main and non-main requesters, with and without
    # agent-to-agent and sandboxing.
    Case("scope-tree-default", a2a(True), visibility=None, requesters=MANY),
    Case("scope-tree-a2a-off", visibility="tree", requesters=MANY),
    Case("scope-self", a2a(True), visibility="self", requesters=MANY),
    Case("scope-agent", a2a(True), visibility="agent", requesters=MANY),
    Case("scope-all-a2a-off", visibility="all", requesters=MANY),
    Case(
        "scope-per-agent",
        a2a(True),
        visibility="self",
        agent_visibility={"other": "all"},
        requesters=MANY,
    ),
    Case(
        "scope-tree+sandbox-non-main",
        {**sandbox("non-main", "spawned"), **a2a(True)},
        restricted=frozenset({"dev", "ops"}),
        visibility=None,
        requesters=MANY,
    ),
    Case(
        "scope-agent+sandbox-all",
        {**sandbox("all", "spawned"), **a2a(True)},
        restricted=frozenset({"main", "dev", "other", "ops"}),
        visibility="agent",
        requesters=MANY,
    ),
    Case(
        "scope-self+sandbox-all",
        {**sandbox("all", "spawned"), **a2a(True)},
        restricted=frozenset({"main", "dev", "other", "ops"}),
        visibility="self",
        requesters=MANY,
    ),
    Case(
        "scope-all+sandbox-visibility-all",
        {**sandbox("all", "all"), **a2a(True)},
        visibility="tree",
        requesters=MANY,
    ),
]


# The world --------------------------------------------------------------------------------


@dataclass
class World:
    gw: Gateway
    runtime: AgentRuntime
    delivery: CapturingDelivery
    keys: dict[str, str]
    session_ids: dict[str, str]
    position: int = 1

    def new_events(self) -> list[Any]:
        events = list(store_of(self.gw).events(start=self.position))
        if events:
            self.position = events[-1][0] + 1
        return [event for _, event in events]


async def build_world(case: Case, store_url: str) -> World:
    runtime = Silent()
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load(case.gateway_config()),
        store=store_url,
        clock=VirtualClock(start=START),
        runtime=runtime,
        delivery=delivery,
    )
    chat_type = "direct" if ("direct", "main", None) in case.setup else None
    await gw.record_message(
        "main", role="user", content="SECRET-main", channel="whatsapp", chat_type=chat_type
    )
    for name in ("dev", "ops"):
        await gw.record_message(
            KEYS[name], role="user", content=f"SECRET-{name}", channel="discord", chat_type="group"
        )
    for name in ("cron", "other"):
        await gw.record_message(KEYS[name], role="user", content=f"SECRET-{name}")
    for name in ("dev", "other"):
        await gw.patch_session(KEYS[name], label=LABELS[name])
    keys = dict(KEYS)
    for kid, parent in PARENT.items():
        spawned = await gw.call_tool(
            KEYS[parent], "sessions_spawn", {"task": f"SECRET-{kid}", "label": LABELS[kid]}
        )
        if case.spawn_denied_by is None:
            assert spawned["status"] == "accepted", spawned
            keys[kid] = spawned["childSessionKey"]
    await gw.wait_idle()
    for action, name, value in case.setup:
        if action == "patch":
            await gw.patch_session(keys[name], sendPolicy=value)
        elif action in {"owner", "guest"}:
            await gw.record_message(
                keys[name], role="user", content=value, sender_is_owner=action == "owner"
            )
    session_ids = {}
    for name in STORED:
        if name in keys:
            stored = store_of(gw).session(keys[name])
            assert stored is not None
            session_ids[name] = stored.state.session_id
    world = World(gw, runtime, delivery, keys, session_ids)
    world.new_events()
    return world


# The rules, as the expected outcomes -------------------------------------------------------


def requester_key(requester: str) -> str:
    return SUBAGENT if requester == "sub" else KEYS[requester]


def requester_agent(requester: str) -> str:
    return "main" if requester == "sub" else AGENT[requester]


def agent_refusal(case: Case, requester: str, target: str, access: str) -> tuple[str, str] | None:
    mine, theirs = requester_agent(requester), AGENT[target]
    if mine == theirs:
        return None
    section = case.config.get("tools", {}).get("agentToAgent", {})
    if not section.get("enabled"):
        purpose = "access" if access == "history" else "sends"
        return (
            f"Agent-to-agent {access} is disabled. Set tools.agentToAgent.enabled=true "
            f"to allow cross-agent {purpose}.",
            "tools.agentToAgent.enabled",
        )
    patterns = [p.lower() for p in section.get("allow", [])]
    if not patterns or all(
        any(fnmatch.fnmatchcase(a, p) for p in patterns) for a in (mine, theirs)
    ):
        return None
    return (
        f"Agent-to-agent {access} denied by tools.agentToAgent.allow.",
        "tools.agentToAgent.allow",
    )


def spawned_by(target: str, requester: str) -> bool:
    return PARENT.get(target) == requester


MAINS = {"main", "other"}


def scope_refusal(case: Case, requester: str, target: str, access: str) -> tuple[str, str] | None:
    """``tools.sessions.visibility``: OpenClaw's texts for a session outside the scope."""
    mode = case.scope(requester)
    if mode == "all" or target == requester:
        return None
    if mode == "tree" and spawned_by(target, requester):
        return None
    cross_agent = AGENT[target] != requester_agent(requester)
    if not cross_agent and (mode == "agent" or (mode == "tree" and requester in MAINS)):
        return None
    action = "Session history" if access == "history" else "Session send"
    if cross_agent:
        message = (
            f"{action} visibility is restricted. Set tools.sessions.visibility=all and "
            "tools.agentToAgent.enabled=true to allow cross-agent access; use "
            "tools.agentToAgent.allow to restrict permitted agent pairs."
        )
    else:  # decision 41: one text whether the session is hidden or missing
        message = f"Session not found, or not visible under tools.sessions.visibility={mode}."
    return message, case.scope_rule(requester)


def sees(case: Case, requester: str, target: str) -> bool:
    if requester in case.restricted and not spawned_by(target, requester):
        return False
    if scope_refusal(case, requester, target, "history") is not None:
        return False
    return agent_refusal(case, requester, target, "history") is None


def reference(world: World, requester: str, target: str, form: str) -> str | None:
    """How ``form`` names ``target`` for ``requester``; None when it cannot."""
    key = world.keys.get(target)
    if key is None:
        return None
    same_agent = AGENT[target] == requester_agent(requester)
    if form == "key":
        return key
    if form == "bare":
        return key.split(":", 2)[2] if same_agent and target != "main" else None
    if form == "alias":
        return "main" if target == "main" and same_agent else None
    if form == "upper":
        return key.upper()
    if form == "spaced":
        return f"  {key}  "
    if form == "sessionId":
        return world.session_ids.get(target)
    return None


def display(world: World, requester: str, target: str) -> str:
    key = world.keys[target]
    return "main" if key == f"agent:{requester_agent(requester)}:main" else key


@dataclass
class Expected:
    result: dict[str, Any] | None
    """None: allowed."""
    refusal: tuple[str, str] | None = None
    """(check, rule) of the AccessRefused event the refusal records."""


def refused(tool: str, message: str, *, status: str = "forbidden", **more: Any) -> dict[str, Any]:
    return {"status": status, "tool": tool, "error": message, **more}


def expect_reach(
    world: World, case: Case, requester: str, tool: str, target: str, form: str, ref: str
) -> Expected:
    """history or send naming ``target`` by key or sessionId."""
    access = "history" if tool == "sessions_history" else "messaging"
    restricted = requester in case.restricted
    by_id = form == "sessionId"
    shown = {} if by_id else {"sessionKey": display(world, requester, target)}
    if tool == "sessions_history":
        shown = {}
    if by_id and not sees(case, requester, target):
        if restricted:
            message = f"Session not visible from this sandboxed agent session: {ref.strip()}"
            return Expected(refused(tool, message), ("sandbox", SANDBOX_RULE))
        message = f"Session not found: {ref} (use the full sessionKey from sessions_list)"
        return Expected(refused(tool, message, status="error"))
    if restricted and not spawned_by(target, requester):
        message = f"Session not visible from this sandboxed agent session: {ref.strip()}"
        return Expected(refused(tool, message, **shown), ("sandbox", SANDBOX_RULE))
    out_of_scope = scope_refusal(case, requester, target, access)
    if out_of_scope is not None:
        return Expected(refused(tool, out_of_scope[0], **shown), ("visibility", out_of_scope[1]))
    a2a_refusal = agent_refusal(case, requester, target, access)
    if a2a_refusal is not None:
        return Expected(refused(tool, a2a_refusal[0], **shown), ("agent_to_agent", a2a_refusal[1]))
    if target not in world.session_ids:
        return Expected(refused(tool, f"Session not found: {ref}", status="error"))
    return expect_send_policy(world, case, requester, tool, target)


def expect_send_policy(
    world: World, case: Case, requester: str, tool: str, target: str
) -> Expected:
    if tool == "sessions_send" and target in case.send_denied:
        result = refused(
            tool, SEND_BLOCKED, status="error", sessionKey=display(world, requester, target)
        )
        return Expected(result, ("send_policy", case.send_denied[target]))
    return Expected(None)


def expect_label(
    world: World, case: Case, requester: str, target: str, agent_id: str | None
) -> Expected:
    tool = "sessions_send"
    label = LABELS[target]
    restricted = requester in case.restricted
    if agent_id is not None and agent_id != requester_agent(requester):
        if restricted:
            message = "Sandboxed sessions_send label lookup is limited to this agent"
            return Expected(refused(tool, message), ("sandbox", SANDBOX_RULE))
        if case.scope(requester) != "all":
            out_of_scope = scope_refusal(case, requester, target, "messaging")
            assert out_of_scope is not None  # another agent's session, outside the scope
            return Expected(refused(tool, out_of_scope[0]), ("visibility", out_of_scope[1]))
        a2a_refusal = agent_refusal(case, requester, target, "messaging")
        if a2a_refusal is not None:
            return Expected(refused(tool, a2a_refusal[0]), ("agent_to_agent", a2a_refusal[1]))
    in_scope = agent_id is None or AGENT[target] == agent_id
    if restricted:
        in_scope = AGENT[target] == requester_agent(requester)
    if not (in_scope and sees(case, requester, target)):
        if restricted:
            message = f"Session not visible from this sandboxed agent session: label={label}"
            return Expected(refused(tool, message), ("sandbox", SANDBOX_RULE))
        return Expected(refused(tool, f"No session found with label: {label}", status="error"))
    return expect_send_policy(world, case, requester, tool, target)


SUBAGENT_FORBIDDEN = "{} is not available to sub-agent sessions"
SUBAGENT_RULE = ("subagent_tools", "tools.subagents.tools")


def rows(
    world: World, case: Case, requester: str
) -> list[tuple[str, str, dict[str, Any], Expected]]:
    """(row id, tool, params, expected) of every row for one requester."""
    out: list[tuple[str, str, dict[str, Any], Expected]] = []
    sub = requester == "sub"
    for target in TARGETS:
        for form in FORMS:
            for tool in ("sessions_history", "sessions_send"):
                row_id = f"{tool}({target} by {form})"
                if form.startswith("label"):
                    if tool != "sessions_send" or target not in LABELS or target not in world.keys:
                        continue
                    agent_id = AGENT[target] if form == "label+agent" else None
                    params: dict[str, Any] = {"label": LABELS[target]}
                    if agent_id is not None:
                        params["agentId"] = agent_id
                    expected = expect_label(world, case, requester, target, agent_id)
                else:
                    ref = reference(world, requester, target, form)
                    if ref is None or (target.startswith("ghost") and form != "key"):
                        continue
                    params = {"sessionKey": ref}
                    expected = expect_reach(world, case, requester, tool, target, form, ref)
                if tool == "sessions_send":
                    params |= {"message": "hello", "timeoutSeconds": 0}
                    if expected.result is None:
                        expected = Expected(
                            {
                                "status": "accepted",
                                "sessionKey": display(world, requester, target),
                                "delivery": PENDING,
                            }
                        )
                if sub:
                    expected = Expected(
                        refused(tool, SUBAGENT_FORBIDDEN.format(tool)), SUBAGENT_RULE
                    )
                out.append((row_id, tool, params, expected))
    return out


async def check_row(
    world: World, requester: str, tool: str, params: dict[str, Any], expected: Expected
) -> str | None:
    result = await world.gw.call_tool(REQUESTERS[requester], tool, params)
    refusals = [e for e in world.new_events() if type(e).__name__ == "AccessRefused"]
    got = dict(result)
    if tool == "sessions_send" and requester != "sub" and "runId" not in got:
        return f"no runId in {got}"
    got.pop("runId", None)  # a fresh id on every send, refused or not
    delivery = got.get("delivery")
    if delivery is not None and delivery.get("status") in {"started", "queued"}:
        got["delivery"] = PENDING
    if expected.result is None:
        if "status" in got or got.get("sessionKey") is None:
            return f"expected allowed, got {got}"
    else:
        want = expected.result
        if got != want:
            return f"expected {want}, got {got}"
    if expected.refusal is None:
        if refusals:
            return f"recorded {[(e.check, e.rule) for e in refusals]} but expected no refusal"
        return None
    if len(refusals) != 1:
        return f"expected one AccessRefused {expected.refusal}, got {len(refusals)}"
    event = refusals[0]
    facts = (event.check, event.rule, event.requester_key, event.tool, event.status, event.message)
    want_facts = (
        *expected.refusal,
        requester_key(requester),
        tool,
        got["status"],
        got["error"],
    )
    if facts != want_facts:
        return f"AccessRefused {facts} != {want_facts}"
    return None


def expected_list(world: World, case: Case, requester: str) -> set[str]:
    return {
        display(world, requester, name)
        for name in STORED
        if name in world.keys and sees(case, requester, name)
    }


async def run_case(
    case: Case, store_url: str, *, requesters: tuple[str, ...] | None = None
) -> None:
    world = await build_world(case, store_url)
    failures: list[str] = []
    total = 0
    try:
        for requester in requesters or case.requesters:
            for row_id, tool, params, expected in rows(world, case, requester):
                total += 1
                problem = await check_row(world, requester, tool, params, expected)
                if problem:
                    failures.append(f"  {requester} {row_id}: {problem}")
            total += 1
            problem = await check_list(world, case, requester)
            if problem:
                failures.append(f"  {requester} sessions_list: {problem}")
        # Last: a spawn adds a session, which would change the other requesters' lists.
        for requester in requesters or case.requesters:
            total += 1
            problem = await check_spawn(world, case, requester)
            if problem:
                failures.append(f"  {requester} sessions_spawn: {problem}")
        await world.gw.wait_idle()
    finally:
        await world.gw.close()
    assert not failures, f"{len(failures)} of {total} rows failed:\n" + "\n".join(failures)


async def check_list(world: World, case: Case, requester: str) -> str | None:
    result = await world.gw.call_tool(REQUESTERS[requester], "sessions_list", {"limit": 200})
    refusals = [e for e in world.new_events() if type(e).__name__ == "AccessRefused"]
    if requester == "sub":
        want = refused("sessions_list", SUBAGENT_FORBIDDEN.format("sessions_list"))
        facts = [(e.check, e.rule, e.tool) for e in refusals]
        ok = result == want and facts == [(*SUBAGENT_RULE, "sessions_list")]
        return None if ok else f"expected {want} and one refusal, got {result}, {facts}"
    if refusals:
        return "sessions_list recorded a refusal"
    listed = {row["key"] for row in result["sessions"]}
    want_keys = expected_list(world, case, requester)
    if listed != want_keys or result["count"] != len(want_keys):
        return f"listed {sorted(listed)} (count {result['count']}), expected {sorted(want_keys)}"
    mode = case.scope(requester)
    shown_scope = result.get("visibility")
    if mode == "all" and shown_scope is not None:
        return f"an unrestricted list says {shown_scope}"
    if mode != "all" and (shown_scope or {}).get("mode") != mode:
        return f"expected visibility mode {mode}, got {shown_scope}"
    return None


async def check_spawn(world: World, case: Case, requester: str) -> str | None:
    result = await world.gw.call_tool(REQUESTERS[requester], "sessions_spawn", {"task": "t"})
    refusals = [e for e in world.new_events() if type(e).__name__ == "AccessRefused"]
    if requester == "sub":
        want = refused("sessions_spawn", "sessions_spawn is not allowed from sub-agent sessions")
        facts = [(e.check, e.rule, e.tool) for e in refusals]
        ok = result == want and facts == [(*SUBAGENT_RULE, "sessions_spawn")]
        return None if ok else f"expected {want} and one refusal, got {result}, {facts}"
    if case.spawn_denied_by is not None:
        want = refused("sessions_spawn", SEND_BLOCKED, status="error")
        facts = [(e.check, e.rule, e.tool) for e in refusals]
        if result != want or facts != [("send_policy", case.spawn_denied_by, "sessions_spawn")]:
            return f"expected {want} with one send_policy refusal, got {result}, {facts}"
        return None
    if result.get("status") != "accepted" or refusals:
        return f"expected accepted, got {result}"
    return None


# The matrix -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_security_matrix_on_memory(case: Case) -> None:
    await run_case(case, "memory")


# The cases whose answers read what the store keeps: visibility (spawned-by, the agent's
# sessions), a session's channel and chat type, an owner's stored override, a sub-agent's
# lineage. The agent-to-agent allow lists are read from the configuration alone: the
# memory store's full matrix answers them for every store.
REPRESENTATIVE = [
    case
    for case in CASES
    if case.name
    in {
        "sandbox-all-spawned",
        "sandbox-non-main-spawned",
        "send-deny-discord-groups",
        "send-owner-send-off",
        "spawn-deny-subagent-prefix",
        "scope-tree-default",
        "scope-self",
        "scope-agent+sandbox-all",
    }
]


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("case", REPRESENTATIVE, ids=[case.name for case in REPRESENTATIVE])
async def test_security_matrix_on_the_other_stores(case: Case, store_url: str) -> None:
    # The whole matrix runs on memory above; the stores answer a representative part.
    await run_case(case, store_url, requesters=case.requesters[:3])


# Deliveries a send policy suppresses (contract decision 10) ---------------------------------

REQ = "discord:group:req"
REQ_KEY = "agent:main:discord:group:req"
TARGET = "discord:group:target"
TARGET_KEY = "agent:main:discord:group:target"


@dataclass
class Rig:
    gw: Gateway
    runtime: AgentRuntime
    delivery: CapturingDelivery
    clock: VirtualClock

    def steps(self) -> list[tuple[str, str]]:
        return [(call.step, call.session_key) for call in self.runtime.calls]

    def events(self, name: str) -> list[Any]:
        return [e for _, e in store_of(self.gw).events() if type(e).__name__ == name]

    async def started(self, step: str) -> None:
        """Settle until the runtime has begun a ``step`` run (it then sleeps on the virtual
        clock): the clock's settle returns once no work is runnable."""
        await self.clock.settle()
        assert any(call.step == step for call in self.runtime.calls), f"no {step} run started"


async def open_rig(store_url: str, rules: list[dict[str, Any]], config: dict[str, Any]) -> Rig:
    runtime = ScriptedRuntime.from_dict({"rules": rules})
    delivery = CapturingDelivery()
    clock = VirtualClock(start=START)
    gw = await Gateway.open(
        # Group to group, written before visibility scopes (decision 28): `agent`.
        config=GatewayConfig.load(before_scopes(config, "agent")),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=delivery,
    )
    for key in (REQ, TARGET):
        await gw.record_message(
            key, role="user", content="hi", channel="discord", chat_type="group"
        )
    return Rig(gw, runtime, delivery, clock)


def turns(count: int) -> dict[str, Any]:
    return {"session": {"agentToAgent": {"maxPingPongTurns": count}}}


async def test_a_target_denied_before_its_announce_runs_gets_no_announce(store_url: str) -> None:
    rules = [
        {"step": "primary", "reply": "round one", "delaySeconds": 10},
        {"step": "announce", "reply": "announce now"},
    ]
    r = await open_rig(store_url, rules, turns(0))
    try:
        sent = await r.gw.call_tool(
            REQ, "sessions_send", {"sessionKey": TARGET, "message": "ping", "timeoutSeconds": 0}
        )
        assert sent["status"] == "accepted"
        await r.gw.patch_session(TARGET, sendPolicy="deny")
        await r.clock.advance(10)
        await r.gw.wait_idle()
        assert r.steps() == [("primary", TARGET_KEY)]
        assert r.delivery.sent == []
        [suppressed] = r.events("AnnounceSuppressed")
        assert (suppressed.stage, suppressed.session_key, suppressed.rule) == (
            "run",
            TARGET_KEY,
            OVERRIDE_DENY,
        )
        assert len(r.events("ExchangeClosed")) == 1
    finally:
        await r.gw.close()


async def test_a_target_denied_while_its_announce_runs_gets_no_delivery(store_url: str) -> None:
    rules = [
        {"step": "primary", "reply": "round one"},
        {"step": "announce", "reply": "announce now", "delaySeconds": 10},
    ]
    r = await open_rig(store_url, rules, turns(0))
    try:
        await r.gw.call_tool(
            REQ, "sessions_send", {"sessionKey": TARGET, "message": "ping", "timeoutSeconds": 0}
        )
        await r.started("announce")
        await r.gw.patch_session(TARGET, sendPolicy="deny")
        await r.clock.advance(10)
        await r.gw.wait_idle()
        assert r.steps() == [("primary", TARGET_KEY), ("announce", TARGET_KEY)]
        assert r.delivery.sent == []
        [suppressed] = r.events("AnnounceSuppressed")
        assert (suppressed.stage, suppressed.rule, suppressed.message) == (
            "delivery",
            OVERRIDE_DENY,
            "announce now",
        )
        assert len(r.events("ExchangeClosed")) == 1
    finally:
        await r.gw.close()


async def test_a_denied_requester_blocks_the_ping_pong_but_the_target_still_announces(
    store_url: str,
) -> None:
    rules = [
        {"step": "primary", "reply": "initial"},
        {"step": "announce", "reply": "announce now"},
        {"session": REQ_KEY, "reply": "pong"},
        {"reply": "pong-target"},
    ]
    r = await open_rig(store_url, rules, turns(2))
    try:
        await r.gw.record_message(REQ, role="user", content="/send off", sender_is_owner=True)
        sent = await r.gw.call_tool(
            REQ, "sessions_send", {"sessionKey": TARGET, "message": "ping", "timeoutSeconds": 0}
        )
        assert sent["status"] == "accepted"
        await r.gw.wait_idle()
        assert r.steps() == [("primary", TARGET_KEY), ("announce", TARGET_KEY)]
        [blocked] = r.events("TurnBlocked")
        assert (blocked.turn, blocked.speaker, blocked.session_key, blocked.rule) == (
            1,
            "requester",
            REQ_KEY,
            OVERRIDE_DENY,
        )
        assert [(d["channel"], d["message"]) for d in r.delivery.sent] == [
            ("discord", "announce now")
        ]
        assert r.events("AnnounceSuppressed") == []
    finally:
        await r.gw.close()


@pytest.mark.parametrize("denied", [True, False], ids=["requester-denied", "requester-allowed"])
async def test_a_sub_agent_report_to_a_denied_requester_is_kept_but_not_delivered(
    store_url: str, denied: bool
) -> None:
    rules = [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "Result: all done\nNotes: none"},
    ]
    r = await open_rig(store_url, rules, {})
    try:
        await r.gw.record_message("main", role="user", content="hi", channel="whatsapp", to="+1555")
        if denied:
            await r.gw.patch_session("main", sendPolicy="deny")
        spawned = await r.gw.call_tool("main", "sessions_spawn", {"task": "work"})
        assert spawned["status"] == "accepted"
        await r.gw.wait_idle()
        history = await r.gw.call_tool("main", "sessions_history", {"sessionKey": "main"})
        texts = [
            "".join(block.get("text", "") for block in message["content"])
            for message in history["messages"]
        ]
        assert any("all done" in text for text in texts)
        suppressed = r.events("SubagentAnnounceSuppressed")
        if denied:
            assert r.delivery.sent == []
            assert len(suppressed) == 1
        else:
            assert [(d["channel"], d["to"]) for d in r.delivery.sent] == [("whatsapp", "+1555")]
            assert "all done" in r.delivery.sent[0]["message"]
            assert suppressed == []
    finally:
        await r.gw.close()
