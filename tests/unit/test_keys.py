"""Session keys: openclaw-behaviour.md §2 with contract decision 5.1 (canonical keys).

Every table row is one example: an input and the exact value it must give.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessionwire.domain.keys import (
    MAX_KEY_LENGTH,
    InvalidSessionKey,
    KeyRules,
    ParsedAgentKey,
    agent_id_of,
    derive_channel,
    is_subagent_key,
    looks_like_session_id,
    looks_like_session_key,
    normalize_agent_id,
    normalize_main_key,
    parse_agent_session_key,
)
from sessionwire.domain.policy import AgentToAgentPolicy

DEFAULT = KeyRules()
MAIN_KEY_WORK = KeyRules(main_key="work")
GLOBAL = KeyRules(scope="global")


# --- normalize_agent_id (§2.1) -------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("main", "main", id="plain"),
        pytest.param("  work  ", "work", id="trimmed"),
        pytest.param("", "main", id="empty-is-main"),
        pytest.param("   ", "main", id="blank-is-main"),
        pytest.param(None, "main", id="none-is-main"),
        pytest.param("Research", "research", id="valid-lower-cased"),
        pytest.param("a_b-9", "a_b-9", id="underscore-and-dash-kept"),
        pytest.param("My Agent!", "my-agent", id="invalid-run-collapsed-and-stripped"),
        pytest.param("a  b//c", "a-b-c", id="each-invalid-run-becomes-one-dash"),
        pytest.param("--x--", "x", id="leading-and-trailing-dashes-stripped"),
        pytest.param("Héllo Wörld", "h-llo-w-rld", id="non-ascii-replaced"),
        pytest.param("!!!", "main", id="nothing-left-is-main"),
        pytest.param("a" * 64, "a" * 64, id="64-chars-valid"),
        pytest.param("a" * 70, "a" * 64, id="too-long-cut-to-64"),
        pytest.param("x." + "b" * 70, "x-" + "b" * 62, id="invalid-then-cut-to-64"),
    ],
)
def test_normalize_agent_id(raw: str | None, expected: str) -> None:
    assert normalize_agent_id(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("main", "main", id="plain"),
        pytest.param(" Work ", "work", id="trimmed-and-lower-cased"),
        pytest.param("", "main", id="empty-is-main"),
        pytest.param("  ", "main", id="blank-is-main"),
        pytest.param(None, "main", id="none-is-main"),
    ],
)
def test_normalize_main_key(raw: str | None, expected: str) -> None:
    assert normalize_main_key(raw) == expected


# --- parse_agent_session_key (§2.1) ----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("agent:main:main", ParsedAgentKey("main", "main"), id="main"),
        pytest.param(
            "agent:work:discord:group:dev",
            ParsedAgentKey("work", "discord:group:dev"),
            id="rest-keeps-its-colons",
        ),
        pytest.param(" agent:Work:x ", ParsedAgentKey("Work", "x"), id="trimmed-id-not-normalised"),
        pytest.param("agent:a::b", ParsedAgentKey("a", "b"), id="empty-parts-dropped-in-rest"),
        pytest.param("agent::x", None, id="empty-agent-id-drops-to-two-parts"),
        pytest.param("agent:x", None, id="two-parts"),
        pytest.param("agent:x:", None, id="trailing-colon-is-two-parts"),
        pytest.param("agent", None, id="one-part"),
        pytest.param("cron:job-1:x", None, id="not-agent-prefixed"),
        pytest.param("main", None, id="bare-main"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="none"),
    ],
)
def test_parse_agent_session_key(key: str | None, expected: ParsedAgentKey | None) -> None:
    assert parse_agent_session_key(key) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("agent:Work:main", "work", id="normalised-id"),
        pytest.param("agent:main:cron:x", "main", id="main-agent"),
        pytest.param("cron:job-1", "main", id="bare-key-is-main-constant"),
        pytest.param("main", "main", id="bare-main"),
        pytest.param("agent::x", "main", id="unparseable-is-main"),
    ],
)
def test_agent_id_of(key: str, expected: str) -> None:
    assert agent_id_of(key) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("subagent:abc", True, id="bare-subagent"),
        pytest.param("agent:main:subagent:abc", True, id="agent-prefixed-subagent"),
        pytest.param("AGENT:Main:SubAgent:abc", True, id="case-insensitive"),
        pytest.param(" agent:work:subagent:1 ", True, id="trimmed"),
        pytest.param("agent:main:main", False, id="main"),
        pytest.param("agent:subagent:x", False, id="agent-named-subagent"),
        pytest.param("agent:main:discord:subagent:x", False, id="subagent-not-first-in-rest"),
        pytest.param("cron:subagent:x", False, id="cron"),
    ],
)
def test_is_subagent_key(key: str, expected: bool) -> None:
    assert is_subagent_key(key) is expected


# --- canonical form (§2.3 with contract decision 5.1) -------------------------------------


@pytest.mark.parametrize(
    ("rules", "raw", "agent_id", "expected"),
    [
        pytest.param(DEFAULT, "main", None, "agent:main:main", id="main"),
        pytest.param(DEFAULT, "MAIN", None, "agent:main:main", id="MAIN-upper"),
        pytest.param(DEFAULT, " main ", None, "agent:main:main", id="main-whitespace"),
        pytest.param(DEFAULT, "agent:main:main", None, "agent:main:main", id="already-canonical"),
        pytest.param(DEFAULT, "AGENT:Main:MAIN", None, "agent:main:main", id="mixed-case-prefixed"),
        pytest.param(DEFAULT, "agent:work:main", None, "agent:work:main", id="other-agent-main"),
        pytest.param(DEFAULT, "cron:job-1", None, "agent:main:cron:job-1", id="bare-cron"),
        pytest.param(
            DEFAULT,
            "discord:group:dev",
            None,
            "agent:main:discord:group:dev",
            id="bare-group",
        ),
        pytest.param(
            DEFAULT,
            "agent:Work:Discord:Group:Dev",
            None,
            "agent:work:discord:group:dev",
            id="prefixed-lower-cased",
        ),
        pytest.param(DEFAULT, "agent:main:a::b", None, "agent:main:a:b", id="empty-parts-dropped"),
        pytest.param(DEFAULT, "main", "work", "agent:work:main", id="main-is-callers-main"),
        pytest.param(
            DEFAULT, "cron:job-1", "work", "agent:work:cron:job-1", id="bare-key-is-callers"
        ),
        pytest.param(DEFAULT, "main", "Work Bot", "agent:work-bot:main", id="caller-normalised"),
        pytest.param(
            DEFAULT,
            "agent:main:main",
            "work",
            "agent:main:main",
            id="prefixed-key-ignores-caller",
        ),
        pytest.param(
            KeyRules(default_agent_id="ops"),
            "main",
            None,
            "agent:ops:main",
            id="no-caller-uses-default-agent",
        ),
        pytest.param(DEFAULT, "global", None, "global", id="global-stays"),
        pytest.param(DEFAULT, "unknown", None, "unknown", id="unknown-stays"),
        pytest.param(DEFAULT, " GLOBAL ", None, "global", id="global-any-case"),
        pytest.param(MAIN_KEY_WORK, "main", None, "agent:main:work", id="mainKey-main-alias"),
        pytest.param(MAIN_KEY_WORK, "work", None, "agent:main:work", id="mainKey-bare"),
        pytest.param(
            MAIN_KEY_WORK, "agent:work:main", None, "agent:work:work", id="mainKey-prefixed-alias"
        ),
        pytest.param(
            MAIN_KEY_WORK, "agent:work:work", None, "agent:work:work", id="mainKey-canonical"
        ),
        pytest.param(GLOBAL, "main", None, "global", id="global-scope-main"),
        pytest.param(GLOBAL, "agent:main:main", None, "global", id="global-scope-prefixed-main"),
        pytest.param(GLOBAL, "agent:work:main", "work", "global", id="global-scope-other-main"),
        pytest.param(
            GLOBAL, "cron:job-1", None, "agent:main:cron:job-1", id="global-scope-other-keys"
        ),
    ],
)
def test_canonical(rules: KeyRules, raw: str, agent_id: str | None, expected: str) -> None:
    assert rules.canonical(raw, agent_id=agent_id) == expected


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("main", id="main"),
        pytest.param("Discord:Group:Dev", id="group"),
        pytest.param("agent:Work:cron:x", id="prefixed"),
        pytest.param("global", id="global"),
        pytest.param("x" * (MAX_KEY_LENGTH - len("agent:main:")), id="longest-bare-key"),
    ],
)
@pytest.mark.parametrize(
    "rules",
    [
        pytest.param(DEFAULT, id="default"),
        pytest.param(MAIN_KEY_WORK, id="mainKey-work"),
        pytest.param(GLOBAL, id="global-scope"),
    ],
)
def test_canonical_is_idempotent(rules: KeyRules, raw: str) -> None:
    once = rules.canonical(raw)
    assert rules.canonical(once) == once


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("", "session key is empty", id="empty"),
        pytest.param("   \t ", "session key is empty", id="whitespace"),
        pytest.param("x" * 10_000, "session key is too long (10000 characters, max 512)", id="10k"),
        pytest.param("x" * 513, "session key is too long (513 characters, max 512)", id="513"),
        pytest.param(
            "x" * MAX_KEY_LENGTH,
            "session key is too long",
            id="bare-key-too-long-once-prefixed",
        ),
        pytest.param("agent:main:a\x00b", "session key contains control characters", id="nul"),
        pytest.param("main\nx", "session key contains control characters", id="newline"),
        pytest.param("a\tb", "session key contains control characters", id="tab"),
        pytest.param("a\x7fb", "session key contains control characters", id="delete"),
        pytest.param(
            "agent::x",
            "invalid session key: 'agent::x' (expected agent:<agentId>:<rest>)",
            id="agent-empty-id",
        ),
        pytest.param(
            "agent:x",
            "invalid session key: 'agent:x' (expected agent:<agentId>:<rest>)",
            id="agent-two-parts",
        ),
        pytest.param(
            " agent: ",
            "invalid session key: 'agent:' (expected agent:<agentId>:<rest>)",
            id="agent-prefix-only",
        ),
        pytest.param(":::", "invalid session key: ':::'", id="only-colons"),
    ],
)
def test_canonical_rejects(raw: str, message: str) -> None:
    with pytest.raises(InvalidSessionKey) as raised:
        DEFAULT.canonical(raw)
    assert str(raised.value).startswith(message)


def test_invalid_session_key_is_a_value_error() -> None:
    assert issubclass(InvalidSessionKey, ValueError)


@pytest.mark.parametrize(
    "raw",
    [pytest.param(None, id="none"), pytest.param(42, id="int"), pytest.param(["main"], id="list")],
)
def test_check_rejects_non_strings(raw: object) -> None:
    with pytest.raises(InvalidSessionKey, match=r"^session key must be a string$"):
        DEFAULT.check(raw)  # type: ignore[arg-type]


def test_check_returns_trimmed_key_with_case_kept() -> None:
    assert DEFAULT.check("  Agent:Main:X  ") == "Agent:Main:X"


def test_key_of_max_length_is_accepted() -> None:
    key = "agent:main:" + "x" * (MAX_KEY_LENGTH - len("agent:main:"))
    assert DEFAULT.canonical(key) == key


# --- kind (§2.4 on the canonical key) ---------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "key", "chat_type", "expected"),
    [
        pytest.param(DEFAULT, "agent:main:main", None, "main", id="own-main"),
        pytest.param(DEFAULT, "agent:work:main", None, "main", id="other-agents-main"),
        pytest.param(MAIN_KEY_WORK, "agent:main:work", None, "main", id="mainKey-work"),
        pytest.param(MAIN_KEY_WORK, "agent:main:main", None, "other", id="mainKey-work-not-main"),
        pytest.param(GLOBAL, "global", None, "main", id="global-under-global-scope"),
        pytest.param(DEFAULT, "global", None, "other", id="global-under-per-sender"),
        pytest.param(DEFAULT, "unknown", None, "other", id="unknown"),
        pytest.param(DEFAULT, "agent:main:cron:job-1", None, "cron", id="cron"),
        pytest.param(DEFAULT, "agent:main:hook:abc", None, "hook", id="hook"),
        pytest.param(DEFAULT, "agent:main:node-1", None, "node", id="node-dash"),
        pytest.param(DEFAULT, "agent:main:node:mac", None, "node", id="node-colon"),
        pytest.param(DEFAULT, "agent:main:discord:group:dev", None, "group", id="group-in-key"),
        pytest.param(DEFAULT, "agent:main:slack:channel:c1", None, "group", id="channel-in-key"),
        pytest.param(DEFAULT, "agent:main:group:abc", None, "group", id="rest-starts-with-group"),
        pytest.param(DEFAULT, "agent:main:whatsapp:dm:+1", "group", "group", id="chat-type-group"),
        pytest.param(DEFAULT, "agent:main:x", "channel", "group", id="chat-type-channel"),
        pytest.param(DEFAULT, "agent:main:dm:+1555", "direct", "other", id="chat-type-direct"),
        pytest.param(DEFAULT, "agent:main:dm:+1555", None, "other", id="dm"),
        pytest.param(DEFAULT, "agent:main:subagent:x", None, "other", id="subagent"),
        pytest.param(DEFAULT, "agent:main:main", "group", "main", id="main-wins-over-chat-type"),
        pytest.param(DEFAULT, "agent:main:cron:x", "group", "cron", id="cron-wins-over-chat-type"),
        pytest.param(DEFAULT, "agent:main:cron:group:x", None, "cron", id="cron-wins-over-group"),
        pytest.param(DEFAULT, "agent:main:xcron:1", None, "other", id="cron-must-be-prefix"),
    ],
)
def test_kind(rules: KeyRules, key: str, chat_type: str | None, expected: str) -> None:
    assert rules.kind(key, chat_type) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("main", "main", id="main"),
        pytest.param("cron:job-1", "cron", id="cron"),
        pytest.param("hook:1", "hook", id="hook"),
        pytest.param("node-7", "node", id="node"),
        pytest.param("discord:group:dev", "group", id="group"),
        pytest.param("agent:main:cron:x", "cron", id="prefixed-cron-not-other"),
    ],
)
def test_kind_of_bare_key_after_canonicalisation(raw: str, expected: str) -> None:
    assert DEFAULT.kind(DEFAULT.canonical(raw)) == expected


# --- display key (§2.2 with contract decision 5.1) -----------------------------------------


@pytest.mark.parametrize(
    ("rules", "key", "agent_id", "expected"),
    [
        pytest.param(DEFAULT, "agent:main:main", None, "main", id="own-main"),
        pytest.param(DEFAULT, "agent:main:main", "main", "main", id="own-main-explicit"),
        pytest.param(DEFAULT, "agent:work:main", "work", "main", id="work-calls-its-main"),
        pytest.param(DEFAULT, "agent:work:main", None, "agent:work:main", id="other-agents-main"),
        pytest.param(DEFAULT, "agent:main:main", "work", "agent:main:main", id="main-seen-by-work"),
        pytest.param(
            KeyRules(default_agent_id="ops"), "agent:ops:main", None, "main", id="default-agent"
        ),
        pytest.param(MAIN_KEY_WORK, "agent:main:work", None, "main", id="mainKey-work"),
        pytest.param(GLOBAL, "global", None, "main", id="global-scope-global"),
        pytest.param(GLOBAL, "global", "work", "main", id="global-scope-any-caller"),
        pytest.param(DEFAULT, "global", None, "global", id="per-sender-global"),
        pytest.param(DEFAULT, "unknown", None, "unknown", id="unknown"),
        pytest.param(
            DEFAULT, "agent:main:cron:job-1", None, "agent:main:cron:job-1", id="other-keys-full"
        ),
    ],
)
def test_display(rules: KeyRules, key: str, agent_id: str | None, expected: str) -> None:
    assert rules.display(key, agent_id=agent_id) == expected


@pytest.mark.parametrize(
    ("rules", "agent_id", "expected"),
    [
        pytest.param(DEFAULT, "main", "agent:main:main", id="default"),
        pytest.param(DEFAULT, " Work ", "agent:work:main", id="agent-normalised"),
        pytest.param(MAIN_KEY_WORK, "main", "agent:main:work", id="mainKey-work"),
        pytest.param(KeyRules(main_key=" Home "), "main", "agent:main:home", id="mainKey-trimmed"),
        pytest.param(GLOBAL, "work", "global", id="global-scope"),
    ],
)
def test_main_session_key(rules: KeyRules, agent_id: str, expected: str) -> None:
    assert rules.main_session_key(agent_id) == expected


# --- group channel and derive_channel (§2.5) --------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("agent:main:discord:group:dev", "discord", id="group"),
        pytest.param("agent:work:slack:channel:c1", "slack", id="channel"),
        pytest.param("agent:main:telegram:group:-100:topic:42", "telegram", id="topic-suffix"),
        pytest.param("discord:group:dev", "discord", id="bare-key"),
        pytest.param("agent:main:discord:group", None, id="no-group-id"),
        pytest.param("agent:main:group:dev:x", None, id="group-first"),
        pytest.param("agent:main:whatsapp:dm:+1555", None, id="dm"),
        pytest.param("agent:main:main", None, id="main"),
        pytest.param("global", None, id="global"),
    ],
)
def test_group_channel(key: str, expected: str | None) -> None:
    assert DEFAULT.group_channel(key) == expected


@pytest.mark.parametrize(
    ("kind", "channel", "last_channel", "group_channel", "expected"),
    [
        pytest.param("cron", "discord", "slack", "x", "internal", id="cron-internal"),
        pytest.param("hook", None, None, None, "internal", id="hook-internal"),
        pytest.param("node", "whatsapp", None, None, "internal", id="node-internal"),
        pytest.param("group", "discord", "slack", "telegram", "discord", id="channel-first"),
        pytest.param("main", None, "whatsapp", "telegram", "whatsapp", id="then-last-channel"),
        pytest.param("group", "  ", "", "telegram", "telegram", id="blank-skipped"),
        pytest.param("group", None, None, "discord", "discord", id="then-group-channel"),
        pytest.param("main", " whatsapp ", None, None, "whatsapp", id="trimmed"),
        pytest.param("other", None, None, None, "unknown", id="else-unknown"),
        pytest.param("main", "", " ", "", "unknown", id="all-blank-unknown"),
    ],
)
def test_derive_channel(
    kind: str,
    channel: str | None,
    last_channel: str | None,
    group_channel: str | None,
    expected: str,
) -> None:
    got = derive_channel(
        kind,  # type: ignore[arg-type]
        channel=channel,
        last_channel=last_channel,
        group_channel=group_channel,
    )
    assert got == expected


# --- session-id and session-key shapes (§2.6) ------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa", True, id="uuid"),
        pytest.param("AAAAAAAA-AAAA-4AAA-AAAA-AAAAAAAAAAAA", True, id="uuid-upper"),
        pytest.param(" 123e4567-e89b-12d3-a456-426614174000 ", True, id="uuid-trimmed"),
        pytest.param("123e4567e89b12d3a456426614174000", False, id="no-dashes"),
        pytest.param("123e4567-e89b-12d3-a456-42661417400", False, id="short-group"),
        pytest.param("g23e4567-e89b-12d3-a456-426614174000", False, id="non-hex"),
        pytest.param("sess-group", False, id="label-like"),
        pytest.param("main", False, id="main"),
        pytest.param("", False, id="empty"),
    ],
)
def test_looks_like_session_id(value: str, expected: bool) -> None:
    assert looks_like_session_id(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("main", True, id="main"),
        pytest.param("global", True, id="global"),
        pytest.param("unknown", True, id="unknown"),
        pytest.param(" Main ", True, id="main-any-case"),
        pytest.param("agent:main:x", True, id="agent"),
        pytest.param("cron:job-1", True, id="cron"),
        pytest.param("hook:abc", True, id="hook"),
        pytest.param("node-1", True, id="node-dash"),
        pytest.param("node:mac", True, id="node-colon"),
        pytest.param("acp:session", True, id="acp"),
        pytest.param("subagent:abc", True, id="subagent"),
        pytest.param("discord:group:dev", True, id="group"),
        pytest.param("slack:channel:c1", True, id="channel"),
        pytest.param("sess-group", False, id="session-id-like"),
        pytest.param("aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa", False, id="uuid"),
        pytest.param("my-test-worker", False, id="label"),
        pytest.param("mainframe", False, id="starts-with-main"),
        pytest.param("discord:dm:x", False, id="dm-without-prefix"),
        pytest.param("", False, id="empty"),
    ],
)
def test_looks_like_session_key(value: str, expected: bool) -> None:
    assert looks_like_session_key(value) is expected


# --- agent-to-agent policy (§2.7) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "requester", "target", "expected"),
    [
        pytest.param(AgentToAgentPolicy(), "main", "main", True, id="same-agent-disabled"),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("nobody",)),
            "work",
            "work",
            True,
            id="same-agent-not-in-allow",
        ),
        pytest.param(AgentToAgentPolicy(), "main", "work", False, id="disabled-by-default"),
        pytest.param(
            AgentToAgentPolicy(enabled=False, allow=("*",)),
            "main",
            "work",
            False,
            id="disabled-with-allow-all",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True), "main", "work", True, id="enabled-empty-allow-is-all"
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("*",)), "main", "work", True, id="star"
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("main", "work")),
            "main",
            "work",
            True,
            id="both-listed",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("main",)),
            "main",
            "work",
            False,
            id="target-not-listed",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("work",)),
            "main",
            "work",
            False,
            id="requester-not-listed",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("Main", "work")),
            "main",
            "work",
            False,
            id="exact-is-case-sensitive",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=(" main ", " work ")),
            "main",
            "work",
            True,
            id="patterns-trimmed",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("MA*", "w*K")),
            "main",
            "work",
            True,
            id="glob-case-insensitive",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("ma*", "wo")),
            "main",
            "work",
            False,
            id="exact-needs-whole-id",
        ),
        pytest.param(
            AgentToAgentPolicy(enabled=True, allow=("", "  ")),
            "main",
            "work",
            False,
            id="empty-patterns-never-match",
        ),
    ],
)
def test_agent_to_agent_is_allowed(
    policy: AgentToAgentPolicy, requester: str, target: str, expected: bool
) -> None:
    assert policy.is_allowed(requester, target) is expected


@pytest.mark.parametrize(
    ("allow", "agent_id", "expected"),
    [
        pytest.param((), "anything", True, id="empty-list-matches-all"),
        pytest.param(("*",), "anything", True, id="star"),
        pytest.param(("research",), "research", True, id="exact"),
        pytest.param(("research",), "Research", False, id="exact-case-sensitive"),
        pytest.param(("research",), "research2", False, id="exact-whole-id"),
        pytest.param(("res*",), "Research", True, id="glob-prefix-any-case"),
        pytest.param(("*-bot",), "SUPPORT-BOT", True, id="glob-suffix-any-case"),
        pytest.param(("a*c",), "abxc", True, id="glob-middle"),
        pytest.param(("a*c",), "abcd", False, id="glob-anchored-at-end"),
        pytest.param(("b*",), "abc", False, id="glob-anchored-at-start"),
        pytest.param(("a.c",), "abc", False, id="dot-is-literal"),
        pytest.param(("a.*",), "a.b", True, id="glob-with-literal-dot"),
        pytest.param(("a.*",), "axb", False, id="glob-dot-still-literal"),
        pytest.param(("",), "main", False, id="empty-pattern"),
        pytest.param(("  ",), "main", False, id="blank-pattern"),
        pytest.param(("", "main"), "main", True, id="any-pattern-matching-is-enough"),
    ],
)
def test_agent_to_agent_allow_patterns(
    allow: tuple[str, ...], agent_id: str, expected: bool
) -> None:
    assert AgentToAgentPolicy(enabled=True, allow=allow).matches(agent_id) is expected


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param(AgentToAgentPolicy(), False, id="disabled"),
        pytest.param(AgentToAgentPolicy(allow=("*",)), False, id="disabled-star"),
        pytest.param(AgentToAgentPolicy(enabled=True), True, id="enabled-empty-allow"),
        pytest.param(AgentToAgentPolicy(enabled=True, allow=(" * ",)), True, id="enabled-star"),
        pytest.param(AgentToAgentPolicy(enabled=True, allow=("main",)), False, id="enabled-list"),
    ],
)
def test_agent_to_agent_open_to_all(policy: AgentToAgentPolicy, expected: bool) -> None:
    assert policy.open_to_all() is expected


# --- the canonical-key fast path and the listed row's classification -------------------


def parsed_part_by_part(key: str | None) -> ParsedAgentKey | None:
    """parse_agent_session_key's general case, the one every key took before."""
    parts = [part for part in (key or "").strip().split(":") if part]
    if len(parts) < 3 or parts[0].lower() != "agent":
        return None
    return ParsedAgentKey(agent_id=parts[1], rest=":".join(parts[2:]))


