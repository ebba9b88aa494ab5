"""GatewayConfig: OpenClaw's config shape (contract §4)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig
from sessionwire.domain.keys import KeyRules


def load(data: dict[str, Any]) -> GatewayConfig:
    return GatewayConfig.load(data)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The library's log records go to stdlib logging (decision 21); a test fills this
    list from ``caplog`` once its records are in."""
    caplog.set_level(logging.DEBUG, logger="sessionwire")
    return []


# --- defaults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        pytest.param(lambda c: c.session.mainKey, "main", id="session.mainKey"),
        pytest.param(lambda c: c.session.scope, "per-sender", id="session.scope"),
        pytest.param(lambda c: c.session.dmScope, None, id="session.dmScope"),
        pytest.param(lambda c: c.session.sendPolicy, None, id="session.sendPolicy"),
        pytest.param(
            lambda c: c.session.agentToAgent.max_ping_pong_turns, 5, id="maxPingPongTurns"
        ),
        pytest.param(lambda c: c.tools.agentToAgent.enabled, False, id="a2a.enabled"),
        pytest.param(lambda c: c.tools.agentToAgent.allow, [], id="a2a.allow"),
        pytest.param(lambda c: c.tools.subagents.tools.allow, None, id="subagents.tools.allow"),
        pytest.param(lambda c: c.tools.subagents.tools.deny, [], id="subagents.tools.deny"),
        pytest.param(lambda c: c.agents.list, [], id="agents.list"),
        pytest.param(lambda c: c.agents.defaults.maxConcurrent, 4, id="defaults.maxConcurrent"),
        pytest.param(lambda c: c.agents.defaults.timeoutSeconds, 600, id="defaults.timeout"),
        pytest.param(
            lambda c: c.agents.defaults.subagents.archiveAfterMinutes, 60, id="archiveAfterMinutes"
        ),
        pytest.param(
            lambda c: c.agents.defaults.subagents.maxConcurrent, 8, id="subagents.maxConcurrent"
        ),
        pytest.param(
            lambda c: c.agents.defaults.subagents.maxSpawnDepth, 1, id="subagents.maxSpawnDepth"
        ),
        pytest.param(
            lambda c: c.agents.defaults.subagents.maxChildrenPerAgent,
            5,
            id="subagents.maxChildrenPerAgent",
        ),
        pytest.param(lambda c: c.agents.defaults.sandbox.mode, None, id="sandbox.mode"),
        pytest.param(
            lambda c: c.agents.defaults.sandbox.sessionToolsVisibility,
            None,
            id="sandbox.visibility",
        ),
        pytest.param(lambda c: c.default_agent_id, "main", id="default_agent_id"),
        pytest.param(lambda c: c.key_rules, KeyRules(), id="key_rules"),
        pytest.param(lambda c: c.unknown_keys(), [], id="no-unknown-keys"),
    ],
)
@pytest.mark.parametrize(
    "source",
    [pytest.param(None, id="none"), pytest.param({}, id="empty-dict")],
)
def test_defaults(source: dict[str, Any] | None, read: Any, expected: Any) -> None:
    assert read(GatewayConfig.load(source)) == expected


