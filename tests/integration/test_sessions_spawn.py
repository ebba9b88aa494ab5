"""sessions_spawn: a sub-agent in a child session that reports back, then goes away.

Every example runs on the memory, SQLite and PostgreSQL stores, with scripted agents
(ScriptedRuntime), virtual time (VirtualClock) and captured channel posts
(CapturingDelivery). The source document's sessions_spawn section, openclaw-behaviour.md
§8 and §10, conformance §G and §H, with our decisions (contract §5): the announce step
runs in the child and is normalised to Status / Result / Notes plus a stats line (7),
archiving counts from the child run's end and its timer survives a restart (8), deleting
and archiving are events that hide the session from the tools but keep its history (9).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from freezegun import freeze_time
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MINUTE = 60
REQUESTER = "agent:main:main"
ROUTE = {"channel": "whatsapp", "to": "+1555", "account_id": "kev"}
UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
PRICED = {
    "models": {
        "providers": {
            "anthropic": {"models": [{"id": "claude", "cost": {"input": 3, "output": 15}}]}
        }
    }
}
# The full tool set minus the session tools and OpenClaw's other sub-agent denials.
SUBAGENT_TOOLS = (
    "exec",
    "process",
    "read",
    "write",
    "edit",
    "apply_patch",
    "image",
    "browser",
    "web_search",
    "web_fetch",
    "message",
)
SESSION_TOOLS = {"sessions_list", "sessions_history", "sessions_send", "sessions_spawn"}
ACCEPTED_PARAMS = (
    "task, label, agentId, model, thinking, runTimeoutSeconds, timeoutSeconds, cleanup, context"
)
# A child that answers at once, and whose announce step reports in sections.
QUICK = [
    {"step": "subagent_task", "reply": "done"},
    {"step": "subagent_announce", "reply": "Result: all done\nNotes: none"},
]


@dataclass
class Rig:
    gw: Gateway
    runtime: ScriptedRuntime
    delivery: CapturingDelivery
    clock: VirtualClock

    async def spawn(self, requester: str = "main", **params: Any) -> dict[str, Any]:
        return await self.gw.call_tool(requester, "sessions_spawn", params)

    def event_names(self) -> list[str]:
        return [type(event).__name__ for _, event in store_of(self.gw).events()]

    def events(self, name: str) -> list[Any]:
        return [event for _, event in store_of(self.gw).events() if type(event).__name__ == name]

    def event_count(self) -> int:
        return sum(1 for _ in store_of(self.gw).events())

    def session_events(self, key: str) -> list[str]:
        """The names of every event the session ``key`` recorded, in order."""
        opened = next(event for event in self.events("SessionOpened") if event.key == key)
        return [
            type(event).__name__
            for _, event in store_of(self.gw).events()
            if event.originator_id == opened.originator_id
        ]

    async def rows(self, requester: str = "main") -> dict[str, dict[str, Any]]:
        listed = await self.gw.call_tool(requester, "sessions_list", {"limit": 200})
        return {row["key"]: row for row in listed["sessions"]}

    async def row(self, key: str) -> dict[str, Any]:
        return (await self.rows())[key]

    async def transcript(self, key: str) -> list[tuple[str, str]]:
        history = await self.gw.call_tool(
            "main", "sessions_history", {"sessionKey": key, "limit": 1000}
        )
        return [
            (message["role"], "".join(block.get("text", "") for block in message["content"]))
            for message in history["messages"]
        ]

    def sent(self) -> list[dict[str, Any]]:
        keys = ("channel", "to", "accountId", "sessionKey", "message")
        return [{key: item[key] for key in keys} for item in self.delivery.sent]

    def calls(self, step: str) -> list[Any]:
        return [call for call in self.runtime.calls if call.step == step]

    async def settle(self, seconds: float = 0) -> None:
        if seconds:
            await self.clock.advance(seconds)
        await self.gw.wait_idle()

    def stats(
        self,
        row: dict[str, Any],
        *,
        runtime: str = "n/a",
        tokens: str = "tokens n/a",
        cost: str | None = None,
    ) -> str:
        """The stats line the report should end with, built from the child's row."""
        session_id = row["sessionId"]
        parts = [f"runtime {runtime}", tokens]
        if cost is not None:
            parts.append(f"est {cost}")
        parts += [
            f"sessionKey {row['key']}",
            f"sessionId {session_id}",
            f"transcript {store_of(self.gw).location}#{session_id}",
        ]
        return "Stats: " + " • ".join(parts)


def report(status: str, result: str, notes: str, stats: str) -> str:
    return f"Status: {status}\n\nResult:\n{result}\n\nNotes:\n{notes}\n\n{stats}"


class BrokenChannel(CapturingDelivery):
    """A channel that is down: every delivery raises."""

    async def deliver(self, delivery: Any) -> None:
        raise ConnectionError("whatsapp is down")


async def open_gateway(
    store_url: str,
    clock: VirtualClock,
    rules: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    delivery: CapturingDelivery | None = None,
) -> Rig:
    runtime = ScriptedRuntime.from_dict({"rules": rules})
    delivery = delivery or CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load(config or {}),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=delivery,
    )
    return Rig(gw=gw, runtime=runtime, delivery=delivery, clock=clock)