KEY_PIECES = ["agent", "AGENT", "main", "ops", "cron", "hook", "node-1", "group", "channel"]
KEY_PIECES += [":", "::", " ", "\t", "\u3000", "discord", "subagent", "x"]


@settings(max_examples=500, deadline=None)
@given(key=st.lists(st.sampled_from(KEY_PIECES), max_size=8).map("".join))
def test_a_key_parses_as_it_did_part_by_part(key: str) -> None:
    assert parse_agent_session_key(key) == parsed_part_by_part(key)
    assert parse_agent_session_key(f"agent:{key}") == parsed_part_by_part(f"agent:{key}")


@settings(max_examples=300, deadline=None)
@given(
    key=st.lists(st.sampled_from(KEY_PIECES), max_size=8).map("".join),
    chat_type=st.sampled_from([None, "group", "channel", "direct"]),
    scope=st.sampled_from(["per-sender", "global"]),
    main_key=st.sampled_from(["main", "ops", " Work "]),
)
def test_a_rows_kind_and_group_channel_come_from_one_parse(
    key: str, chat_type: str | None, scope: str, main_key: str
) -> None:
    rules = KeyRules(main_key=main_key, scope=scope)
    for candidate in (key, f"agent:{key}", "global", "unknown"):
        assert rules.kind_and_group_channel(candidate, chat_type) == (
            rules.kind(candidate, chat_type),
            rules.group_channel(candidate),
        )


def displayed_before(rules: KeyRules, key: str, agent_id: str | None) -> str:
    """KeyRules.display as it was written before main_key_of."""
    if key == "global" and rules.is_global:
        return "main"
    caller = normalize_agent_id(agent_id or rules.default_agent_id)
    if key == rules.main_session_key(caller):
        return "main"
    return key


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["global", "unknown", "agent:main:main", "agent:ops:main", "agent:x:y"]),
    agent_id=st.sampled_from([None, "", "main", "Ops", "ops", " x "]),
    scope=st.sampled_from(["per-sender", "global"]),
    main_key=st.sampled_from(["main", "y", " Main "]),
)
def test_display_shows_main_as_it_did(
    key: str, agent_id: str | None, scope: str, main_key: str
) -> None:
    rules = KeyRules(main_key=main_key, scope=scope)
    assert rules.display(key, agent_id=agent_id) == displayed_before(rules, key, agent_id)
