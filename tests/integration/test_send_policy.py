"""The send policy: OpenClaw's rule order (conformance F), the owner's ``/send`` command
and ``sessions.patch`` overrides, and a denied send through the tool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.config.gateway_config import ConfigError
from sessionwire.domain.control_commands import SEND_USAGE, parse_send_command
from sessionwire.domain.keys import KeyRules
from sessionwire.domain.policy import SendPolicy, SendRule
from sessionwire.domain.session import SessionState
from sessionwire.testing import ScriptedRuntime, VirtualClock

RULES = KeyRules()


def target(key: str, **fields: Any) -> Any:
    canonical = RULES.canonical(key)
    state = SessionState(
        key=canonical,
        session_id="s",
        agent_id=canonical.split(":")[1],
        created_at=0,
        updated_at=0,
        **fields,
    )
    return state.policy_target(RULES)


def policy(config: dict[str, Any]) -> SendPolicy:
    return GatewayConfig.load({"session": {"sendPolicy": config}}).send_policy


# Rule order and matching (openclaw-conformance.md F) --------------------------------------


def test_no_send_policy_config_allows() -> None:
    assert GatewayConfig().send_policy.decide(target("main")).action == "allow"


def test_a_session_override_wins_over_the_config() -> None:
    decision = policy({"default": "allow"}).decide(target("main", send_policy="deny"))
    assert (decision.action, decision.rule) == ("deny", "session override (sendPolicy=deny)")


def test_a_channel_and_chat_type_rule_denies_a_discord_group() -> None:
    rules = {"rules": [{"action": "deny", "match": {"channel": "discord", "chatType": "group"}}]}
    decision = policy(rules).decide(
        target("discord:group:dev", channel="discord", chat_type="group")
    )
    assert (decision.action, decision.rule) == ("deny", "session.sendPolicy.rules[0]")


def test_the_channel_and_chat_type_come_from_a_group_key_when_the_row_has_none() -> None:
    rules = {"rules": [{"action": "deny", "match": {"channel": "discord", "chatType": "group"}}]}
    assert policy(rules).decide(target("discord:group:dev")).action == "deny"
    assert policy(rules).decide(target("slack:group:dev")).action == "allow"


@pytest.mark.parametrize("key", ["cron:job-1", "agent:main:cron:job-1", "CRON:Job-1"])
def test_a_key_prefix_matches_the_session_however_it_is_named(key: str) -> None:
    # OpenClaw compares the raw key, so its `agent:main:cron:…` form escapes a
    # `cron:` rule; here the rule applies to the session (contract decision 11).
    rules = {"rules": [{"action": "deny", "match": {"keyPrefix": "cron:"}}]}
    assert policy(rules).decide(target(key)).action == "deny"


def test_a_later_deny_beats_an_earlier_allow() -> None:
    rules = {
        "rules": [
            {"action": "allow", "match": {"channel": "discord"}},
            {"action": "deny", "match": {"chatType": "group"}},
        ]
    }
    decision = policy(rules).decide(target("discord:group:dev"))
    assert (decision.action, decision.rule) == ("deny", "session.sendPolicy.rules[1]")


def test_a_matching_allow_wins_over_a_deny_default() -> None:
    rules = {"rules": [{"action": "allow", "match": {"channel": "discord"}}], "default": "deny"}
    assert policy(rules).decide(target("discord:group:dev")).action == "allow"
    decision = policy(rules).decide(target("slack:group:dev"))
    assert (decision.action, decision.rule) == ("deny", "session.sendPolicy.default")


def test_dm_means_direct() -> None:
    rules = {"rules": [{"action": "deny", "match": {"chatType": "dm"}}]}
    assert policy(rules).decide(target("whatsapp:+1555", chat_type="direct")).action == "deny"


def test_the_older_provider_field_is_the_channel() -> None:
    rules = {"rules": [{"action": "deny", "match": {"provider": "discord"}}]}
    assert policy(rules).decide(target("discord:group:dev")).action == "deny"


def test_a_rule_without_an_action_allows() -> None:
    rules = {"rules": [{"match": {"channel": "discord"}}], "default": "deny"}
    assert policy(rules).decide(target("discord:group:dev")).action == "allow"


def test_an_unknown_chat_type_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(
        ConfigError,
        match=r"rules\[0\]\.match\.chatType: .*must be direct, dm, group or channel",
    ):
        policy({"rules": [{"action": "deny", "match": {"chatType": "guild"}}]})


def test_rule_fields_are_read_into_the_domain_rule() -> None:
    loaded = policy({"rules": [{"action": "deny", "match": {"keyPrefix": "cron:"}}]})
    assert loaded.rules == (SendRule(action="deny", key_prefix="cron:"),)


# The /send command (openclaw-conformance.md F) ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("/send on", "allow"),
        ("/send: on", "allow"),
        ("/send allow", "allow"),
        ("/send off", "deny"),
        ("/send deny", "deny"),
        ("/send inherit", "inherit"),
        ("/send default", "inherit"),
        ("/send reset", "inherit"),
        ("/send", None),
        ("/send:", None),
        ("/send banana", None),
    ],
)
def test_send_commands(text: str, mode: str | None) -> None:
    command = parse_send_command(text)
    assert command is not None
    assert command.mode == mode


@pytest.mark.parametrize(
    "text", ["send on", "send", "prefix /send on", "/send on please", "/sendon"]
)
def test_text_that_is_not_a_send_command(text: str) -> None:
    assert parse_send_command(text) is None


def test_replies() -> None:
    assert parse_send_command("/send off").reply == "⚙️ Send policy set to off."  # type: ignore[union-attr]
    assert parse_send_command("/send banana").reply == SEND_USAGE  # type: ignore[union-attr]
    assert SEND_USAGE == "⚙️ Usage: /send on|off|inherit"


# Through the gateway ------------------------------------------------------------------------

ECHO = {"rules": [{"reply": "got {message}"}]}


@pytest.fixture
async def gw(store_url: str) -> AsyncIterator[Gateway]:
    gateway = await Gateway.open(
        config={"session": {"agentToAgent": {"maxPingPongTurns": 0}}},
        store=store_url,
        runtime=ScriptedRuntime.from_dict(ECHO),
        clock=VirtualClock(start=datetime(2026, 5, 1, 12, 0, tzinfo=UTC)),
    )
    await gateway.record_message("discord:group:dev", role="user", content="hi", channel="discord")
    yield gateway
    await gateway.close()


async def send_policy_of(gw: Gateway, key: str) -> str | None:
    listed = await gw.call_tool("main", "sessions_list", {})
    row = next(r for r in listed["sessions"] if r["key"] == key)
    policy: str | None = row["sendPolicy"]
    return policy


def event_names(gw: Gateway) -> list[str]:
    return [type(event).__name__ for _, event in store_of(gw).events()]


async def send(gw: Gateway) -> dict[str, Any]:
    return await gw.call_tool(
        "main",
        "sessions_send",
        {"sessionKey": "discord:group:dev", "message": "ping", "timeoutSeconds": 0},
    )


async def test_an_owner_turns_sends_off_and_on_with_the_send_command(gw: Gateway) -> None:
    key = "agent:main:discord:group:dev"
    recorded = await gw.record_message(key, role="user", content="/send off", sender_is_owner=True)
    assert recorded["command"] == {
        "name": "send",
        "mode": "deny",
        "applied": True,
        "reply": "⚙️ Send policy set to off.",
        "sendPolicy": "deny",
    }
    assert await send_policy_of(gw, key) == "deny"
    blocked = await send(gw)
    assert blocked == {
        "runId": blocked["runId"],
        "status": "error",
        "tool": "sessions_send",
        "error": "send blocked by session policy",
        "sessionKey": key,
    }
    await gw.record_message(key, role="user", content="/send inherit", sender_is_owner=True)
    assert await send_policy_of(gw, key) is None
    assert (await send(gw))["status"] == "accepted"


async def test_a_send_command_from_someone_else_is_ignored_and_recorded(gw: Gateway) -> None:
    key = "agent:main:discord:group:dev"
    recorded = await gw.record_message(key, role="user", content="/send off")
    assert recorded["command"]["applied"] is False
    assert recorded["command"]["reply"] is None
    assert await send_policy_of(gw, key) is None
    handled = [e for _, e in store_of(gw).events() if type(e).__name__ == "SendCommandHandled"]
    assert [(e.applied, e.reason) for e in handled] == [  # type: ignore[attr-defined]
        (False, "ignored: the sender is not an owner")
    ]
    # The message itself is part of the conversation either way.
    history = await gw.call_tool("main", "sessions_history", {"sessionKey": key})
    assert history["messages"][-1]["content"][0]["text"] == "/send off"


async def test_send_usage_changes_nothing(gw: Gateway) -> None:
    key = "agent:main:discord:group:dev"
    recorded = await gw.record_message(
        key, role="user", content="/send banana", sender_is_owner=True
    )
    assert recorded["command"]["reply"] == SEND_USAGE
    assert recorded["command"]["applied"] is False
    assert await send_policy_of(gw, key) is None


async def test_an_assistant_message_is_never_a_command(gw: Gateway) -> None:
    recorded = await gw.record_message(
        "discord:group:dev", role="assistant", content="/send off", sender_is_owner=True
    )
    assert "command" not in recorded


async def test_sessions_patch_sets_and_clears_the_override(gw: Gateway) -> None:
    key = "agent:main:discord:group:dev"
    await gw.patch_session(key, sendPolicy="deny")
    before = len(event_names(gw))
    blocked = await send(gw)
    assert blocked["error"] == "send blocked by session policy"
    await gw.wait_idle()
    # Evidence of the refusal, and no run, turn or delivery.
    assert event_names(gw)[before:] == ["AccessRefused"]
    refused = [e for _, e in store_of(gw).events() if type(e).__name__ == "AccessRefused"][-1]
    assert (refused.check, refused.rule, refused.requester_key, refused.target_key) == (  # type: ignore[attr-defined]
        "send_policy",
        "session override (sendPolicy=deny)",
        "agent:main:main",
        key,
    )
    await gw.patch_session(key, sendPolicy=None)
    assert (await send(gw))["status"] == "accepted"


async def test_an_invalid_send_policy_patch_is_refused(gw: Gateway) -> None:
    with pytest.raises(ValueError, match=r'invalid sendPolicy \(use "allow"\|"deny"\)'):
        await gw.patch_session("discord:group:dev", sendPolicy="maybe")


async def test_a_config_rule_blocks_a_send_by_every_name(store_url: str) -> None:
    config = {
        "session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"keyPrefix": "cron:"}}]}}
    }
    gateway = await Gateway.open(config=config, store=store_url)
    try:
        opened = await gateway.record_message("cron:nightly", role="user", content="run")
        for name in (
            "cron:nightly",
            "agent:main:cron:nightly",
            " CRON:Nightly ",
            opened["sessionId"],
        ):
            result = await gateway.call_tool(
                "main", "sessions_send", {"sessionKey": name, "message": "x", "timeoutSeconds": 0}
            )
            assert (result["status"], result["error"]) == (
                "error",
                "send blocked by session policy",
            ), name
    finally:
        await gateway.close()


async def test_the_timeline_shows_the_refusal_and_the_command(gw: Gateway) -> None:
    key = "agent:main:discord:group:dev"
    await gw.record_message(key, role="user", content="/send off", sender_is_owner=True)
    await send(gw)
    entries = [(e.kind, e.event, e.summary) for e in (await gw.timeline(key)).entries]
    assert ("session", "SendCommandHandled", "/send command (deny): applied") in entries
    assert (
        "refusal",
        "AccessRefused",
        "sessions_send by agent:main:main refused (send_policy, session override "
        "(sendPolicy=deny)): send blocked by session policy",
    ) in entries
