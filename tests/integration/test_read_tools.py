"""The read path (``ReadTools``, what the CLI's ``sessions list``/``history`` and ``agents
list`` answer with, ADR 0036) answers every read call as the gateway does: the same
requester check, sub-agent gate, visibility and refusal records, without a gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.read_composition import open_read_tools
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import VirtualClock

# Sessions see only themselves (visibility "self"), so reads of another are refused.
CONFIG = {"tools": {"sessions": {"visibility": "self"}}}

CALLS: list[tuple[str, str, Any]] = [
    ("main", "sessions_list", {}),
    ("main", "sessions_list", {"messageLimit": 2, "kinds": ["main", "group"]}),
    ("discord:group:dev", "sessions_list", {}),
    ("main", "sessions_history", {"sessionKey": "main"}),
    ("main", "sessions_history", {"sessionKey": "discord:group:dev"}),
    ("main", "sessions_history", {"sessionKey": "nowhere"}),
    ("main", "agents_list", {}),
    ("agent:main:subagent:child", "sessions_list", {}),
    ("agent::", "sessions_list", {}),
    ("main", "sessions_list", {"limit": "many"}),
    ("main", "sessions_spawn", {"task": "not a read"}),
]


def status(answer: dict[str, Any]) -> str:
    return str(answer.get("status"))


def refusals_recorded(gateway: Gateway) -> int:
    return sum(1 for _, e in store_of(gateway).events() if type(e).__name__ == "AccessRefused")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/reads.db"


async def test_the_read_path_answers_as_the_gateway(url: str) -> None:
    config = GatewayConfig.load(CONFIG)
    clock = VirtualClock()
    gateway = await Gateway.open(config=config, store=url, clock=clock)
    try:
        await gateway.record_message("main", role="user", content="hello")
        await gateway.record_message(
            "discord:group:dev", role="user", content="hi", channel="discord", chat_type="group"
        )
        expected = [await gateway.call_tool(r, tool, params) for r, tool, params in CALLS[:-1]]
        by_gateway = refusals_recorded(gateway)
    finally:
        await gateway.close()
    tools = await open_read_tools(config, url, clock=clock)
    try:
        answered = [await tools.call_tool(r, tool, params) for r, tool, params in CALLS[:-1]]
        unknown = await tools.call_tool(*CALLS[-1])
    finally:
        await tools.close()
    assert answered == expected
    # The calls cover every way a read answers: listed, read, refused by visibility, not
    # found, forbidden to a sub-agent, a malformed requester and bad parameters.
    assert {status(a) for a in answered} >= {"None", "forbidden", "error"}
    # Each refusal is kept as evidence by either path: the history of another session,
    # the history of an absent one (hidden is absent, decision 41: the same answer and
    # the same record as a hidden one) and the sub-agent's listing.
    reopened = await Gateway.open(config=config, store=url, clock=clock, resume=False)
    try:
        assert (by_gateway, refusals_recorded(reopened)) == (3, 6)
    finally:
        await reopened.close()
    # Only the read tools are served here.
    assert unknown["status"] == "error"
    assert "unknown tool 'sessions_spawn'" in unknown["error"]