@asynccontextmanager
async def rig(
    store_url: str,
    clock: VirtualClock,
    rules: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    *,
    route: bool = True,
    requester: str = "main",
    delivery: CapturingDelivery | None = None,
) -> AsyncIterator[Rig]:
    """A gateway whose requester session exists (by default with a WhatsApp route)."""
    opened = await open_gateway(
        store_url, clock, QUICK if rules is None else rules, config, delivery
    )
    try:
        await opened.gw.record_message(
            requester, role="user", content="hi", **(ROUTE if route else {})
        )
        yield opened
    finally:
        await opened.gw.close()


def allow_agents(*allowed: str) -> dict[str, Any]:
    return {"agents": {"list": [{"id": "main", "subagents": {"allowAgents": list(allowed)}}]}}


# 1. The accepted result ------------------------------------------------------------------


async def test_accepted_result_has_exactly_status_run_id_and_child_key(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock) as r:
        result = await r.spawn(task="summarise the inbox")

        assert set(result) == {"status", "runId", "childSessionKey"}
        assert result["status"] == "accepted"
        assert re.fullmatch(f"agent:main:subagent:{UUID4}", result["childSessionKey"])
        assert re.fullmatch(UUID4, result["runId"])
        spawned = r.events("SubagentSpawned")
        assert [(e.child_key, e.run_id) for e in spawned] == [
            (result["childSessionKey"], result["runId"])
        ]


async def test_model_applied_is_present_only_when_a_model_resolved(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, config=PRICED) as r:
        without = await r.spawn(task="one")
        with_model = await r.spawn(task="two", model="claude")

        assert "modelApplied" not in without
        assert set(with_model) == {"status", "runId", "childSessionKey", "modelApplied"}
        assert with_model["modelApplied"] is True


async def test_spawn_returns_at_once_while_the_child_still_runs(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 100, "reply": "finally"}]
    async with rig(store_url, clock, rules) as r:
        # The clock never moves here: a spawn that waited for its child would never return.
        result = await asyncio.wait_for(r.spawn(task="slow job"), timeout=30)
        await r.settle()

        assert result["status"] == "accepted"
        assert clock.now() == START
        child = result["childSessionKey"]
        assert [(c.session_key, c.message) for c in r.calls("subagent_task")] == [
            (child, "slow job")
        ]
        assert "SubagentRunEnded" not in r.event_names()
        assert await r.transcript(child) == [("user", "slow job")]
        assert r.sent() == []

        await r.settle(100)

        assert [e.outcome for e in r.events("SubagentRunEnded")] == ["ok"]
        assert await r.transcript(child) == [
            ("user", "slow job"),
            ("assistant", "finally"),
            ("user", "Sub-agent announce step."),
        ]


async def test_child_row_shows_label_and_who_spawned_it(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 100}]
    async with rig(store_url, clock, rules) as r:
        result = await r.spawn(task="digest", label="  my-task  ")

        row = await r.row(result["childSessionKey"])
        assert (row["kind"], row["label"], row["model"], row["thinkingLevel"]) == (
            "other",
            "my-task",
            None,
            None,
        )
        assert r.events("SubagentSpawned")[0].requester_key == REQUESTER


async def test_the_child_run_gets_the_subagent_prompt_and_the_announce_step_runs_in_it(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock) as r:
        result = await r.spawn(task="summarise\n  the   inbox", label="digest")
        await r.settle()

        child = result["childSessionKey"]
        assert [(c.step, c.session_key, c.agent_id, c.message) for c in r.runtime.calls] == [
            ("subagent_task", child, "main", "summarise\n  the   inbox"),
            ("subagent_announce", child, "main", "Sub-agent announce step."),
        ]
        task_run, announce_run = r.runtime.calls
        assert task_run.context is not None
        assert task_run.context.startswith("# Subagent Context\n")
        assert "- You were created to handle: summarise the inbox\n" in task_run.context
        assert task_run.context.endswith(
            "## Session Context\n"
            "- Label: digest\n"
            "- Requester session: agent:main:main.\n"
            "- Requester channel: whatsapp.\n"
            f"- Your session: {child}."
        )
        assert announce_run.context is not None
        assert "ANNOUNCE_SKIP" in announce_run.context


# 2. Allow lists (conformance G) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("allowed", "agent_id", "child_agent"),
    [
        pytest.param(["beta"], "beta", "beta", id="listed"),
        pytest.param(["*"], "beta", "beta", id="star-any"),
        pytest.param(["*"], "anything-at-all", "anything-at-all", id="star-unconfigured"),
        pytest.param(["Research"], "research", "research", id="entries-lower-cased"),
        pytest.param(["beta"], " Beta ", "beta", id="agent-id-normalised"),
        pytest.param([], "MAIN", "main", id="own-agent-needs-no-entry"),
    ],
)
async def test_allowed_agent_ids_spawn_under_that_agent(
    store_url: str, clock: VirtualClock, allowed: list[str], agent_id: str, child_agent: str
) -> None:
    async with rig(store_url, clock, config=allow_agents(*allowed)) as r:
        result = await r.spawn(task="do thing", agentId=agent_id)
        await r.settle()

        assert result["status"] == "accepted"
        assert re.fullmatch(f"agent:{child_agent}:subagent:{UUID4}", result["childSessionKey"])
        assert [(c.agent_id, c.session_key) for c in r.calls("subagent_task")] == [
            (child_agent, result["childSessionKey"])
        ]


