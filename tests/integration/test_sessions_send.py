"""sessions_send: the primary run, the wait, the ping-pong loop and the announce.

Every example runs on the memory, SQLite and PostgreSQL stores. Agents are scripted
(ScriptedRuntime), time is virtual (VirtualClock) and channel posts are captured
(CapturingDelivery). Conformance cases D and E of openclaw-conformance.md, with our
decisions (contract §5): canonical keys, unknown targets are errors, a timed-out wait
still gets its exchange, runs are serialised per session.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PENDING = {"status": "started", "mode": "announce"}
REQ = "discord:group:req"
REQ_KEY = "agent:main:discord:group:req"
TARGET = "discord:group:target"
TARGET_KEY = "agent:main:discord:group:target"
ANNOUNCE_MESSAGE = "Agent-to-agent announce step."
A2A_DISABLED = (
    "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true "
    "to allow cross-agent sends."
)
A2A_DENIED = "Agent-to-agent messaging denied by tools.agentToAgent.allow."
EXCHANGE_EVENTS = {
    "ExchangeOpened",
    "RoundOneReplied",
    "PingPongTurn",
    "ReplySkipped",
    "LoopEnded",
    "AnnounceRequested",
    "AnnounceReplied",
    "AnnounceSkipped",
    "AnnounceDelivered",
    "AnnounceFailed",
    "ExchangeClosed",
}


@dataclass
class Rig:
    gw: Gateway
    runtime: ScriptedRuntime
    delivery: CapturingDelivery
    clock: VirtualClock

    async def send(self, requester: str, **params: Any) -> dict[str, Any]:
        return await self.gw.call_tool(requester, "sessions_send", params)

    def runs(self) -> list[tuple[str, str, str]]:
        """(step, session key, incoming message) of every run the runtime saw, in order."""
        return [(call.step, call.session_key, call.message) for call in self.runtime.calls]

    def contexts(self, step: str) -> list[str | None]:
        return [call.context for call in self.runtime.calls if call.step == step]

    def event_count(self) -> int:
        return sum(1 for _ in store_of(self.gw).events())

    def events_after(self, position: int) -> list[str]:
        """The names of the events recorded after the first ``position`` events."""
        names = [type(event).__name__ for _, event in store_of(self.gw).events()]
        return names[position:]

    def exchange_events(self) -> list[str]:
        names = (type(event).__name__ for _, event in store_of(self.gw).events())
        return [name for name in names if name in EXCHANGE_EVENTS]

    def sent(self, *fields: str) -> list[dict[str, Any]]:
        keys = fields or ("channel", "to", "accountId", "message", "sessionKey")
        return [{key: item[key] for key in keys} for item in self.delivery.sent]

    async def transcript(self, key: str) -> list[tuple[str, str]]:
        history = await self.gw.call_tool(
            "main", "sessions_history", {"sessionKey": key, "limit": 1000}
        )
        return [
            (message["role"], "".join(block.get("text", "") for block in message["content"]))
            for message in history["messages"]
        ]


@asynccontextmanager
async def rig(
    store_url: str,
    clock: VirtualClock,
    rules: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    visibility: str = "agent",
) -> AsyncIterator[Rig]:
    runtime = ScriptedRuntime.from_dict({"rules": rules})
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        # Written before visibility scopes: its non-main callers reach their agent's
        # sessions (``agent``); its agent-to-agent tests ask for ``all``.
        config=GatewayConfig.load(before_scopes(config, visibility)),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=delivery,
    )
    try:
        yield Rig(gw=gw, runtime=runtime, delivery=delivery, clock=clock)
    finally:
        await gw.close()


def turns(max_turns: float) -> dict[str, Any]:
    return {"session": {"agentToAgent": {"maxPingPongTurns": max_turns}}}


def a2a(enabled: bool, allow: list[str] | None = None) -> dict[str, Any]:
    section: dict[str, Any] = {"enabled": enabled}
    if allow is not None:
        section["allow"] = allow
    return {"tools": {"agentToAgent": section}}


def is_uuid(value: Any) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except (TypeError, ValueError):
        return False


async def discord_group(gw: Gateway, key: str) -> None:
    await gw.record_message(key, role="user", content="hello", channel="discord", chat_type="group")


# Conformance D1: requester discord:group:req sends to main, maxPingPongTurns 2. -------

D1_RULES = [
    {"step": "primary", "match": "^(ping|wait)$", "reply": "done"},
    {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    {"session": REQ_KEY, "reply": "pong"},
    {"reply": "REPLY_SKIP"},
]

D1_PRIMARY_CONTEXT = (
    "Agent-to-agent message context:\n"
    "Agent 1 (requester) session: discord:group:req.\n"
    "Agent 1 (requester) channel: discord.\n"
    "Agent 2 (target) session: main."
)


@asynccontextmanager
async def d1(store_url: str, clock: VirtualClock) -> AsyncIterator[Rig]:
    async with rig(store_url, clock, D1_RULES, turns(2)) as r:
        await discord_group(r.gw, REQ)
        await r.gw.record_message("main", role="user", content="hi")
        yield r


async def test_d1_fire_and_forget_is_accepted_at_once(store_url: str, clock: VirtualClock) -> None:
    async with d1(store_url, clock) as r:
        result = await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        assert result == {
            "runId": result["runId"],
            "status": "accepted",
            "sessionKey": "main",
            "delivery": PENDING,
        }
        assert is_uuid(result["runId"])
        await r.gw.wait_idle()
        assert r.runtime.calls[0].run_id == result["runId"]


async def test_d1_runs_primary_requester_turn_target_turn_then_announce(
    store_url: str, clock: VirtualClock
) -> None:
    async with d1(store_url, clock) as r:
        await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.runs() == [
            ("primary", "agent:main:main", "ping"),
            ("reply_back", REQ_KEY, "done"),  # requester turn → "pong"
            ("reply_back", "agent:main:main", "pong"),  # target turn → REPLY_SKIP: stop
            ("announce", "agent:main:main", ANNOUNCE_MESSAGE),  # → ANNOUNCE_SKIP
        ]
        assert [call.turn for call in r.runtime.calls] == [None, 1, 2, None]
        assert r.delivery.sent == []


async def test_d1_wait_mode_returns_the_reply_and_still_runs_the_exchange(
    store_url: str, clock: VirtualClock
) -> None:
    async with d1(store_url, clock) as r:
        result = await r.send(REQ, sessionKey="main", message="wait", timeoutSeconds=1)
        assert result == {
            "runId": result["runId"],
            "status": "ok",
            "reply": "done",
            "sessionKey": "main",
            "delivery": PENDING,
        }
        assert is_uuid(result["runId"])
        await r.gw.wait_idle()
        assert [step for step, _, _ in r.runs()] == [
            "primary",
            "reply_back",
            "reply_back",
            "announce",
        ]
        assert r.delivery.sent == []


async def test_d1_primary_run_gets_the_message_context(store_url: str, clock: VirtualClock) -> None:
    async with d1(store_url, clock) as r:
        await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.contexts("primary") == [D1_PRIMARY_CONTEXT]


async def test_d1_target_without_channel_is_named_unknown_in_step_contexts(
    store_url: str, clock: VirtualClock
) -> None:
    async with d1(store_url, clock) as r:
        await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.contexts("reply_back")[0] == (
            "Agent-to-agent reply step:\n"
            "Current agent: Agent 1 (requester).\n"
            "Turn 1 of 2.\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: main.\n"
            "Agent 2 (target) channel: unknown.\n"
            'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".'
        )
        assert r.contexts("announce") == [
            "Agent-to-agent announce step:\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: main.\n"
            "Agent 2 (target) channel: unknown.\n"
            "Original request: ping\n"
            "Round 1 reply: done\n"
            "Latest reply: pong\n"
            'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
            "Any other reply will be posted to the target channel.\n"
            "After this reply, the agent-to-agent conversation is over."
        ]


async def test_d1_step_contexts_name_turn_speaker_and_replies(
    store_url: str, clock: VirtualClock
) -> None:
    async with d1(store_url, clock) as r:
        await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        first, second = r.contexts("reply_back")
        assert first is not None
        assert second is not None
        assert first.splitlines()[:3] == [
            "Agent-to-agent reply step:",
            "Current agent: Agent 1 (requester).",
            "Turn 1 of 2.",
        ]
        assert second.splitlines()[:3] == [
            "Agent-to-agent reply step:",
            "Current agent: Agent 2 (target).",
            "Turn 2 of 2.",
        ]
        (announce,) = r.contexts("announce")
        assert announce is not None
        assert "\nOriginal request: ping\nRound 1 reply: done\nLatest reply: pong\n" in announce


# Conformance D2: ping-pong then announce between two discord groups. ----------------

D2_RULES = [
    {"step": "primary", "reply": "initial"},
    {"step": "reply_back", "session": REQ_KEY, "reply": "pong-1"},
    {"step": "reply_back", "session": TARGET_KEY, "reply": "pong-2"},
    {"step": "announce", "reply": "announce now"},
]


@asynccontextmanager
async def d2(store_url: str, clock: VirtualClock) -> AsyncIterator[Rig]:
    async with rig(store_url, clock, D2_RULES, turns(2)) as r:
        await discord_group(r.gw, REQ)
        await discord_group(r.gw, TARGET)
        yield r


async def test_d2_wait_returns_round_one_reply(store_url: str, clock: VirtualClock) -> None:
    async with d2(store_url, clock) as r:
        result = await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=1)
        assert result == {
            "runId": result["runId"],
            "status": "ok",
            "reply": "initial",
            "sessionKey": TARGET_KEY,
            "delivery": PENDING,
        }


async def test_d2_ping_pong_then_announce_is_delivered_to_the_target_channel(
    store_url: str, clock: VirtualClock
) -> None:
    async with d2(store_url, clock) as r:
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=1)
        await r.gw.wait_idle()
        assert r.runs() == [
            ("primary", TARGET_KEY, "ping"),
            ("reply_back", REQ_KEY, "initial"),
            ("reply_back", TARGET_KEY, "pong-1"),
            ("announce", TARGET_KEY, ANNOUNCE_MESSAGE),
        ]
        assert len(r.contexts("reply_back")) == 2
        assert r.sent() == [
            {
                "channel": "discord",
                "to": "channel:target",
                "accountId": None,
                "message": "announce now",
                "sessionKey": TARGET_KEY,
            }
        ]


async def test_d2_step_contexts_are_the_exact_texts(store_url: str, clock: VirtualClock) -> None:
    async with d2(store_url, clock) as r:
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=1)
        await r.gw.wait_idle()
        assert r.contexts("primary") == [
            "Agent-to-agent message context:\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: agent:main:discord:group:target."
        ]
        assert r.contexts("reply_back") == [
            "Agent-to-agent reply step:\n"
            "Current agent: Agent 1 (requester).\n"
            "Turn 1 of 2.\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: agent:main:discord:group:target.\n"
            "Agent 2 (target) channel: discord.\n"
            'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".',
            "Agent-to-agent reply step:\n"
            "Current agent: Agent 2 (target).\n"
            "Turn 2 of 2.\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: agent:main:discord:group:target.\n"
            "Agent 2 (target) channel: discord.\n"
            'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".',
        ]
        assert r.contexts("announce") == [
            "Agent-to-agent announce step:\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: agent:main:discord:group:target.\n"
            "Agent 2 (target) channel: discord.\n"
            "Original request: ping\n"
            "Round 1 reply: initial\n"
            "Latest reply: pong-2\n"
            'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
            "Any other reply will be posted to the target channel.\n"
            "After this reply, the agent-to-agent conversation is over."
        ]


async def test_d2_both_transcripts_hold_every_turn_once_in_order(
    store_url: str, clock: VirtualClock
) -> None:
    async with d2(store_url, clock) as r:
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=1)
        await r.gw.wait_idle()
        assert await r.transcript(REQ) == [
            ("user", "hello"),
            ("user", "initial"),
            ("assistant", "pong-1"),
        ]
        assert await r.transcript(TARGET) == [
            ("user", "hello"),
            ("user", "ping"),
            ("assistant", "initial"),
            ("user", "pong-1"),
            ("assistant", "pong-2"),
            ("user", ANNOUNCE_MESSAGE),
            ("assistant", "announce now"),
        ]


# The exchange's own events. ---------------------------------------------------------


async def test_exchange_events_ping_pong_to_the_limit_then_delivered(
    store_url: str, clock: VirtualClock
) -> None:
    async with d2(store_url, clock) as r:
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.exchange_events() == [
            "ExchangeOpened",
            "RoundOneReplied",
            "PingPongTurn",
            "PingPongTurn",
            "LoopEnded",
            "AnnounceRequested",
            "AnnounceReplied",
            "AnnounceDelivered",
            "ExchangeClosed",
        ]


async def test_exchange_events_reply_skip_then_announce_skip(
    store_url: str, clock: VirtualClock
) -> None:
    async with d1(store_url, clock) as r:
        await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.exchange_events() == [
            "ExchangeOpened",
            "RoundOneReplied",
            "PingPongTurn",
            "ReplySkipped",
            "AnnounceRequested",
            "AnnounceReplied",
            "AnnounceSkipped",
            "ExchangeClosed",
        ]


# maxPingPongTurns. -----------------------------------------------------------------

TALKATIVE = [
    {"step": "primary", "reply": "round one"},
    {"step": "reply_back", "session": REQ_KEY, "reply": "requester says {turn}"},
    {"step": "reply_back", "session": TARGET_KEY, "reply": "target says {turn}"},
    {"step": "announce", "reply": "ANNOUNCE_SKIP"},
]


@asynccontextmanager
async def talkative(
    store_url: str, clock: VirtualClock, config: dict[str, Any]
) -> AsyncIterator[Rig]:
    async with rig(store_url, clock, TALKATIVE, config) as r:
        await discord_group(r.gw, REQ)
        await discord_group(r.gw, TARGET)
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        yield r


async def test_zero_turns_goes_straight_to_announce(store_url: str, clock: VirtualClock) -> None:
    async with talkative(store_url, clock, turns(0)) as r:
        assert r.runs() == [
            ("primary", TARGET_KEY, "ping"),
            ("announce", TARGET_KEY, ANNOUNCE_MESSAGE),
        ]
        assert r.exchange_events() == [
            "ExchangeOpened",
            "RoundOneReplied",
            "LoopEnded",
            "AnnounceRequested",
            "AnnounceReplied",
            "AnnounceSkipped",
            "ExchangeClosed",
        ]


async def test_without_turns_the_latest_reply_is_the_round_one_reply(
    store_url: str, clock: VirtualClock
) -> None:
    async with talkative(store_url, clock, turns(0)) as r:
        assert r.contexts("announce") == [
            "Agent-to-agent announce step:\n"
            "Agent 1 (requester) session: discord:group:req.\n"
            "Agent 1 (requester) channel: discord.\n"
            "Agent 2 (target) session: agent:main:discord:group:target.\n"
            "Agent 2 (target) channel: discord.\n"
            "Original request: ping\n"
            "Round 1 reply: round one\n"
            "Latest reply: round one\n"
            'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
            "Any other reply will be posted to the target channel.\n"
            "After this reply, the agent-to-agent conversation is over."
        ]


async def test_seven_turns_clamp_to_five_alternating_from_the_requester(
    store_url: str, clock: VirtualClock
) -> None:
    async with talkative(store_url, clock, turns(7)) as r:
        assert r.runs() == [
            ("primary", TARGET_KEY, "ping"),
            ("reply_back", REQ_KEY, "round one"),
            ("reply_back", TARGET_KEY, "requester says 1"),
            ("reply_back", REQ_KEY, "target says 2"),
            ("reply_back", TARGET_KEY, "requester says 3"),
            ("reply_back", REQ_KEY, "target says 4"),
            ("announce", TARGET_KEY, ANNOUNCE_MESSAGE),
        ]
        first = r.contexts("reply_back")[0]
        assert first is not None
        assert first.splitlines()[2] == "Turn 1 of 5."
        (announce,) = r.contexts("announce")
        assert announce is not None
        assert "\nRound 1 reply: round one\nLatest reply: requester says 5\n" in announce


@pytest.mark.parametrize(
    ("config", "expected_turns", "expected_line"),
    [
        pytest.param(turns(-1), 0, None, id="-1 is 0"),
        pytest.param(turns(2.9), 2, "Turn 1 of 2.", id="2.9 is 2"),
        pytest.param(turns(5), 5, "Turn 1 of 5.", id="5"),
        pytest.param({}, 5, "Turn 1 of 5.", id="unset is 5"),
    ],
)
async def test_max_ping_pong_turns_is_floored_and_clamped(
    store_url: str,
    clock: VirtualClock,
    config: dict[str, Any],
    expected_turns: int,
    expected_line: str | None,
) -> None:
    async with talkative(store_url, clock, config) as r:
        contexts = r.contexts("reply_back")
        assert len(contexts) == expected_turns
        assert [call.turn for call in r.runtime.calls if call.step == "reply_back"] == list(
            range(1, expected_turns + 1)
        )
        if expected_line is not None:
            assert contexts[0] is not None
            assert contexts[0].splitlines()[2] == expected_line
        assert r.contexts("announce") != []


@pytest.mark.parametrize(
    ("requester", "target", "key"),
    [
        pytest.param(REQ, REQ, REQ_KEY, id="group key"),
        pytest.param("main", "main", "agent:main:main", id="main alias"),
        pytest.param("main", "agent:main:main", "agent:main:main", id="alias and canonical key"),
    ],
)
async def test_send_into_own_session_has_no_turns_but_announces(
    store_url: str, clock: VirtualClock, requester: str, target: str, key: str
) -> None:
    async with rig(store_url, clock, TALKATIVE, turns(5)) as r:
        await r.gw.record_message(key, role="user", content="hi", channel="discord")
        await r.send(requester, sessionKey=target, message="note to self", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.runs() == [
            ("primary", key, "note to self"),
            ("announce", key, ANNOUNCE_MESSAGE),
        ]
        assert r.exchange_events()[:3] == ["ExchangeOpened", "RoundOneReplied", "LoopEnded"]


# Skip tokens. ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "is_skip"),
    [
        pytest.param("REPLY_SKIP", True, id="exact"),
        pytest.param("  REPLY_SKIP \n", True, id="padded"),
        pytest.param("REPLY_SKIP.", False, id="with a dot"),
        pytest.param("reply_skip", False, id="lower case"),
    ],
)
async def test_reply_skip_is_exact_after_trimming(
    store_url: str, clock: VirtualClock, token: str, is_skip: bool
) -> None:
    rules = [
        {"step": "primary", "reply": "round one"},
        {"step": "reply_back", "session": REQ_KEY, "reply": token},
        {"step": "reply_back", "session": TARGET_KEY, "reply": "target answers"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
    async with rig(store_url, clock, rules, turns(2)) as r:
        await discord_group(r.gw, REQ)
        await discord_group(r.gw, TARGET)
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        if is_skip:
            assert r.runs() == [
                ("primary", TARGET_KEY, "ping"),
                ("reply_back", REQ_KEY, "round one"),
                ("announce", TARGET_KEY, ANNOUNCE_MESSAGE),
            ]
            assert "ReplySkipped" in r.exchange_events()
        else:
            assert r.runs() == [
                ("primary", TARGET_KEY, "ping"),
                ("reply_back", REQ_KEY, "round one"),
                ("reply_back", TARGET_KEY, token),
                ("announce", TARGET_KEY, ANNOUNCE_MESSAGE),
            ]
            assert "ReplySkipped" not in r.exchange_events()


@pytest.mark.parametrize(
    ("reply", "delivered"),
    [
        pytest.param("ANNOUNCE_SKIP", None, id="exact"),
        pytest.param("  ANNOUNCE_SKIP \n", None, id="padded"),
        pytest.param("ANNOUNCE_SKIP.", "ANNOUNCE_SKIP.", id="with a dot"),
        pytest.param("announce_skip", "announce_skip", id="lower case"),
        pytest.param("  Deploy finished. \n", "Deploy finished.", id="text is trimmed"),
    ],
)
async def test_announce_skip_is_exact_after_trimming(
    store_url: str, clock: VirtualClock, reply: str, delivered: str | None
) -> None:
    rules = [
        {"step": "primary", "reply": "round one"},
        {"step": "announce", "reply": reply},
    ]
    async with rig(store_url, clock, rules, turns(0)) as r:
        await discord_group(r.gw, REQ)
        await discord_group(r.gw, TARGET)
        await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        if delivered is None:
            assert r.delivery.sent == []
            assert "AnnounceSkipped" in r.exchange_events()
        else:
            assert r.sent("channel", "to", "message") == [
                {"channel": "discord", "to": "channel:target", "message": delivered}
            ]
            assert "AnnounceDelivered" in r.exchange_events()


# Announce targets (conformance E). --------------------------------------------------

ANNOUNCING = [
    {"step": "primary", "reply": "round one"},
    {"step": "announce", "reply": "announce now"},
]


async def test_whatsapp_group_announces_on_the_stored_route_with_its_account(
    store_url: str, clock: VirtualClock
) -> None:
    key = "agent:main:whatsapp:group:123@g.us"
    async with rig(store_url, clock, ANNOUNCING, turns(0)) as r:
        await r.gw.record_message(
            key,
            role="user",
            content="hi",
            channel="whatsapp",
            chat_type="group",
            to="123@g.us",
            account_id="work",
        )
        await r.send("main", sessionKey=key, message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.sent() == [
            {
                "channel": "whatsapp",
                "to": "123@g.us",
                "accountId": "work",
                "message": "announce now",
                "sessionKey": key,
            }
        ]


async def test_main_target_without_a_route_runs_the_announce_but_delivers_nothing(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ANNOUNCING, turns(0)) as r:
        await discord_group(r.gw, REQ)
        await r.gw.record_message("main", role="user", content="hi")
        await r.send(REQ, sessionKey="main", message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.runs()[-1] == ("announce", "agent:main:main", ANNOUNCE_MESSAGE)
        assert r.delivery.sent == []
        assert r.exchange_events()[-3:] == [
            "AnnounceReplied",
            "AnnounceSkipped",
            "ExchangeClosed",
        ]


async def test_telegram_topic_announces_to_the_group_without_the_topic(
    store_url: str, clock: VirtualClock
) -> None:
    key = "agent:main:telegram:group:-100123:topic:42"
    async with rig(store_url, clock, ANNOUNCING, turns(0)) as r:
        await r.gw.record_message(key, role="user", content="hi", channel="telegram")
        await r.send("main", sessionKey=key, message="ping", timeoutSeconds=0)
        await r.gw.wait_idle()
        assert r.sent() == [
            {
                "channel": "telegram",
                "to": "group:-100123",
                "accountId": None,
                "message": "announce now",
                "sessionKey": key,
            }
        ]


# Validation order and result shapes. ------------------------------------------------

ECHO = [{"step": "primary", "reply": "got {message}"}]


async def test_session_key_and_label_together_is_an_error(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO) as r:
        await r.gw.record_message("main", role="user", content="hi")
        before = r.event_count()
        result = await r.send(
            "main", sessionKey="main", label="worker", message="hi", timeoutSeconds=0
        )
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "Provide either sessionKey or label (not both).",
        }
        assert is_uuid(result["runId"])
        assert r.event_count() == before


async def test_neither_session_key_nor_label_is_an_error(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO) as r:
        before = r.event_count()
        result = await r.send("main", message="hi", timeoutSeconds=0)
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "Either sessionKey or label is required",
        }
        assert r.event_count() == before


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"sessionKey": "main"}, id="missing"),
        pytest.param({"sessionKey": "main", "message": ""}, id="empty"),
        pytest.param({"sessionKey": "main", "message": "  \n "}, id="whitespace"),
        pytest.param({"sessionKey": "main", "label": "x", "message": ""}, id="before key+label"),
    ],
)
async def test_message_is_required(
    store_url: str, clock: VirtualClock, params: dict[str, Any]
) -> None:
    async with rig(store_url, clock, ECHO) as r:
        await r.gw.record_message("main", role="user", content="hi")
        before = r.event_count()
        result = await r.gw.call_tool("main", "sessions_send", params)
        assert result == {"status": "error", "tool": "sessions_send", "error": "message required"}
        assert r.event_count() == before
        await r.gw.wait_idle()
        assert r.runtime.calls == []


async def test_unknown_key_is_an_error_not_a_new_session(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO) as r:
        before = r.event_count()
        result = await r.send("main", sessionKey="discord:group:nope", message="hi")
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "Session not found: discord:group:nope",
        }
        assert r.event_count() == before


async def test_label_finds_its_session(store_url: str, clock: VirtualClock) -> None:
    rules = [{"step": "primary", "reply": "labeled response"}]
    async with rig(store_url, clock, rules) as r:
        await r.gw.record_message("test-labeled-session", role="user", content="hi")
        await r.gw.patch_session("test-labeled-session", label="my-test-worker")
        result = await r.send(
            "main", label="my-test-worker", message="hello labeled session", timeoutSeconds=5
        )
        assert result == {
            "runId": result["runId"],
            "status": "ok",
            "reply": "labeled response",
            "sessionKey": "agent:main:test-labeled-session",
            "delivery": PENDING,
        }


async def test_unknown_label_is_an_error(store_url: str, clock: VirtualClock) -> None:
    async with rig(store_url, clock, ECHO) as r:
        before = r.event_count()
        result = await r.send("main", label="nonexistent-label", message="hello")
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "No session found with label: nonexistent-label",
        }
        assert r.event_count() == before


async def test_cross_agent_send_is_forbidden_while_a2a_is_disabled(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, a2a(False), visibility="all") as r:
        await r.gw.record_message("agent:other:main", role="user", content="hi")
        before = r.event_count()
        result = await r.send(
            "agent:main:main", sessionKey="agent:other:main", message="hi", timeoutSeconds=0
        )
        assert result == {
            "runId": result["runId"],
            "status": "forbidden",
            "tool": "sessions_send",
            "error": A2A_DISABLED,
            "sessionKey": "agent:other:main",
        }
        await r.gw.wait_idle()
        assert r.events_after(before) == ["AccessRefused"]  # the refusal, as evidence
        assert r.runtime.calls == []


async def test_cross_agent_label_lookup_is_forbidden_while_a2a_is_disabled(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, a2a(False), visibility="all") as r:
        await r.gw.record_message("agent:other:main", role="user", content="hi")
        await r.gw.patch_session("agent:other:main", label="worker")
        before = r.event_count()
        result = await r.send("main", label="worker", agentId="other", message="hi")
        assert result == {
            "runId": result["runId"],
            "status": "forbidden",
            "tool": "sessions_send",
            "error": A2A_DISABLED,
        }
        assert r.events_after(before) == ["AccessRefused"]  # the refusal, as evidence


async def test_cross_agent_send_outside_the_allow_list_is_denied(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, a2a(True, ["main"]), visibility="all") as r:
        await r.gw.record_message("agent:other:main", role="user", content="hi")
        before = r.event_count()
        result = await r.send("main", sessionKey="agent:other:main", message="hi")
        assert result == {
            "runId": result["runId"],
            "status": "forbidden",
            "tool": "sessions_send",
            "error": A2A_DENIED,
            "sessionKey": "agent:other:main",
        }
        assert r.events_after(before) == ["AccessRefused"]  # the refusal, as evidence


async def test_cross_agent_send_inside_the_allow_list_runs(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, a2a(True, ["main", "oth*"]), visibility="all") as r:
        await r.gw.record_message("agent:other:main", role="user", content="hi")
        result = await r.send("main", sessionKey="agent:other:main", message="hi", timeoutSeconds=5)
        assert result == {
            "runId": result["runId"],
            "status": "ok",
            "reply": "got hi",
            "sessionKey": "agent:other:main",
            "delivery": PENDING,
        }


async def test_session_id_names_the_target(store_url: str, clock: VirtualClock) -> None:
    async with rig(store_url, clock, ECHO, turns(0)) as r:
        opened = await r.gw.record_message(
            "discord:channel:123", role="user", content="hi", channel="discord"
        )
        result = await r.send(
            "main", sessionKey=opened["sessionId"], message="ping", timeoutSeconds=0
        )
        assert result == {
            "runId": result["runId"],
            "status": "accepted",
            "sessionKey": "agent:main:discord:channel:123",
            "delivery": PENDING,
        }
        await r.gw.wait_idle()
        assert r.runs()[0] == ("primary", "agent:main:discord:channel:123", "ping")


# Waiting, reply extraction and per-session runs. -------------------------------------


async def test_reply_drops_thinking(store_url: str, clock: VirtualClock) -> None:
    rules = [{"step": "primary", "reply": "Hi <think>secret</think>there"}]
    async with rig(store_url, clock, rules, turns(0)) as r:
        await r.gw.record_message("main", role="user", content="hi")
        result = await r.send("main", sessionKey="main", message="hello", timeoutSeconds=5)
        assert result["status"] == "ok"
        assert result["reply"] == "Hi there"


@pytest.mark.parametrize("timeout", [0, 0.9, -3])
async def test_timeout_below_one_second_is_fire_and_forget(
    store_url: str, clock: VirtualClock, timeout: float
) -> None:
    async with rig(store_url, clock, ECHO, turns(0)) as r:
        await r.gw.record_message("main", role="user", content="hi")
        result = await r.send("main", sessionKey="main", message="hi", timeoutSeconds=timeout)
        assert result == {
            "runId": result["runId"],
            "status": "accepted",
            "sessionKey": "main",
            "delivery": PENDING,
        }


async def test_wait_defaults_to_thirty_seconds(store_url: str, clock: VirtualClock) -> None:
    rules = [{"step": "primary", "reply": "late", "delaySeconds": 60}]
    async with rig(store_url, clock, rules, turns(0)) as r:
        await r.gw.record_message("main", role="user", content="hi")
        call = asyncio.create_task(r.send("main", sessionKey="main", message="hi"))
        await clock.advance(29)
        assert not call.done()
        await clock.advance(1)
        assert call.done()
        assert (await call)["status"] == "timeout"


async def test_failed_primary_run_is_an_error_and_no_exchange_follows(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [{"step": "primary", "fail": "tool crashed"}, {"reply": "should not run"}]
    async with rig(store_url, clock, rules) as r:
        await discord_group(r.gw, REQ)
        await discord_group(r.gw, TARGET)
        result = await r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=5)
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "tool crashed",
            "sessionKey": TARGET_KEY,
        }
        await r.gw.wait_idle()
        assert [step for step, _, _ in r.runs()] == ["primary"]
        assert r.exchange_events() == ["ExchangeOpened", "RoundOneReplied", "ExchangeClosed"]


async def test_timed_out_wait_still_gets_its_exchange_when_the_run_ends(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "primary", "reply": "slow answer", "delaySeconds": 10},
        {"step": "announce", "reply": "announce now"},
    ]
    async with rig(store_url, clock, rules, turns(0)) as r:
        await discord_group(r.gw, REQ)
        await discord_group(r.gw, TARGET)
        call = asyncio.create_task(r.send(REQ, sessionKey=TARGET, message="ping", timeoutSeconds=3))
        await clock.advance(3)
        result = await call
        assert {k: v for k, v in result.items() if k != "error"} == {
            "runId": result["runId"],
            "status": "timeout",
            "sessionKey": TARGET_KEY,
            "delivery": PENDING,
        }
        assert result["error"].startswith("no reply within 3s")
        assert r.delivery.sent == []
        await clock.advance(7)
        await r.gw.wait_idle()
        assert r.runs() == [
            ("primary", TARGET_KEY, "ping"),
            ("announce", TARGET_KEY, ANNOUNCE_MESSAGE),
        ]
        assert r.sent("to", "message") == [{"to": "channel:target", "message": "announce now"}]


async def test_a_slow_exchange_does_not_delay_other_sessions(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "primary", "match": "slow", "reply": "finally", "delaySeconds": 100},
        {"step": "primary", "reply": "quick"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
    async with rig(store_url, clock, rules, turns(0)) as r:
        for key in ("discord:group:a", "discord:group:b", "discord:group:c", "discord:group:d"):
            await discord_group(r.gw, key)
        slow = await r.send(
            "discord:group:a", sessionKey="discord:group:b", message="slow", timeoutSeconds=0
        )
        assert slow["status"] == "accepted"
        fast = asyncio.create_task(
            r.send(
                "discord:group:c", sessionKey="discord:group:d", message="fast", timeoutSeconds=5
            )
        )
        await clock.advance(0)
        assert fast.done()
        assert (await fast)["reply"] == "quick"
        assert ("primary", "agent:main:discord:group:b", "slow") in r.runs()
        assert clock.now() == START


# agentId alone, thread keys (decision 29) ---------------------------------------------

A2A_OPS = {"tools": {"agentToAgent": {"enabled": True, "allow": ["main", "ops"]}}}


async def test_agent_id_alone_targets_that_agents_main_session(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, A2A_OPS, visibility="all") as r:
        await r.gw.record_message("agent:ops:main", role="user", content="hi")
        await r.gw.record_message("agent:ops:discord:group:x", role="user", content="hi")
        result = await r.send("main", agentId="Ops", message="status?", timeoutSeconds=1)
        assert result == {
            "runId": result["runId"],
            "status": "ok",
            "reply": "got status?",
            "sessionKey": "agent:ops:main",
            "delivery": PENDING,
        }
        assert r.runs()[0][:2] == ("primary", "agent:ops:main")


async def test_agent_id_alone_goes_through_the_agent_to_agent_policy(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, visibility="all") as r:
        await r.gw.record_message("agent:ops:main", role="user", content="hi")
        before = r.event_count()
        result = await r.send("main", agentId="ops", message="hi", timeoutSeconds=0)
        assert (result["status"], result["error"]) == ("forbidden", A2A_DISABLED)
        assert r.events_after(before) == ["AccessRefused"]


async def test_agent_id_alone_of_an_agent_without_a_main_session_is_not_found(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, ECHO, A2A_OPS, visibility="all") as r:
        result = await r.send("main", agentId="ops", message="hi", timeoutSeconds=0)
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": "Session not found: agent:ops:main",
        }


@pytest.mark.parametrize(
    "key",
    [
        "agent:main:slack:channel:c1:thread:1712345.000100",
        "slack:channel:c1:thread:42",
        "AGENT:Main:Discord:Channel:C1:Thread:7",
    ],
)
async def test_a_thread_key_is_refused_with_a_clear_error(
    store_url: str, clock: VirtualClock, key: str
) -> None:
    async with rig(store_url, clock, ECHO) as r:
        await r.gw.record_message(key, role="user", content="hi")
        before = r.event_count()
        result = await r.send("main", sessionKey=key, message="hi", timeoutSeconds=0)
        assert result == {
            "runId": result["runId"],
            "status": "error",
            "tool": "sessions_send",
            "error": (
                f"sessions_send cannot target a thread session ({key}) for inter-agent "
                "coordination; use the parent channel session key instead"
            ),
        }
        assert r.event_count() == before
        assert r.runs() == []
        # The parent channel's session takes the send.
        parent = key.lower().rsplit(":thread:", 1)[0]
        await r.gw.record_message(parent, role="user", content="hi")
        sent = await r.send("main", sessionKey=parent, message="hi", timeoutSeconds=0)
        assert sent["status"] == "accepted"
