"""agents_list (openclaw-conformance §J)."""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig


async def agents(config: dict[str, Any], requester: str = "main") -> dict[str, Any]:
    gateway = await Gateway.open(config=GatewayConfig.load(config), store="memory")
    try:
        return await gateway.call_tool(requester, "agents_list", {})
    finally:
        await gateway.close()


async def test_no_config_lists_only_the_requester() -> None:
    assert await agents({}) == {
        "requester": "main",
        "allowAny": False,
        "agents": [{"id": "main", "configured": False}],
    }


async def test_allow_listed_configured_agent() -> None:
    result = await agents(
        {
            "agents": {
                "list": [
                    {"id": "main", "name": "Main", "subagents": {"allowAgents": ["research"]}},
                    {"id": "research", "name": "Research"},
                ]
            }
        }
    )
    assert result["agents"] == [
        {"id": "main", "name": "Main", "configured": True},
        {"id": "research", "name": "Research", "configured": True},
    ]


async def test_star_allows_every_configured_agent_requester_first_then_sorted() -> None:
    result = await agents(
        {
            "agents": {
                "list": [
                    {"id": "main", "subagents": {"allowAgents": ["*"]}},
                    {"id": "research"},
                    {"id": "coder"},
                ]
            }
        }
    )
    assert result["allowAny"] is True
    assert [a["id"] for a in result["agents"]] == ["main", "coder", "research"]


async def test_allow_listed_agent_need_not_be_configured() -> None:
    result = await agents(
        {"agents": {"list": [{"id": "main", "subagents": {"allowAgents": ["Research"]}}]}}
    )
    assert result["agents"][1] == {"id": "research", "configured": False}


@pytest.mark.parametrize("requester", ["agent:work:main", "agent:work:cron:x"])
async def test_requester_agent_comes_from_the_key(requester: str) -> None:
    result = await agents({}, requester=requester)
    assert result["requester"] == "work"