@pytest.mark.parametrize(
    ("config", "error"),
    [
        pytest.param(
            allow_agents("alpha"),
            "agentId is not allowed for sessions_spawn (allowed: alpha)",
            id="not-listed",
        ),
        pytest.param(
            allow_agents("gamma", "Alpha"),
            "agentId is not allowed for sessions_spawn (allowed: alpha, gamma)",
            id="two-listed",
        ),
        pytest.param({}, "agentId is not allowed for sessions_spawn (allowed: none)", id="none"),
        pytest.param(
            {
                "agents": {
                    "list": [
                        {"id": "main", "default": True},
                        {"id": "gamma", "subagents": {"allowAgents": ["*"]}},
                    ]
                }
            },
            "agentId is not allowed for sessions_spawn (allowed: none)",
            id="only-another-agents-list",
        ),
    ],
)
async def test_agent_ids_outside_the_allow_list_are_forbidden_and_nothing_is_recorded(
    store_url: str, clock: VirtualClock, config: dict[str, Any], error: str
) -> None:
    async with rig(store_url, clock, config=config) as r:
        before = r.event_count()

        result = await r.spawn(task="do thing", agentId="beta")
        await r.settle()

        assert result == {"status": "forbidden", "tool": "sessions_spawn", "error": error}
        assert r.event_count() == before
        assert list(await r.rows()) == ["main"]
        assert r.runtime.calls == []


# 3. Sub-agents are not allowed session tools ---------------------------------------------


@pytest.mark.parametrize(
    "requester",
    [
        "agent:main:subagent:x",
        "agent:beta:subagent:x",
        "subagent:x",
        " AGENT:Main:SubAgent:x ",
    ],
)
async def test_a_subagent_cannot_spawn(store_url: str, clock: VirtualClock, requester: str) -> None:
    async with rig(store_url, clock, config=allow_agents("*")) as r:
        before = r.event_count()

        result = await r.spawn(requester, task="nested")

        assert result == {
            "status": "forbidden",
            "tool": "sessions_spawn",
            "error": "sessions_spawn is not allowed from sub-agent sessions",
        }
        # Nothing started: the one new event is the refusal, kept as evidence.
        assert r.event_count() == before + 1
        refused = [e for _, e in store_of(r.gw).events()][-1]
        assert (type(refused).__name__, refused.check) == ("AccessRefused", "subagent_tools")  # type: ignore[attr-defined]


async def test_a_spawned_child_cannot_use_any_session_tool(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock) as r:
        child = (await r.spawn(task="look around"))["childSessionKey"]
        await r.settle()
        before = r.event_count()

        results = {
            name: await r.gw.call_tool(child, name, params)
            for name, params in (
                ("sessions_list", {}),
                ("sessions_history", {"sessionKey": "main"}),
                ("sessions_send", {"sessionKey": "main", "message": "psst", "timeoutSeconds": 0}),
                ("agents_list", {}),
                ("sessions_spawn", {"task": "nested"}),
            )
        }

        assert results == {
            "sessions_list": {
                "status": "forbidden",
                "tool": "sessions_list",
                "error": "sessions_list is not available to sub-agent sessions",
            },
            "sessions_history": {
                "status": "forbidden",
                "tool": "sessions_history",
                "error": "sessions_history is not available to sub-agent sessions",
            },
            "sessions_send": {
                "status": "forbidden",
                "tool": "sessions_send",
                "error": "sessions_send is not available to sub-agent sessions",
            },
            "agents_list": {
                "status": "forbidden",
                "tool": "agents_list",
                "error": "agents_list is not available to sub-agent sessions",
            },
            "sessions_spawn": {
                "status": "forbidden",
                "tool": "sessions_spawn",
                "error": "sessions_spawn is not allowed from sub-agent sessions",
            },
        }
        await r.settle()
        # Nothing ran: the only new events are the five refusals, kept as evidence.
        refusals = [e for _, e in store_of(r.gw).events() if type(e).__name__ == "AccessRefused"]
        assert r.event_count() == before + 5
        assert [(e.tool, e.check, e.requester_key) for e in refusals] == [  # type: ignore[attr-defined]
            (name, "subagent_tools", child) for name in results
        ]


@pytest.mark.parametrize(
    ("policy", "tools"),
    [
        # sessions_yield stays: a sub-agent may pause for children of its own (decision 26).
        pytest.param({}, (*SUBAGENT_TOOLS, "sessions_yield"), id="default"),
        pytest.param(
            {"deny": ["exec", "web_*"]},
            (
                "process",
                "read",
                "write",
                "edit",
                "apply_patch",
                "image",
                "browser",
                "message",
                "sessions_yield",
            ),
            id="deny-adds",
        ),
        pytest.param({"deny": ["sessions_yield"]}, SUBAGENT_TOOLS, id="deny-yield"),
        pytest.param(
            {"allow": ["read", "web_*", "sessions_send", "agents_list", "custom_tool"]},
            ("read", "web_search", "web_fetch", "custom_tool"),
            id="allow-only-session-tools-still-denied",
        ),
        pytest.param({"allow": ["read", "write"], "deny": ["write"]}, ("read",), id="deny-wins"),
    ],
)
async def test_runs_in_the_child_are_offered_no_session_tools(
    store_url: str, clock: VirtualClock, policy: dict[str, Any], tools: tuple[str, ...]
) -> None:
    config = {"tools": {"subagents": {"tools": policy}}}
    async with rig(store_url, clock, config=config) as r:
        await r.spawn(task="work")
        await r.settle()

        assert [(c.step, c.tools) for c in r.runtime.calls] == [
            ("subagent_task", tools),
            ("subagent_announce", tools),
        ]
        offered = set(r.runtime.calls[0].tools)
        assert not offered & (SESSION_TOOLS | {"agents_list"})


