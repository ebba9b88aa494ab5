"""The ``subagents`` tool (issue 25 item 4): list, cancel and steer the runs of the
caller's own spawn tree, and ``session_status`` for the caller's own session. On every
store, on a VirtualClock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID, uuid4

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"
OTHER = "agent:main:work:other"
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}


class Children(AgentRuntime):
    """A sub-agent's task works ``work`` seconds on the gateway clock, then reads its
    newest transcript lines and answers with every steer it found there."""

    def __init__(self, work: float = 60) -> None:
        self.work = work
        self.seen: dict[str, list[str]] = {}
        self.cancelled: list[str] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "primary":
            return RunReply(text="ok", usage={"input": 2, "output": 1})
        if request.step != "subagent_task":
            return RunReply(text="ANNOUNCE_SKIP" if "announce" in request.step else "ok")
        try:
            await request.clock.sleep(self.work)
        except asyncio.CancelledError:
            self.cancelled.append(request.run_id)
            raise
        lines = await request.transcript(10)
        steers = [
            block["text"]
            for line in lines
            if line["role"] == "user" and line.get("provenance", {}).get("kind") == "a2a"
            for block in line["content"]
            if block["text"] != request.message
        ]
        self.seen[request.run_id] = steers
        return RunReply(
            text="done; steered: " + " | ".join(steers), usage={"input": 7, "output": 3}
        )


@pytest.fixture
async def opened(store_url: str, clock: VirtualClock) -> AsyncIterator[tuple[Gateway, Children]]:
    agents = Children()
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(QUIET)),
        store=store_url,
        clock=clock,
        runtime=agents,
    )
    for key in (MAIN, OTHER):
        await gw.record_message(key, role="user", content="hi")
    yield gw, agents
    await gw.close()


async def spawn(gw: Gateway, requester: str, task: str, label: str | None = None) -> str:
    params: dict[str, Any] = {"task": task}
    if label:
        params["label"] = label
    result = await gw.call_tool(requester, "sessions_spawn", params)
    assert result["status"] == "accepted", result
    return str(result["runId"])


def event_names(gw: Gateway, run_id: str) -> list[str]:
    return [type(event).__name__ for event in store_of(gw).stream(UUID(run_id))]


async def test_list_shows_the_callers_own_children_only(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, _ = opened
    first = await spawn(gw, MAIN, "dig the logs", label="logs")
    second = await spawn(gw, MAIN, "read the docs")
    theirs = await spawn(gw, OTHER, "their own work")
    await clock.advance(1)

    listed = await gw.call_tool(MAIN, "subagents", {})

    assert listed["status"] == "ok"
    assert listed["action"] == "list"
    assert listed["requesterSessionKey"] == "main"
    assert listed["total"] == 2
    assert {row["runId"] for row in listed["active"]} == {first, second}
    assert listed["recent"] == []
    row = next(row for row in listed["active"] if row["runId"] == first)
    assert row["label"] == "logs"
    assert row["task"] == "dig the logs"
    assert row["status"] == "running"
    assert row["depth"] == 1
    assert row["parentSessionKey"] == MAIN
    other = await gw.call_tool(OTHER, "subagents", {"action": "list"})
    assert [row["runId"] for row in other["active"]] == [theirs]

    await clock.advance(61)
    await gw.wait_idle()
    done = await gw.call_tool(MAIN, "subagents", {})
    assert done["active"] == []
    assert {row["runId"] for row in done["recent"]} == {first, second}
    assert all(row["status"] == "ok" and row["runtimeMs"] == 60_000 for row in done["recent"])
    # Ended longer ago than recentMinutes: no longer recent.
    await clock.advance(31 * 60)
    assert (await gw.call_tool(MAIN, "subagents", {}))["recent"] == []
    assert len((await gw.call_tool(MAIN, "subagents", {"recentMinutes": 60}))["recent"]) == 2


async def test_cancel_by_run_id_session_key_label_and_all(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, agents = opened
    by_id = await spawn(gw, MAIN, "one")
    by_label = await spawn(gw, MAIN, "two", label="two")
    rest = [await spawn(gw, MAIN, "three"), await spawn(gw, MAIN, "four")]
    await clock.advance(1)

    one = await gw.call_tool(MAIN, "subagents", {"action": "cancel", "target": by_id})
    assert one["status"] == "ok"
    assert one["action"] == "cancel"
    assert one["runs"] == [
        {
            "runId": by_id,
            "sessionKey": one["runs"][0]["sessionKey"],
            "cancelled": True,
            "cascaded": [],
        }
    ]
    two = await gw.call_tool(
        MAIN, "subagents", {"action": "kill", "target": "two", "reason": "not needed"}
    )
    assert [(r["runId"], r["cancelled"]) for r in two["runs"]] == [(by_label, True)]
    every = await gw.call_tool(MAIN, "subagents", {"action": "cancel", "target": "all"})
    assert sorted(r["runId"] for r in every["runs"]) == sorted(rest)
    await gw.wait_idle()

    for run_id in (by_id, by_label, *rest):
        found = await gw.run(run_id)
        assert found is not None
        assert found["status"] == "cancelled"
        assert event_names(gw, run_id).count("RunCancelled") == 1
    assert (await gw.run(by_label) or {})["error"] == "run cancelled: not needed"
    assert sorted(agents.cancelled) == sorted([by_id, by_label, *rest])
    again = await gw.call_tool(MAIN, "subagents", {"action": "cancel", "target": by_id})
    assert again["runs"][0]["cancelled"] is False
    assert again["runs"][0]["reason"] == "the run had already ended (cancelled)"


async def test_another_sessions_child_is_answered_as_absent(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, _ = opened
    theirs = await spawn(gw, OTHER, "their own work", label="theirs")
    await clock.advance(1)
    missing = str(uuid4())

    for action, extra in (("cancel", {}), ("steer", {"message": "stop"})):
        hidden = await gw.call_tool(
            MAIN, "subagents", {"action": action, "target": theirs, **extra}
        )
        absent = await gw.call_tool(
            MAIN, "subagents", {"action": action, "target": missing, **extra}
        )
        assert hidden["status"] == absent["status"] == "error"
        assert hidden["error"].replace(theirs, "X") == absent["error"].replace(missing, "X")
        by_label = await gw.call_tool(
            MAIN, "subagents", {"action": action, "target": "theirs", **extra}
        )
        assert by_label["status"] == "error"
        assert "spawn tree" in by_label["error"]
    found = await gw.run(theirs)
    assert found is not None
    assert found["status"] == "running"
    assert "RunSteered" not in event_names(gw, theirs)


async def test_steer_reaches_the_running_child_at_its_next_step(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, agents = opened
    child = await spawn(gw, MAIN, "summarise the deploy", label="deploy")
    await clock.advance(10)

    steered = await gw.call_tool(
        MAIN, "subagents", {"action": "steer", "target": "deploy", "message": "focus on errors"}
    )
    assert steered == {
        "status": "ok",
        "action": "steer",
        "target": "deploy",
        "runId": child,
        "sessionKey": steered["sessionKey"],
        "steers": 1,
    }
    assert event_names(gw, child)[-1] == "RunSteered"
    history = await gw.call_tool(MAIN, "sessions_history", {"sessionKey": steered["sessionKey"]})
    line = history["messages"][-1]
    assert line["content"][0]["text"] == "focus on errors"
    assert line["provenance"]["kind"] == "a2a"
    assert line["provenance"]["sessionKey"] == MAIN

    await clock.advance(60)
    await gw.wait_idle()
    assert agents.seen[child] == ["focus on errors"]
    found = await gw.run(child)
    assert found is not None
    assert found["status"] == "ok"


async def test_a_steer_into_an_ended_run_is_a_clear_error_and_records_nothing(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, _ = opened
    child = await spawn(gw, MAIN, "quick")
    await clock.advance(61)
    await gw.wait_idle()
    before = event_names(gw, child)

    late = await gw.call_tool(
        MAIN, "subagents", {"action": "steer", "target": child, "message": "too late"}
    )

    assert late == {
        "status": "error",
        "tool": "subagents",
        "error": (
            f"run {child} has already ended (ok): a steer reaches only a queued or running run"
        ),
    }
    assert event_names(gw, child) == before


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"action": "steer", "target": "x"}, "message required for action steer"),
        ({"action": "cancel"}, "target required for action cancel"),
        ({"action": "explode"}, "action must be one of list, cancel, steer, not 'explode'"),
        ({"action": "list", "message": "hi"}, "message is only for action steer"),
        ({"action": "steer", "target": "all", "message": "hi"}, "steer takes one target, not all"),
        ({"recentMinutes": "5"}, "recentMinutes must be a number"),
    ],
)
async def test_bad_parameters_are_clear_errors(
    opened: tuple[Gateway, Children], params: dict[str, Any], error: str
) -> None:
    gw, _ = opened
    assert await gw.call_tool(MAIN, "subagents", params) == {
        "status": "error",
        "tool": "subagents",
        "error": error,
    }


async def test_sub_agents_may_not_use_subagents_or_session_status(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, _ = opened
    await spawn(gw, MAIN, "work")
    await clock.advance(1)
    child_key = (await gw.call_tool(MAIN, "subagents", {}))["active"][0]["sessionKey"]
    for tool in ("subagents", "session_status"):
        refused = await gw.call_tool(child_key, tool, {})
        assert refused["status"] == "forbidden", refused


async def test_session_status_shows_the_run_in_flight_children_and_usage(
    opened: tuple[Gateway, Children], clock: VirtualClock
) -> None:
    gw, _ = opened
    child = await spawn(gw, MAIN, "work", label="w")
    await clock.advance(1)

    status = await gw.call_tool(MAIN, "session_status", {})
    assert status["status"] == "ok"
    assert status["sessionKey"] == "main"
    assert status["key"] == MAIN
    assert status["agentId"] == "main"
    assert status["currentRun"] is None
    assert status["queuedRuns"] == 0
    assert [(c["runId"], c["status"], c["label"]) for c in status["children"]] == [
        (child, "running", "w")
    ]
    assert "budget" not in status
    assert await gw.call_tool(MAIN, "session_status", {"sessionKey": "current"}) == status
    assert await gw.call_tool(MAIN, "session_status", {"sessionKey": "main"}) == status

    assert status["usage"] == {"runs": 0, "input": 0, "output": 0, "totalTokens": 0, "cost": 0}

    await clock.advance(60)
    await gw.wait_idle()
    sent = await gw.call_tool(OTHER, "sessions_send", {"sessionKey": MAIN, "message": "ping"})
    assert sent["status"] == "ok"
    await gw.wait_idle()
    after = await gw.call_tool(MAIN, "session_status", {})
    assert after["children"][0]["status"] == "ok"
    assert after["children"][0]["usage"]["input"] == 7
    assert after["children"][0]["usage"]["output"] == 3
    # The primary run and the announce step ran in main; the primary's usage counts.
    assert after["usage"] == {"runs": 2, "input": 2, "output": 1, "totalTokens": 3, "cost": 0}


async def test_session_status_reports_the_calling_session_only(
    opened: tuple[Gateway, Children],
) -> None:
    gw, _ = opened
    other = await gw.call_tool(MAIN, "session_status", {"sessionKey": OTHER})
    assert other == {
        "status": "error",
        "tool": "session_status",
        "error": (
            'session_status reports the calling session only (omit sessionKey, or pass "current")'
        ),
    }
    unknown = await gw.call_tool("agent:main:never", "session_status", {})
    assert unknown == {
        "status": "error",
        "tool": "session_status",
        "error": "Session not found: agent:main:never",
    }


async def test_a_queued_child_is_steered_and_reads_it_when_it_starts(
    store_url: str, clock: VirtualClock
) -> None:
    """maxConcurrent 1: the second child waits for the lane (queued) while the first
    works; a steer into it is recorded, and it reads the message once it runs."""
    agents = Children()
    settings = GatewayConfig.load(
        before_scopes({**QUIET, "agents": {"defaults": {"maxConcurrent": 1}}})
    )
    gw = await Gateway.open(config=settings, store=store_url, clock=clock, runtime=agents)
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        first = await spawn(gw, MAIN, "first")
        second = await spawn(gw, MAIN, "second")
        await clock.advance(1)
        assert (await gw.run(second) or {})["status"] == "queued"

        steered = await gw.call_tool(
            MAIN, "subagents", {"action": "steer", "target": second, "message": "use cache"}
        )
        assert steered["status"] == "ok"
        await clock.advance(61)
        await clock.advance(61)
        await gw.wait_idle()
        ended = [await gw.run(run_id) for run_id in (first, second)]
    finally:
        await gw.close()

    assert [run["status"] if run else None for run in ended] == ["ok", "ok"]
    assert agents.seen[first] == []
    assert agents.seen[second] == ["use cache"]