def sections_of(config: BaseModel, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every section of ``config`` by its path, with what pydantic keeps beside its
    fields (which were set, the extra keys), and every plain value."""
    yield path, (type(config), config.model_fields_set, config.model_extra)
    for name in type(config).model_fields:
        value = getattr(config, name)
        if isinstance(value, BaseModel):
            yield from sections_of(value, f"{path}.{name}")
        else:
            yield f"{path}.{name}", (type(value), value)


def test_the_defaults_are_built_as_validation_builds_them() -> None:
    # No config: the defaults are built without validation (issue 23), and must be
    # what validating nothing gives, section by section.
    unvalidated = GatewayConfig.load(None)
    assert dict(sections_of(unvalidated)) == dict(sections_of(GatewayConfig.load({})))
    assert unvalidated.model_dump() == GatewayConfig().model_dump()


# --- JSON5 files ------------------------------------------------------------------------

JSON5_TEXT = """
// OpenClaw config, JSON5
{
  session: {
    mainKey: 'Home',          /* unquoted keys, single quotes */
    scope: "per-sender",
    agentToAgent: { maxPingPongTurns: 2, },
  },
  tools: {
    agentToAgent: { enabled: true, allow: ["main", "res*",], },
  },
  agents: {
    list: [
      { id: "main", name: "Main" },
      { id: "research", default: true, subagents: { allowAgents: ["*"] } },
    ],
  },
}
"""


@pytest.mark.parametrize("as_path", [pytest.param(True, id="Path"), pytest.param(False, id="str")])
def test_json5_file(tmp_path: Path, as_path: bool) -> None:
    file = tmp_path / "openclaw.json5"
    file.write_text(JSON5_TEXT, encoding="utf-8")
    config = GatewayConfig.load(file if as_path else str(file))
    got = (
        config.session.mainKey,
        config.key_rules,
        config.session.agentToAgent.max_ping_pong_turns,
        config.tools.agentToAgent.enabled,
        config.tools.agentToAgent.allow,
        [(a.id, a.name, a.default) for a in config.agents.list],
        config.agents.list[1].subagents.allowAgents,
        config.default_agent_id,
        config.unknown_keys(),
    )
    assert got == (
        "Home",
        KeyRules(main_key="home", scope="per-sender", default_agent_id="research"),
        2,
        True,
        ["main", "res*"],
        [("main", "Main", False), ("research", None, True)],
        ["*"],
        "research",
        [],
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{ session: ", "is not valid JSON5", id="broken"),
        pytest.param("[1, 2]", "must hold an object at the top level", id="array"),
        pytest.param("42", "must hold an object at the top level", id="number"),
        pytest.param(
            "{ session: { scope: 'everyone' } }", "session.scope", id="valid-json5-bad-value"
        ),
    ],
)
def test_json5_file_errors(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "bad.json5"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        GatewayConfig.load(file)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json5"
    with pytest.raises(ConfigError) as raised:
        GatewayConfig.load(missing)
    assert str(raised.value).startswith(f"cannot read config file {missing}: ")


# --- unknown keys -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"gateway": {"port": 1}}, ["gateway"], id="top-level"),
        pytest.param({"session": {"bogus": 1}}, ["session.bogus"], id="session.bogus"),
        pytest.param(
            {"agents": {"list": [{"id": "a", "extra": True}]}},
            ["agents.list[0].extra"],
            id="agents.list[0].extra",
        ),
        pytest.param(
            {"agents": {"list": [{"id": "a"}, {"id": "b", "x": 1, "y": 2}]}},
            ["agents.list[1].x", "agents.list[1].y"],
            id="second-agent-two-keys",
        ),
        pytest.param(
            {"tools": {"agentToAgent": {"enabled": True, "allowedGroups": ["x"]}}},
            ["tools.agentToAgent.allowedGroups"],
            id="unknown-in-tools",
        ),
        pytest.param(
            {"session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"peer": "x"}}]}}},
            ["session.sendPolicy.rules[0].match.peer"],
            id="send-policy-match",
        ),
        pytest.param(
            {"agents": {"defaults": {"subagents": {"foo": 1}, "sandbox": {"bar": 2}}}},
            ["agents.defaults.subagents.foo", "agents.defaults.sandbox.bar"],
            id="agent-defaults",
        ),
        pytest.param(
            {"agents": {"list": [{"id": "a", "sandbox": {"mode": "all", "z": 0}}]}},
            ["agents.list[0].sandbox.z"],
            id="per-agent-sandbox",
        ),
        pytest.param(
            {"session": {"mainKey": "main"}, "tools": {}, "agents": {"list": []}},
            [],
            id="only-known-keys",
        ),
    ],
)
def test_unknown_keys(data: dict[str, Any], expected: list[str]) -> None:
    assert load(data).unknown_keys() == expected


def test_unknown_keys_are_warned_with_their_path(
    logs: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    GatewayConfig.load({"session": {"bogus": 1}, "agents": {"list": [{"id": "a", "q": 1}]}})
    logs.extend(
        {"event": r.getMessage(), "log_level": r.levelname.lower(), "key": getattr(r, "key", None)}
        for r in caplog.records
    )
    warnings = [(e["event"], e["key"]) for e in logs if e["log_level"] == "warning"]
    assert warnings == [
        ("config key ignored", "session.bogus"),
        ("config key ignored", "agents.list[0].q"),
    ]


@pytest.mark.parametrize(
    ("data", "where", "known"),
    [
        pytest.param(
            {"deliveries": {"firstRetrySecond": 5}},
            "deliveries",
            "firstRetrySeconds, maxRetrySeconds, abandonAfterSeconds",
            id="deliveries",
        ),
        pytest.param(
            {"redaction": {"pattern": ["x"]}},
            "redaction",
            "crossSession, defaults, patterns",
            id="redaction",
        ),
        pytest.param(
            {"session": {"agentToAgent": {"budget": {"maxRun": 3}}}},
            "session.agentToAgent.budget",
            "maxRuns, maxSpawns, maxSteers, maxTokens, maxCost, onExceeded",
            id="budget",
        ),
        pytest.param(
            {"agents": {"list": [{"id": "a", "a2a": {"cards": []}}]}},
            "agents.list[0].a2a",
            "description, skills",
            id="a2a",
        ),
        pytest.param(
            {
                "agents": {
                    "list": [{"id": "a", "a2a": {"skills": [{"id": "s", "name": "S", "x": 1}]}}]
                }
            },
            "agents.list[0].a2a.skills[0]",
            "id, name, description, tags, examples",
            id="a2a-skill",
        ),
    ],
)
def test_an_unknown_key_in_a_section_of_our_own_is_refused_naming_the_known_ones(
    data: dict[str, Any], where: str, known: str
) -> None:
    # These sections are not OpenClaw's: no other tool's key can be in them, so an
    # unknown one is a typo whose setting would silently stay at its default.
    with pytest.raises(ConfigError) as raised:
        GatewayConfig.load(data)
    assert where in str(raised.value)
    assert f"known: {known}" in str(raised.value)


# --- wrong types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key"),
    [
        pytest.param({"session": {"mainKey": 5}}, "session.mainKey", id="mainKey-int"),
        pytest.param({"session": {"scope": "everyone"}}, "session.scope", id="scope-bad-value"),
        pytest.param({"session": "main"}, "session", id="session-not-object"),
        pytest.param(
            {"session": {"agentToAgent": {"maxPingPongTurns": "3"}}},
            "session.agentToAgent.maxPingPongTurns",
            id="maxPingPongTurns-string",
        ),
        pytest.param(
            {"session": {"agentToAgent": {"maxPingPongTurns": True}}},
            "session.agentToAgent.maxPingPongTurns",
            id="maxPingPongTurns-bool",
        ),
        pytest.param(
            {"session": {"sendPolicy": {"default": "block"}}},
            "session.sendPolicy.default",
            id="sendPolicy-default",
        ),
        pytest.param(
            {"session": {"sendPolicy": {"rules": [{"action": "drop"}]}}},
            "session.sendPolicy.rules[0].action",
            id="sendPolicy-rule-action",
        ),
        pytest.param(
            {"tools": {"agentToAgent": {"enabled": "yes"}}},
            "tools.agentToAgent.enabled",
            id="a2a-enabled-string",
        ),
        pytest.param(
            {"tools": {"agentToAgent": {"enabled": 1}}},
            "tools.agentToAgent.enabled",
            id="a2a-enabled-int",
        ),
        pytest.param(
            {"tools": {"agentToAgent": {"allow": "main"}}},
            "tools.agentToAgent.allow",
            id="a2a-allow-string",
        ),
        pytest.param({"agents": {"list": {"id": "a"}}}, "agents.list", id="agents-list-object"),
        pytest.param({"agents": {"list": [{"name": "A"}]}}, "agents.list[0].id", id="agent-no-id"),
        pytest.param(
            {"agents": {"list": [{"id": "a"}, {"id": "  "}]}},
            "agents.list[1].id",
            id="agent-blank-id",
        ),
        pytest.param(
            {"agents": {"list": [{"id": "a", "default": "true"}]}},
            "agents.list[0].default",
            id="agent-default-string",
        ),
        pytest.param(
            {"agents": {"list": [{"id": "a", "subagents": {"allowAgents": "*"}}]}},
            "agents.list[0].subagents.allowAgents",
            id="allowAgents-string",
        ),
        pytest.param(
            {"agents": {"defaults": {"sandbox": {"mode": "sometimes"}}}},
            "agents.defaults.sandbox.mode",
            id="sandbox-mode",
        ),
        pytest.param(
            {"agents": {"defaults": {"sandbox": {"sessionToolsVisibility": "none"}}}},
            "agents.defaults.sandbox.sessionToolsVisibility",
            id="sandbox-visibility",
        ),
        pytest.param(
            {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": "60"}}}},
            "agents.defaults.subagents.archiveAfterMinutes",
            id="archiveAfterMinutes-string",
        ),
        pytest.param(
            {"agents": {"defaults": {"maxConcurrent": 0}}},
            "agents.defaults.maxConcurrent",
            id="maxConcurrent-zero",
        ),
        pytest.param(
            {"tools": {"subagents": {"tools": {"deny": "exec"}}}},
            "tools.subagents.tools.deny",
            id="subagent-tools-deny-string",
        ),
    ],
)
def test_wrong_types_name_the_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(data)
    message = str(raised.value)
    assert message.startswith("invalid config: ")
    assert f"{key}: " in message


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("maxSpawnDepth", 0, "greater than or equal to 1"),
        ("maxSpawnDepth", 6, "less than or equal to 5"),
        ("maxSpawnDepth", -1, "greater than or equal to 1"),
        ("maxSpawnDepth", 2.5, "valid integer"),
        ("maxSpawnDepth", "2", "valid integer"),
        ("maxSpawnDepth", True, "valid integer"),
        ("maxChildrenPerAgent", 0, "greater than or equal to 1"),
        ("maxChildrenPerAgent", 21, "less than or equal to 20"),
        ("maxChildrenPerAgent", None, "valid integer"),
    ],
)
def test_nesting_limits_out_of_range_are_errors_naming_the_key(
    name: str, value: Any, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load({"agents": {"defaults": {"subagents": {name: value}}}})
    assert f"agents.defaults.subagents.{name}: " in str(raised.value)
    assert problem in str(raised.value)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_max_spawn_depth_takes_1_to_5(depth: int) -> None:
    config = load({"agents": {"defaults": {"subagents": {"maxSpawnDepth": depth}}}})
    assert config.agents.defaults.subagents.maxSpawnDepth == depth


def test_every_bad_key_is_named() -> None:
    with pytest.raises(ConfigError) as raised:
        load({"session": {"mainKey": 5, "scope": "x"}})
    message = str(raised.value)
    assert "session.mainKey: " in message
    assert "session.scope: " in message


@pytest.mark.parametrize("source", [pytest.param(["a"], id="list"), pytest.param(3, id="int")])
def test_non_object_source_is_an_error(source: Any) -> None:
    with pytest.raises(ConfigError, match=r"^invalid config: \(top level\): "):
        GatewayConfig.load(source)


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# --- send policy: legacy `provider` / `surface` ----------------------------------------


@pytest.mark.parametrize(
    ("match", "expected_channel", "expected_unknown"),
    [
        pytest.param({"channel": "discord"}, "discord", [], id="channel"),
        pytest.param({"provider": "discord"}, "discord", [], id="legacy-provider"),
        pytest.param({"surface": "slack"}, "slack", [], id="legacy-surface"),
        pytest.param(
            {"provider": "discord", "surface": "slack"},
            "discord",
            ["session.sendPolicy.rules[0].match.surface"],
            id="provider-before-surface",
        ),
        pytest.param(
            {"channel": "telegram", "provider": "discord"},
            "telegram",
            ["session.sendPolicy.rules[0].match.provider"],
            id="channel-wins-over-provider",
        ),
        pytest.param({}, None, [], id="none"),
    ],
)
def test_send_policy_match_channel(
    match: dict[str, Any], expected_channel: str | None, expected_unknown: list[str]
) -> None:
    config = load({"session": {"sendPolicy": {"rules": [{"action": "deny", "match": match}]}}})
    assert config.session.sendPolicy is not None
    rule = config.session.sendPolicy.rules[0]
    assert (rule.action, rule.match.channel, config.unknown_keys()) == (
        "deny",
        expected_channel,
        expected_unknown,
    )


def test_send_policy_full_shape() -> None:
    config = load(
        {
            "session": {
                "sendPolicy": {
                    "default": "deny",
                    "rules": [
                        {"action": "allow", "match": {"chatType": "group", "keyPrefix": "cron:"}},
                        {"match": {"channel": "discord"}},
                    ],
                }
            }
        }
    )
    policy = config.session.sendPolicy
    assert policy is not None
    got = [(r.action, r.match.channel, r.match.chatType, r.match.keyPrefix) for r in policy.rules]
    assert (policy.default, got) == (
        "deny",
        [("allow", None, "group", "cron:"), ("allow", "discord", None, None)],
    )


# --- default agent ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agents", "expected"),
    [
        pytest.param([], "main", id="no-agents-main"),
        pytest.param([{"id": "alpha"}, {"id": "beta"}], "alpha", id="first-listed"),
        pytest.param(
            [{"id": "alpha"}, {"id": "beta", "default": True}], "beta", id="flagged-default"
        ),
        pytest.param(
            [{"id": "a", "default": True}, {"id": "b", "default": True}],
            "a",
            id="first-flagged-wins",
        ),
        pytest.param(
            [{"id": "alpha", "default": False}, {"id": "beta"}], "alpha", id="false-flag-ignored"
        ),
        pytest.param([{"id": " Research Bot "}], "research-bot", id="normalised"),
    ],
)
def test_default_agent_id(agents: list[dict[str, Any]], expected: str) -> None:
    config = load({"agents": {"list": agents}})
    assert (config.default_agent_id, config.key_rules.default_agent_id) == (expected, expected)


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        pytest.param({}, KeyRules(), id="defaults"),
        pytest.param({"mainKey": " Work "}, KeyRules(main_key="work"), id="mainKey-normalised"),
        pytest.param({"mainKey": ""}, KeyRules(main_key="main"), id="mainKey-empty-is-main"),
        pytest.param({"scope": "global"}, KeyRules(scope="global"), id="global-scope"),
    ],
)
def test_key_rules(session: dict[str, Any], expected: KeyRules) -> None:
    assert load({"session": session}).key_rules == expected


@pytest.mark.parametrize(
    ("agent_id", "expected_name"),
    [
        pytest.param("research", "Research", id="found"),
        pytest.param("main", None, id="missing"),
    ],
)
def test_agent_lookup(agent_id: str, expected_name: str | None) -> None:
    config = load({"agents": {"list": [{"id": "Research", "name": "Research"}]}})
    entry = config.agent(agent_id)
    assert (entry.name if entry else None) == expected_name


# --- maxPingPongTurns clamp -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(7, 5, id="7-clamped-to-5"),
        pytest.param(5, 5, id="5"),
        pytest.param(2.9, 2, id="2.9-floored-to-2"),
        pytest.param(1, 1, id="1"),
        pytest.param(0, 0, id="0"),
        pytest.param(0.5, 0, id="0.5-floored-to-0"),
        pytest.param(-1, 0, id="-1-clamped-to-0"),
        pytest.param(-0.5, 0, id="-0.5-clamped-to-0"),
        pytest.param(float("inf"), 5, id="infinity-is-default"),
        pytest.param(float("nan"), 5, id="nan-is-default"),
        pytest.param(None, 5, id="null-is-default"),
    ],
)
def test_max_ping_pong_turns(value: float | None, expected: int) -> None:
    config = load({"session": {"agentToAgent": {"maxPingPongTurns": value}}})
    assert config.session.agentToAgent.max_ping_pong_turns == expected


def test_max_ping_pong_turns_unset_is_5() -> None:
    assert load({"session": {"agentToAgent": {}}}).session.agentToAgent.max_ping_pong_turns == 5


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("3", id="numeric-string"),
        pytest.param("many", id="word"),
        pytest.param(True, id="bool"),
        pytest.param([3], id="list"),
    ],
)
def test_max_ping_pong_turns_not_a_number(value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        load({"session": {"agentToAgent": {"maxPingPongTurns": value}}})
    assert "session.agentToAgent.maxPingPongTurns: " in str(raised.value)


# --- failing closed (issue 16, finding 8) ------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"agents": {"defaults": {"sandBox": {"mode": "all"}}}},
            "agents.defaults: Value error, unknown key 'sandBox': did you mean 'sandbox'?",
            id="case",
        ),
        pytest.param(
            {"session": {"sendpolicy": {"default": "deny"}}},
            "session: Value error, unknown key 'sendpolicy': did you mean 'sendPolicy'?",
            id="case-inside",
        ),
        pytest.param(
            {"tools": {"agentToAgent": {"enabled": True, "alow": ["x"]}}},
            "unknown key 'alow': did you mean 'allow'?",
            id="one-edit",
        ),
        pytest.param(
            {"agents": {"list": [{"id": "a", "sandbx": {"mode": "all"}}]}},
            "unknown key 'sandbx': did you mean 'sandbox'?",
            id="dropped-letter",
        ),
    ],
)
def test_a_near_miss_of_a_known_key_is_an_error_naming_it(
    data: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(data)
    assert expected in str(refused.value)


def test_agent_ids_that_differ_only_in_case_are_an_error() -> None:
    with pytest.raises(ConfigError) as refused:
        load({"agents": {"list": [{"id": "ops", "sandbox": {"mode": "all"}}, {"id": "OPS"}]}})
    assert "list[1].id 'OPS' is the same agent as list[0].id 'ops'" in str(refused.value)


async def test_gateway_open_refuses_an_invalid_config() -> None:
    from sessionwire import Gateway

    with pytest.raises(ConfigError):
        await Gateway.open(config={"agents": {"defaults": {"sandBox": {"mode": "all"}}}})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b'{"session": {"mainKey": "\xff"}}', "is not UTF-8", id="invalid-utf8"),
        pytest.param(b"{a:" * 5000 + b"1" + b"}" * 5000, "nests deeper than 32", id="deep"),
        pytest.param(b"{" + b" " * (300 * 1024) + b"}", "larger than 256 KiB", id="size"),
    ],
)
def test_a_config_file_is_read_bounded_never_with_a_traceback(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "config.json5"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.load(path)
    assert problem in str(refused.value)