# 4. Model ---------------------------------------------------------------------------------


async def test_an_unknown_model_is_an_error_and_no_child_is_created(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, config=PRICED) as r:
        before = r.event_count()

        result = await r.spawn(task="t", model="gpt-9")
        await r.settle()

        assert result == {
            "status": "error",
            "tool": "sessions_spawn",
            "error": "invalid model: gpt-9 (configured models: anthropic/claude, claude)",
        }
        assert r.event_count() == before
        assert list(await r.rows()) == ["main"]
        assert r.runtime.calls == []


async def test_any_model_is_unknown_without_a_catalog(store_url: str, clock: VirtualClock) -> None:
    async with rig(store_url, clock) as r:
        result = await r.spawn(task="t", model="claude-haiku-4-5")

        assert result == {
            "status": "error",
            "tool": "sessions_spawn",
            "error": "invalid model: claude-haiku-4-5 (configured models: none configured)",
        }


@pytest.mark.parametrize("model", ["claude", "anthropic/claude", "  claude  "])
async def test_a_catalog_model_is_applied_to_the_child(
    store_url: str, clock: VirtualClock, model: str
) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 100}]
    async with rig(store_url, clock, rules, config=PRICED) as r:
        result = await r.spawn(task="t", model=model, runTimeoutSeconds=1, cleanup="keep")

        assert result["modelApplied"] is True
        assert (await r.row(result["childSessionKey"]))["model"] == model.strip()
        assert r.events("SubagentSpawned")[0].model == model.strip()


@pytest.mark.parametrize(
    ("config", "requester", "params", "model"),
    [
        pytest.param(
            {"agents": {"defaults": {"subagents": {"model": "minimax/MiniMax-M2.1"}}}},
            "main",
            {},
            "minimax/MiniMax-M2.1",
            id="defaults",
        ),
        pytest.param(
            {
                "agents": {
                    "defaults": {
                        "subagents": {
                            "model": {"primary": "minimax/MiniMax-M2.1", "fallbacks": ["x/y"]}
                        }
                    }
                }
            },
            "main",
            {},
            "minimax/MiniMax-M2.1",
            id="defaults-primary-of-object",
        ),
        pytest.param(
            {
                "agents": {
                    "defaults": {"subagents": {"model": "minimax/MiniMax-M2.1"}},
                    "list": [{"id": "research", "subagents": {"model": "opencode/claude"}}],
                }
            },
            "agent:research:main",
            {},
            "opencode/claude",
            id="per-agent-beats-defaults",
        ),
        pytest.param(
            {
                "agents": {
                    "defaults": {"subagents": {"model": "minimax/MiniMax-M2.1"}},
                    "list": [
                        {"id": "main", "default": True},
                        {"id": "research", "subagents": {"model": "opencode/claude"}},
                    ],
                }
            },
            "main",
            {},
            "minimax/MiniMax-M2.1",
            id="another-agents-setting-does-not-apply",
        ),
        pytest.param(
            {
                **PRICED,
                "agents": {"defaults": {"subagents": {"model": "minimax/MiniMax-M2.1"}}},
            },
            "main",
            {"model": "claude"},
            "claude",
            id="parameter-beats-config",
        ),
    ],
)
async def test_configured_subagent_models(
    store_url: str,
    clock: VirtualClock,
    config: dict[str, Any],
    requester: str,
    params: dict[str, Any],
    model: str,
) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 100}]
    async with rig(store_url, clock, rules, config=config, requester=requester) as r:
        result = await r.spawn(requester, task="t", **params)

        assert result["modelApplied"] is True
        rows = await r.rows(requester)
        assert rows[result["childSessionKey"]]["model"] == model


# 5. Thinking and timeouts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("thinking", "level"),
    [("high", "high"), ("ULTRA", "high"), ("on", "low"), ("think", "minimal"), ("off", "off")],
)
async def test_thinking_sets_the_childs_thinking_level(
    store_url: str, clock: VirtualClock, thinking: str, level: str
) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 100}]
    async with rig(store_url, clock, rules) as r:
        result = await r.spawn(task="t", thinking=thinking)

        assert result["status"] == "accepted"
        assert (await r.row(result["childSessionKey"]))["thinkingLevel"] == level


async def test_an_unknown_thinking_level_is_an_error(store_url: str, clock: VirtualClock) -> None:
    async with rig(store_url, clock) as r:
        before = r.event_count()

        result = await r.spawn(task="t", thinking="banana")

        assert result["status"] == "error"
        assert re.match(r"(?i)Invalid thinking level", result["error"])
        assert result == {
            "status": "error",
            "tool": "sessions_spawn",
            "error": 'Invalid thinking level "banana". Use one of: '
            "off, minimal, low, medium, high, xhigh.",
        }
        assert r.event_count() == before


