"""A random world, a random caller, random tool calls: nothing hidden ever shows.

Hypothesis draws a config (agent-to-agent rule, sandbox per agent, visibility scope per
agent (decision 28), send policy), sessions
across three agents (some labelled, some spawned by others, each holding a secret text)
and a requester, then calls the session tools with random naming forms. A small model of
the rules, written here independently of domain/policy.py, says which sessions the
requester may see (openclaw-behaviour.md §2.7 and §9, contract decision 28); the
properties are:

* no result mentions a hidden session's key, sessionId, label or secret text (except the
  very name the caller gave, which a refusal quotes back);
* ``sessions_list`` counts exactly the visible sessions (up to its limit);
* a send into a hidden session is never accepted, and a refused or denied send starts no
  run and delivers nothing.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
AGENTS = ("main", "other", "third")
# rest of the key → (channel, chat type) the first message arrives with
RESTS = {
    "main": (None, None),
    "discord:group:g1": ("discord", "group"),
    "cron:c1": (None, None),
    "slack:channel:c2": ("slack", "channel"),
}
PATTERNS = ("*", "main", "other", "third", "ma*", "O*", "th*ird", "nobody")
SEND_RULES = (
    {"action": "deny", "match": {"channel": "discord", "chatType": "group"}},
    {"action": "deny", "match": {"keyPrefix": "cron:"}},
    {"action": "deny", "match": {"keyPrefix": "subagent:"}},
    {"action": "allow", "match": {"channel": "slack"}},
    {"action": "deny", "match": {"chatType": "channel"}},
)
SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "primary", "reply": "ok"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"reply": "REPLY_SKIP"},
    ]
}
KEY_FORMS = ("key", "upper", "spaced", "bare", "sessionId")


@dataclass
class Stored:
    key: str
    agent: str
    rest: str
    secret: str
    spawned_by: str | None = None
    label: str | None = None
    session_id: str = ""

    @property
    def is_subagent(self) -> bool:
        return self.rest.startswith("subagent:")


# The model of who sees what ----------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    a2a_enabled: bool
    allow: tuple[str, ...]
    sandbox: dict[str, tuple[str, str]]
    """agent → (mode, visibility), defaults already applied."""
    scopes: dict[str, str]
    """agent → ``tools.sessions.visibility``, defaults already applied."""

    def scope(self, requester: str) -> str:
        mode = self.scopes[requester.split(":")[1]]
        if self.restricted(requester) and mode in {"agent", "all"}:
            return "tree"  # the sandbox clamps
        return mode

    def in_scope(self, requester: str, target: Stored) -> bool:
        mode = self.scope(requester)
        if mode == "all" or target.key == requester:
            return True
        if mode == "tree" and target.spawned_by == requester:
            return True
        if target.agent != requester.split(":")[1]:
            return False
        is_main = requester.split(":", 2)[2] == "main"
        return mode == "agent" or (mode == "tree" and is_main)

    def agents_may_meet(self, mine: str, theirs: str) -> bool:
        if mine == theirs:
            return True
        if not self.a2a_enabled:
            return False
        if not self.allow:
            return True
        patterns = [p.lower() for p in self.allow]
        return all(any(fnmatch.fnmatchcase(a, p) for p in patterns) for a in (mine, theirs))

    def restricted(self, key: str) -> bool:
        agent, rest = key.split(":", 2)[1:]
        if rest.startswith("subagent:"):
            return False
        mode, visibility = self.sandbox[agent]
        if mode == "off" or (mode == "non-main" and rest == "main"):
            return False
        return visibility == "spawned"

    def sees(self, requester: str, target: Stored) -> bool:
        if self.restricted(requester) and target.spawned_by != requester:
            return False
        if not self.in_scope(requester, target):
            return False
        return self.agents_may_meet(requester.split(":")[1], target.agent)


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], Model]:
    enabled = draw(st.booleans())
    allow = draw(st.lists(st.sampled_from(PATTERNS), max_size=2))
    modes = st.sampled_from(["off", "non-main", "all"])
    visibilities = st.sampled_from(["spawned", "all"])
    default = (draw(modes), draw(visibilities))
    scopes_drawn = st.sampled_from(["self", "tree", "agent", "all"])
    default_scope = draw(st.one_of(st.none(), scopes_drawn))
    entries: list[dict[str, Any]] = []
    sandbox: dict[str, tuple[str, str]] = {}
    scopes: dict[str, str] = {}
    for agent in AGENTS:
        entry: dict[str, Any] = {"id": agent}
        sandbox[agent] = default
        scopes[agent] = default_scope or "tree"
        if draw(st.booleans()):
            mode, visibility = draw(modes), draw(visibilities)
            entry["sandbox"] = {"mode": mode, "sessionToolsVisibility": visibility}
            sandbox[agent] = (mode, visibility)
        if draw(st.booleans()):
            scopes[agent] = draw(scopes_drawn)
            entry["tools"] = {"sessions": {"visibility": scopes[agent]}}
        entries.append(entry)
    tools: dict[str, Any] = {"agentToAgent": {"enabled": enabled, "allow": allow}}
    if default_scope is not None:
        tools["sessions"] = {"visibility": default_scope}
    config: dict[str, Any] = {
        "tools": tools,
        "agents": {
            "defaults": {"sandbox": {"mode": default[0], "sessionToolsVisibility": default[1]}},
            "list": entries,
        },
        "session": {"agentToAgent": {"maxPingPongTurns": 0}},
    }
    if draw(st.booleans()):
        rules = draw(st.lists(st.sampled_from(SEND_RULES), max_size=3))
        config["session"]["sendPolicy"] = {
            "rules": rules,
            "default": draw(st.sampled_from(["allow", "deny"])),
        }
    return config, Model(enabled, tuple(allow), sandbox, scopes)


# One example ---------------------------------------------------------------------------------


async def build(data: st.DataObject, config: dict[str, Any]) -> tuple[Any, list[Stored]]:
    runtime = ScriptedRuntime.from_dict(SCRIPT)
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load(config),
        store="memory",
        clock=VirtualClock(start=START),
        runtime=runtime,
        delivery=delivery,
    )
    pairs = [(agent, rest) for agent in AGENTS for rest in RESTS]
    chosen = data.draw(
        st.lists(st.sampled_from(pairs), min_size=2, max_size=7, unique=True), label="sessions"
    )
    sessions: list[Stored] = []
    for number, (agent, rest) in enumerate(chosen):
        key = f"agent:{agent}:{rest}"
        secret = f"SECRET-{number:02d};"
        channel, chat_type = RESTS[rest]
        await gw.record_message(
            key, role="user", content=secret, channel=channel, chat_type=chat_type
        )
        stored = Stored(key, agent, rest, secret)
        if data.draw(st.booleans(), label=f"label {key}"):
            stored.label = f"lbl{number:02d}x"
            await gw.patch_session(key, label=stored.label)
        sessions.append(stored)
    parents = data.draw(st.lists(st.sampled_from(sessions), max_size=3), label="spawning parents")
    for number, parent in enumerate(parents, start=len(chosen)):
        secret = f"SECRET-{number:02d};"
        label = f"lbl{number:02d}x" if data.draw(st.booleans(), label="child label") else None
        params: dict[str, Any] = {"task": secret}
        if label:
            params["label"] = label
        spawned = await gw.call_tool(parent.key, "sessions_spawn", params)
        if spawned.get("status") == "accepted":
            child = spawned["childSessionKey"]
            sessions.append(
                Stored(child, parent.agent, child.split(":", 2)[2], secret, parent.key, label)
            )
    await gw.wait_idle()
    for stored in sessions:
        found = store_of(gw).session(stored.key)
        assert found is not None
        stored.session_id = found.state.session_id
    return (gw, delivery), sessions


def name_for(form: str, target: Stored, requester_agent: str) -> str | None:
    if form == "key":
        return target.key
    if form == "upper":
        return target.key.upper()
    if form == "spaced":
        return f" {target.key}\t"
    if form == "bare":
        return target.rest if target.agent == requester_agent else None
    return target.session_id


def hidden_strings(stored: Stored) -> list[str]:
    return [s for s in (stored.key, stored.session_id, stored.label, stored.secret) if s]


async def scenario(data: st.DataObject) -> None:
    config, model = data.draw(configs(), label="config")
    (gw, delivery), sessions = await build(data, config)
    try:
        ghosts = ["agent:third:discord:group:nobody", "agent:other:main"]
        requester = data.draw(
            st.sampled_from([s.key for s in sessions] + ghosts), label="requester"
        )
        requester_agent = requester.split(":")[1]
        is_sub = requester.split(":", 2)[2].startswith("subagent:")
        visible = [s for s in sessions if model.sees(requester, s)]
        hidden = [s for s in sessions if not model.sees(requester, s)]
        send_policy_set = "sendPolicy" in config["session"]
        calls = data.draw(st.integers(min_value=1, max_value=6), label="calls")
        for _ in range(calls):
            await gw.wait_idle()
            position = max((p for p, _ in store_of(gw).events()), default=0)
            delivered = len(delivery.sent)
            tool = data.draw(
                st.sampled_from(["sessions_list", "sessions_history", "sessions_send"]),
                label="tool",
            )
            target: Stored | None = None
            echoed: str | None = None
            if tool == "sessions_list":
                limit = data.draw(st.integers(min_value=1, max_value=12), label="limit")
                message_limit = data.draw(st.integers(min_value=0, max_value=2))
                params: dict[str, Any] = {"limit": limit, "messageLimit": message_limit}
            else:
                target = data.draw(st.sampled_from(sessions), label="target")
                forms = list(KEY_FORMS)
                if tool == "sessions_send" and target.label:
                    forms += ["label", "label+agent"]
                form = data.draw(st.sampled_from(forms), label="form")
                if form.startswith("label"):
                    assert target.label is not None
                    params = {"label": target.label}
                    if form == "label+agent":
                        params["agentId"] = target.agent
                    echoed = target.label
                else:
                    name = name_for(form, target, requester_agent)
                    if name is None:
                        continue
                    params = {"sessionKey": name}
                    echoed = target.session_id if form == "sessionId" else target.key
                if tool == "sessions_send":
                    params |= {"message": "hello", "timeoutSeconds": 0}
            result = await gw.call_tool(requester, tool, params)
            await gw.wait_idle()
            shown = json.dumps(result)
            where = f"{requester} {tool} {params} -> {shown[:300]}"
            for stored in hidden:
                for secret in hidden_strings(stored):
                    if secret in (echoed, requester):
                        continue
                    assert secret not in shown, f"hidden {secret!r} leaked: {where}"
            if is_sub:
                assert result["status"] == "forbidden", where
                continue
            if tool == "sessions_list":
                assert result["count"] == min(len(visible), params["limit"]), where
            if tool == "sessions_send":
                assert target is not None
                if target in hidden:
                    assert result["status"] != "accepted", where
                elif not send_policy_set:
                    assert result["status"] == "accepted", where
                if result["status"] != "accepted":
                    names = [type(e).__name__ for _, e in store_of(gw).events(start=position + 1)]
                    assert "RunStarted" not in names, where
                    assert len(delivery.sent) == delivered, where
    finally:
        await gw.close()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_no_tool_result_reveals_a_session_the_requester_may_not_see(data: st.DataObject) -> None:
    asyncio.run(scenario(data))