@pytest.mark.parametrize(
    ("params", "outcome", "ended_after"),
    [
        pytest.param({"runTimeoutSeconds": 10}, "timeout", 10, id="runTimeoutSeconds"),
        pytest.param({"timeoutSeconds": 10}, "timeout", 10, id="legacy-timeoutSeconds"),
        pytest.param(
            {"runTimeoutSeconds": 10.9, "timeoutSeconds": 50}, "timeout", 10, id="run-wins-floored"
        ),
        pytest.param(
            {"runTimeoutSeconds": 0, "timeoutSeconds": 10}, "ok", 100, id="zero-is-no-timeout"
        ),
        pytest.param({"runTimeoutSeconds": -5}, "ok", 100, id="negative-is-zero"),
    ],
)
async def test_run_timeouts(
    store_url: str,
    clock: VirtualClock,
    params: dict[str, Any],
    outcome: str,
    ended_after: int,
) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 100, "reply": "late"}]
    async with rig(store_url, clock, rules) as r:
        await r.spawn(task="slow", **params)
        await r.settle(9)
        assert r.events("SubagentRunEnded") == []

        await r.settle(100 - 9)

        ended = r.events("SubagentRunEnded")
        assert [e.outcome for e in ended] == [outcome]
        assert ended[0].ended_at - ended[0].started_at == ended_after * 1000


# 6. The announce -------------------------------------------------------------------------


async def test_a_successful_child_reports_status_result_notes_and_stats(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {
            "step": "subagent_task",
            "delaySeconds": 65,
            "reply": "found them",
            "usage": {"input": 1200, "output": 300},
        },
        {
            "step": "subagent_announce",
            "reply": "Status: failed\n**Result:** found 3 files\n- a.txt\n- b.txt\n"
            "- **Notes:** only /tmp was searched",
        },
    ]
    async with rig(store_url, clock, rules, config=PRICED) as r:
        child = (await r.spawn(task="find files", model="claude"))["childSessionKey"]
        await r.settle(65)

        row = await r.row(child)
        expected = report(
            "ok",
            "found 3 files\n- a.txt\n- b.txt",
            "only /tmp was searched",
            r.stats(
                row,
                runtime="1m5s",
                tokens="tokens 1.5k (in 1.2k / out 300)",
                cost="$0.0081",
            ),
        )
        assert r.sent() == [
            {
                "channel": "whatsapp",
                "to": "+1555",
                "accountId": "kev",
                "sessionKey": REQUESTER,
                "message": expected,
            }
        ]
        assert (await r.transcript("main"))[-1] == ("assistant", expected)
        announced = r.events("SubagentAnnounced")
        assert [(e.message, e.channel, e.to, e.account_id) for e in announced] == [
            (expected, "whatsapp", "+1555", "kev")
        ]


async def test_status_comes_from_the_outcome_not_from_the_childs_words(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "subagent_task", "delaySeconds": 3, "fail": "tool crashed"},
        {"step": "subagent_announce", "reply": "Status: ok\nResult: all good\nNotes: nothing"},
    ]
    async with rig(store_url, clock, rules) as r:
        child = (await r.spawn(task="risky"))["childSessionKey"]
        await r.settle(3)

        row = await r.row(child)
        expected = report(
            "error", "all good", "nothing\n- Error: tool crashed", r.stats(row, runtime="3s")
        )
        assert [item["message"] for item in r.sent()] == [expected]


async def test_a_failing_child_still_announces_its_error(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [{"step": "subagent_task", "fail": "tool crashed"}]  # the announce step says nothing
    async with rig(store_url, clock, rules) as r:
        child = (await r.spawn(task="fail please"))["childSessionKey"]
        await r.settle()

        row = await r.row(child)
        expected = report("error", "(not available)", "- Error: tool crashed", r.stats(row))
        assert [item["message"] for item in r.sent()] == [expected]
        assert (await r.transcript("main"))[-1] == ("assistant", expected)
        assert [(e.outcome, e.error) for e in r.events("SubagentRunEnded")] == [
            ("error", "tool crashed")
        ]


async def test_a_child_past_its_run_timeout_announces_timeout(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "subagent_task", "delaySeconds": 100, "reply": "too late"},
        {"step": "subagent_announce", "reply": "Result: got halfway"},
    ]
    async with rig(store_url, clock, rules) as r:
        child = (await r.spawn(task="slow", runTimeoutSeconds=10))["childSessionKey"]
        await r.settle(10)

        row = await r.row(child)
        expected = report(
            "timeout",
            "got halfway",
            "- Error: run timed out after 10s",
            r.stats(row, runtime="10s"),
        )
        assert [item["message"] for item in r.sent()] == [expected]

        await r.settle(100)  # the abandoned run's late answer is never recorded
        assert len(r.sent()) == 1
        assert ("assistant", "too late") not in await r.transcript(child)


async def test_announce_skip_keeps_it_silent(store_url: str, clock: VirtualClock) -> None:
    rules = [
        {"step": "subagent_task", "reply": "nothing useful"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
    async with rig(store_url, clock, rules) as r:
        await r.spawn(task="quiet")
        await r.settle()

        assert r.sent() == []
        assert [e.reason for e in r.events("AnnounceSkipped")] == ["ANNOUNCE_SKIP"]
        assert r.events("SubagentAnnounced") == []
        assert await r.transcript("main") == [("user", "hi")]


async def test_a_requester_without_a_route_still_gets_the_report_in_its_transcript(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, route=False) as r:
        child = (await r.spawn(task="t"))["childSessionKey"]
        await r.settle()

        row = await r.row(child)
        expected = report("ok", "all done", "none", r.stats(row))
        assert r.sent() == []
        assert await r.transcript("main") == [("user", "hi"), ("assistant", expected)]
        announced = r.events("SubagentAnnounced")
        assert [(e.message, e.channel, e.to) for e in announced] == [(expected, None, None)]


async def test_a_channel_that_fails_still_leaves_the_report_in_the_transcript(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock, delivery=BrokenChannel()) as r:
        child = (await r.spawn(task="t"))["childSessionKey"]
        await r.settle()

        row = await r.row(child)
        expected = report("ok", "all done", "none", r.stats(row))
        assert await r.transcript("main") == [("user", "hi"), ("assistant", expected)]
        announced = r.events("SubagentAnnounced")
        assert [(e.message, e.channel, e.to) for e in announced] == [(expected, None, None)]


# 7. Cleanup and archiving (decisions 8 and 9) ---------------------------------------------


@pytest.mark.parametrize(
    ("announce", "announced", "sent"),
    [
        pytest.param("Result: all done", "SubagentAnnounced", 1, id="announced"),
        pytest.param("ANNOUNCE_SKIP", "AnnounceSkipped", 0, id="skipped"),
    ],
)
async def test_cleanup_delete_removes_the_child_right_after_the_announce(
    store_url: str, clock: VirtualClock, announce: str, announced: str, sent: int
) -> None:
    rules = [
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": announce},
    ]
    async with rig(store_url, clock, rules) as r:
        child = (await r.spawn(task="t", cleanup="delete"))["childSessionKey"]
        await r.settle()

        assert list(await r.rows()) == ["main"]
        assert await r.gw.call_tool("main", "sessions_history", {"sessionKey": child}) == {
            "status": "error",
            "tool": "sessions_history",
            "error": f"Session not found: {child}",
        }
        assert len(r.sent()) == sent
        names = r.event_names()
        assert names.count("SessionDeleted") == 1
        assert names.count("SubagentDeleted") == 1
        assert names.index(announced) < names.index("SessionDeleted")
        assert r.events("SessionDeleted")[0].timestamp == START
        # Its history stays for auditors.
        assert r.session_events(child) == [
            "SessionOpened",
            "MessageAppended",
            "MessageAppended",
            "MessageAppended",
            "MessageAppended",
            "SessionDeleted",
        ]


async def test_cleanup_other_than_delete_keeps_the_child(
    store_url: str, clock: VirtualClock
) -> None:
    async with rig(store_url, clock) as r:
        child = (await r.spawn(task="t", cleanup="bogus"))["childSessionKey"]
        await r.settle()

        assert r.events("SubagentSpawned")[0].cleanup == "keep"
        assert list(await r.rows()) == ["main", child]
        assert "SessionDeleted" not in r.event_names()


async def test_kept_child_is_archived_an_hour_after_its_run_ended(
    store_url: str, clock: VirtualClock
) -> None:
    with freeze_time(START, tick=False):
        rules = [
            {"step": "subagent_task", "delaySeconds": 30, "reply": "done"},
            {"step": "subagent_announce", "reply": "Result: done"},
        ]
        async with rig(store_url, clock, rules) as r:
            child = (await r.spawn(task="t"))["childSessionKey"]
            await r.settle(30)  # the run ends at 12:00:30
            assert len(r.sent()) == 1

            await r.settle(59 * MINUTE)

            assert list(await r.rows()) == ["main", child]
            assert (await r.transcript(child))[0] == ("user", "t")
            assert "SessionArchived" not in r.event_names()

            await r.settle(2 * MINUTE)

            assert list(await r.rows()) == ["main"]
            assert await r.gw.call_tool("main", "sessions_history", {"sessionKey": child}) == {
                "status": "error",
                "tool": "sessions_history",
                "error": f"Session not found: {child}",
            }
            archived = r.events("SessionArchived")
            assert [e.timestamp for e in archived] == [START + timedelta(minutes=60, seconds=30)]
            assert r.event_names().count("SubagentArchived") == 1
            assert r.session_events(child)[-1] == "SessionArchived"
            assert len(r.sent()) == 1


async def test_a_running_child_is_never_archived(store_url: str, clock: VirtualClock) -> None:
    rules = [{"step": "subagent_task", "delaySeconds": 90 * MINUTE, "reply": "at last"}]
    async with rig(store_url, clock, rules) as r:
        # Its own timeout is longer than the default 600 s.
        child = (await r.spawn(task="long job", runTimeoutSeconds=3 * 60 * MINUTE))[
            "childSessionKey"
        ]

        await r.settle(89 * MINUTE)
        assert list(await r.rows()) == ["main", child]
        assert r.sent() == []

        await r.settle(1 * MINUTE)  # the run ends at minute 90
        assert len(r.sent()) == 1

        await r.settle(59 * MINUTE)
        assert list(await r.rows()) == ["main", child]

        await r.settle(2 * MINUTE)
        assert list(await r.rows()) == ["main"]
        assert [e.timestamp for e in r.events("SessionArchived")] == [
            START + timedelta(minutes=150)
        ]


@pytest.mark.parametrize(
    ("minutes", "archived_at"),
    [
        pytest.param(5, 5, id="five"),
        pytest.param(2.7, 2, id="floored"),
        pytest.param(0.2, 1, id="at-least-one"),
    ],
)
async def test_archive_after_minutes_is_configurable(
    store_url: str, clock: VirtualClock, minutes: float, archived_at: int
) -> None:
    config = {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": minutes}}}}
    async with rig(store_url, clock, config=config) as r:
        await r.spawn(task="t")
        await r.settle(10 * MINUTE)

        assert [e.timestamp for e in r.events("SessionArchived")] == [
            START + timedelta(minutes=archived_at)
        ]


@pytest.mark.parametrize("minutes", [0, -1, math.inf])
async def test_archiving_can_be_disabled(
    store_url: str, clock: VirtualClock, minutes: float
) -> None:
    config = {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": minutes}}}}
    async with rig(store_url, clock, config=config) as r:
        child = (await r.spawn(task="t"))["childSessionKey"]
        await r.settle(24 * 60 * MINUTE)

        assert list(await r.rows()) == ["main", child]
        assert "SessionArchived" not in r.event_names()


@pytest.mark.parametrize(
    ("reopen_minute", "archived_minute"),
    [pytest.param(59, 60, id="before-due-waits"), pytest.param(75, 75, id="after-due-at-once")],
)
async def test_the_archive_timer_survives_a_restart(
    store_url: str, reopen_minute: int, archived_minute: int
) -> None:
    if store_url == "memory":
        pytest.skip("a memory store cannot be reopened")
    clock = VirtualClock(start=START)
    first = await open_gateway(store_url, clock, QUICK)
    try:
        await first.gw.record_message("main", role="user", content="hi", **ROUTE)
        child = (await first.spawn(task="t"))["childSessionKey"]
        await first.settle()  # the run ends at once, at minute 0
        await first.settle(59 * MINUTE)
        assert list(await first.rows()) == ["main", child]
    finally:
        await first.gw.close()

    later = VirtualClock(start=START + timedelta(minutes=reopen_minute))
    second = await open_gateway(store_url, later, QUICK)
    try:
        await second.settle()
        if reopen_minute < 60:
            assert list(await second.rows()) == ["main", child]
            await second.settle(2 * MINUTE)

        assert list(await second.rows()) == ["main"]
        assert [e.timestamp for e in second.events("SessionArchived")] == [
            START + timedelta(minutes=archived_minute)
        ]
        assert second.event_names().count("SubagentArchived") == 1
        # Nothing is run or announced again.
        assert second.runtime.calls == []
        assert second.delivery.sent == []
        assert second.event_names().count("SubagentAnnounced") == 1
    finally:
        await second.gw.close()


# 8. Many children at once ------------------------------------------------------------------


async def test_fifty_children_spawned_at_once_each_announce_exactly_once(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "subagent_task", "delaySeconds": 5, "reply": "answer to {message}"},
        {"step": "subagent_announce", "reply": "Result: reported by {session}"},
    ]
    async with rig(store_url, clock, rules) as r:
        results = await asyncio.gather(*(r.spawn(task=f"task {i}") for i in range(50)))
        children = {result["childSessionKey"] for result in results}
        assert {result["status"] for result in results} == {"accepted"}
        assert len(children) == 50

        for _ in range(100):
            if len(r.events("SubagentAnnounced")) == 50:
                break
            await r.settle(5)
        await r.settle(5)

        sent = r.sent()
        assert len(sent) == 50
        assert {(item["channel"], item["to"], item["sessionKey"]) for item in sent} == {
            ("whatsapp", "+1555", REQUESTER)
        }
        reported = [re.search(r"reported by (\S+)", item["message"]) for item in sent]
        assert sorted(match.group(1) for match in reported if match) == sorted(children)
        assert len({item["idempotencyKey"] for item in r.delivery.sent}) == 50
        assert len(r.events("SubagentAnnounced")) == 50
        transcript = await r.transcript("main")
        reports = [text for role, text in transcript if role == "assistant"]
        assert len(reports) == 50
        assert sorted(reports) == sorted(item["message"] for item in sent)


# 9. Bad input -----------------------------------------------------------------------------


def _bad(params: Any, error: str, case: str, *, xfail: str | None = None) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(params, error, id=case, marks=marks)


BAD_INPUT = [
    _bad({}, "task required", "task-missing"),
    _bad({"task": None}, "task required", "task-null"),
    _bad({"task": ""}, "task required", "task-empty"),
    _bad({"task": " \n\t "}, "task required", "task-whitespace"),
    _bad({"task": 42}, "task must be a string", "task-number"),
    _bad({"task": True}, "task must be a string", "task-bool"),
    _bad({"task": ["do", "it"]}, "task must be a string", "task-list"),
    _bad({"task": {"text": "x"}}, "task must be a string", "task-object"),
    _bad(
        {"task": "x" * 1_000_001},
        "task is too long (1000001 characters, max 1000000)",
        "task-over-1M",
    ),
    _bad(
        {"task": "a\ud800b"},
        "task is not valid Unicode text (it contains a lone surrogate)",
        "task-lone-surrogate",
    ),
    _bad({"task": "t", "label": "x" * 65}, "invalid label: too long (max 64)", "label-65"),
    _bad(
        {"task": "t", "label": "x" * 5000},
        "label is too long (5000 characters, max 1024)",
        "label-5000",
    ),
    _bad({"task": "t", "label": 7}, "label must be a string", "label-number"),
    _bad({"task": "t", "label": ["a"]}, "label must be a string", "label-list"),
    _bad(
        {"task": "t", "label": "two\nlines"},
        "invalid label: contains control characters",
        "label-control-character",
    ),
    _bad({"task": "t", "agentId": 7}, "agentId must be a string", "agentId-number"),
    _bad({"task": "t", "agentId": ["beta"]}, "agentId must be a string", "agentId-list"),
    _bad({"task": "t", "model": 7}, "model must be a string", "model-number"),
    _bad({"task": "t", "model": {"primary": "claude"}}, "model must be a string", "model-object"),
    _bad(
        {"task": "t", "model": "gpt-9"},
        "invalid model: gpt-9 (configured models: none configured)",
        "model-unknown",
    ),
    _bad({"task": "t", "thinking": 3}, "thinking must be a string", "thinking-number"),
    _bad(
        {"task": "t", "thinking": "banana"},
        'Invalid thinking level "banana". Use one of: off, minimal, low, medium, high, xhigh.',
        "thinking-unknown",
    ),
    _bad(
        {"task": "t", "runTimeoutSeconds": math.nan},
        "runTimeoutSeconds must be a number, not NaN",
        "runTimeoutSeconds-nan",
    ),
    _bad(
        {"task": "t", "runTimeoutSeconds": "10"},
        "runTimeoutSeconds must be a number",
        "runTimeoutSeconds-string",
    ),
    _bad(
        {"task": "t", "runTimeoutSeconds": True},
        "runTimeoutSeconds must be a number",
        "runTimeoutSeconds-true",
    ),
    _bad(
        {"task": "t", "runTimeoutSeconds": False},
        "runTimeoutSeconds must be a number",
        "runTimeoutSeconds-false",
    ),
    _bad(
        {"task": "t", "runTimeoutSeconds": [10]},
        "runTimeoutSeconds must be a number",
        "runTimeoutSeconds-list",
    ),
    _bad(
        {"task": "t", "timeoutSeconds": math.nan},
        "timeoutSeconds must be a number, not NaN",
        "timeoutSeconds-nan",
    ),
    _bad(
        {"task": "t", "timeoutSeconds": "5"},
        "timeoutSeconds must be a number",
        "timeoutSeconds-string",
    ),
    _bad(
        {"task": "t", "timeoutSeconds": True},
        "timeoutSeconds must be a number",
        "timeoutSeconds-bool",
    ),
    _bad({"task": "t", "cleanup": 1}, "cleanup must be a string", "cleanup-number"),
    _bad({"task": "t", "cleanup": True}, "cleanup must be a string", "cleanup-bool"),
    _bad({"task": "t", "cleanup": ["delete"]}, "cleanup must be a string", "cleanup-list"),
    _bad(
        {"task": "t", "deliver": True},
        f"unknown parameter 'deliver' (accepted: {ACCEPTED_PARAMS})",
        "unknown-deliver",
    ),
    _bad(
        {"task": "t", "channel": "discord"},
        f"unknown parameter 'channel' (accepted: {ACCEPTED_PARAMS})",
        "unknown-channel",
    ),
    _bad(
        {"task": "t", "Task": "t"},
        f"unknown parameter 'Task' (accepted: {ACCEPTED_PARAMS})",
        "unknown-case-variant",
    ),
    _bad("do it", "parameters must be a JSON object", "params-string"),
    _bad(["do it"], "parameters must be a JSON object", "params-list"),
]


@pytest.mark.parametrize(("params", "error"), BAD_INPUT)
async def test_bad_input_is_an_error_envelope_and_writes_nothing(
    store_url: str, clock: VirtualClock, params: Any, error: str
) -> None:
    async with rig(store_url, clock) as r:
        before = r.event_count()

        result = await r.gw.call_tool("main", "sessions_spawn", params)
        await r.settle()

        assert result == {"status": "error", "tool": "sessions_spawn", "error": error}
        assert r.event_count() == before
        assert list(await r.rows()) == ["main"]
        assert r.runtime.calls == []
        assert r.sent() == []


async def test_a_task_of_exactly_the_limit_is_accepted(store_url: str, clock: VirtualClock) -> None:
    async with rig(store_url, clock) as r:
        task = "x" * 1_000_000
        result = await r.spawn(task=f"  {task}  ")
        await r.settle()

        assert result["status"] == "accepted"
        assert [call.message for call in r.calls("subagent_task")] == [task]
        assert [e.outcome for e in r.events("SubagentRunEnded")] == ["ok"]
        assert len(r.sent()) == 1
