"""How many commits one orchestration step takes (issue 38 item 4, ADR 0057).

An exchange's run steps, turn records and messages are saved together: a process
manager's step on a run's end (the exchange's reply, its loop's end, the start of its
announce run, and its dispatch when it runs in the same session; a spawn's child
outcome, with the start and dispatch of its announce run in the child's session)
commits with that end, not in saves of its own.
Counted here per store transaction the gateway asks for (each one commit: one step's
saves come one after another, so nothing groups them), on every store.

Before ADR 0057 one ``sessions_send`` exchange (no ping-pong, announce skipped) was 10
commits, one spawn 9; now 4 and 5.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MAIN = "agent:main:main"
SCRIPT = {
    "rules": [
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "reply_back", "reply": "pong {turn}"},
        {"step": "subagent_task", "reply": "done: {message}"},
        {"step": "subagent_announce", "reply": "Result: done\nNotes: none"},
        {"step": "yield_wake", "reply": "woken and done"},
        {
            "step": "primary",
            "session": MAIN,
            "match": "^yield",
            "tools": [
                {"tool": "sessions_spawn", "params": {"task": "fast one"}},
                {"tool": "sessions_yield", "params": {}},
            ],
        },
        {"reply": "done: {message}"},
    ]
}


class Commits:
    """The store transactions the gateway asks for, each with its aggregates' events."""

    def __init__(self, gateway: Gateway) -> None:
        self.saves: list[list[str]] = []
        store = store_of(gateway)
        in_place, handed = store.save, store.save_async

        def named(aggregates: tuple[Any, ...]) -> list[str]:
            return [type(e).__name__ for a in aggregates for e in a.pending_events]

        def save(*aggregates: Any) -> None:
            if store.writer is None:
                self.saves.append(named(aggregates))
            in_place(*aggregates)

        async def save_async(*aggregates: Any) -> None:
            if store.writer is not None:
                self.saves.append(named(aggregates))
            await handed(*aggregates)  # without a writer: ``save`` above, counted there

        store.save = save  # type: ignore[method-assign]
        store.save_async = save_async  # type: ignore[method-assign]

    def with_event(self, name: str) -> list[str]:
        (found,) = [saved for saved in self.saves if name in saved]
        return found


@asynccontextmanager
async def opened(store_url: str, config: dict[str, Any]) -> AsyncIterator[Gateway]:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)),
        store=store_url,
        clock=VirtualClock(start=START),
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        delivery=CapturingDelivery(),
    )
    try:
        for key in ("cron:requester", "cron:target", MAIN):
            await gateway.record_message(key, role="user", content="hi", channel="webchat", to="u")
        yield gateway
    finally:
        await gateway.close()


async def counted(gateway: Gateway, act: Callable[[], Any]) -> Commits:
    commits = Commits(gateway)
    await act()
    await gateway.wait_idle()
    return commits


def turns(count: int, **more: Any) -> dict[str, Any]:
    return {"session": {"agentToAgent": {"maxPingPongTurns": count, **more}}}


async def send(gateway: Gateway) -> None:
    result = await gateway.call_tool(
        "cron:requester",
        "sessions_send",
        {"sessionKey": "cron:target", "message": "m", "timeoutSeconds": 30},
    )
    assert result["status"] == "ok", result


async def test_an_exchange_is_four_commits_its_steps_with_the_runs_ends(store_url: str) -> None:
    async with opened(store_url, turns(0)) as gateway:
        commits = await counted(gateway, lambda: send(gateway))
    assert len(commits.saves) == 4, commits.saves
    # The target's reply, the loop's end and the announce run's start and dispatch (in
    # the same session: its actor runs it next, in the same lock hold): one commit.
    assert commits.with_event("RoundOneReplied") == [
        "RunCompleted",
        "MessageAppended",
        "MessageAppended",
        "RunStarted",
        "RunDispatched",
        "RoundOneReplied",
        "LoopEnded",
        "AnnounceRequested",
    ]
    # The announce's reply, its skip and the close: with the announce run's end.
    assert commits.with_event("ExchangeClosed") == [
        "RunCompleted",
        "MessageAppended",
        "AnnounceReplied",
        "AnnounceSkipped",
        "ExchangeClosed",
    ]


async def test_each_ping_pong_turn_starts_in_the_commit_that_ends_the_one_before(
    store_url: str,
) -> None:
    async with opened(store_url, turns(2)) as gateway:
        commits = await counted(gateway, lambda: send(gateway))
    # Start, then per run (primary, two turns, announce) a dispatch and an end that
    # records the exchange's step and starts the next run: 1 + 4 * 2, less the announce's
    # dispatch (in the target's session, as the second turn: dispatched with its end).
    assert len(commits.saves) == 8, commits.saves
    assert sum(saved.count("RunStarted") for saved in commits.saves) == 4
    assert [saved.count("PingPongTurn") for saved in commits.saves if "PingPongTurn" in saved] == [
        1,
        1,
    ]


async def test_with_a_trace_budget_the_next_run_is_admitted_in_a_commit_of_its_own(
    store_url: str,
) -> None:
    # The admission counts the trace's recorded usage, which must hold the reply's: the
    # announce run starts after the reply's commit, not in it.
    async with opened(store_url, turns(0, budget={"maxRuns": 10})) as gateway:
        commits = await counted(gateway, lambda: send(gateway))
    assert len(commits.saves) == 6, commits.saves
    assert "RunStarted" not in commits.with_event("RoundOneReplied")


async def spawn_one(gateway: Gateway) -> None:
    result = await gateway.call_tool("main", "sessions_spawn", {"task": "t"})
    assert result["status"] == "accepted", result


async def test_a_spawn_is_five_commits_the_announce_run_started_with_the_childs_end(
    store_url: str,
) -> None:
    async with opened(store_url, {}) as gateway:
        commits = await counted(gateway, lambda: spawn_one(gateway))
    # The start; the child's dispatch; its end with the spawn's outcome and the announce
    # run's start and dispatch (in the child's session: its actor runs it next, in the
    # same lock hold); the announce's end with its reply; the report.
    assert len(commits.saves) == 5, commits.saves
    assert commits.with_event("SubagentRunEnded") == [
        "RunCompleted",
        "MessageAppended",
        "MessageAppended",
        "RunStarted",
        "RunDispatched",
        "SubagentRunEnded",
        "SubagentAnnounceRequested",
    ]
    assert commits.with_event("SubagentAnnounceReplied") == [
        "RunCompleted",
        "MessageAppended",
        "SubagentAnnounceReplied",
    ]


async def test_with_a_trace_budget_a_spawns_announce_run_is_admitted_after_the_childs_end(
    store_url: str,
) -> None:
    # As an exchange's next run: the admission counts the trace's recorded usage, which
    # must hold the child's, so the announce run starts (and is dispatched) after it.
    config = {"session": {"agentToAgent": {"budget": {"maxRuns": 10}}}}
    async with opened(store_url, config) as gateway:
        commits = await counted(gateway, lambda: spawn_one(gateway))
    assert len(commits.saves) == 7, commits.saves
    assert commits.with_event("SubagentRunEnded") == [
        "RunCompleted",
        "MessageAppended",
        "SubagentRunEnded",
    ]
    assert commits.with_event("SubagentAnnounceRequested") == [
        "RunStarted",
        "SubagentAnnounceRequested",
    ]


async def test_a_yield_and_its_wake(store_url: str) -> None:
    async def ask() -> None:
        await gateway.call_tool(
            "agent:other:main",
            "sessions_send",
            {"sessionKey": MAIN, "message": "yield now", "timeoutSeconds": 0},
        )

    config = {"tools": {"agentToAgent": {"enabled": True, "allow": ["*"]}}, **turns(0)}
    async with opened(store_url, config) as gateway:
        commits = await counted(gateway, ask)
    yielding = [saved for saved in commits.saves if "RunYielded" in saved or "YieldWoken" in saved]
    # The yield is recorded by its tool call (the agent is told it yielded); its wake
    # starts the woken turn in the same commit.
    assert yielding == [["RunYielded"], ["YieldWoken", "RunStarted"]], commits.saves
    # Exchange 3 (no announce: the yielding turn said nothing), the child's
    # spawn 5, the yield 2 and the woken turn's dispatch and end 2.
    assert len(commits.saves) == 12, commits.saves


async def test_a_reaction_that_cannot_read_leaves_the_step_to_the_driver(
    store_url: str, monkeypatch: Any
) -> None:
    # The exchange's read in the reply's commit fails once: the reply commits alone,
    # and the driver, after the run's end, records the step (once) as it always could.
    async with opened(store_url, turns(0)) as gateway:
        service = internals(gateway)
        driver = service.exchanges
        reacting: ContextVar[bool] = ContextVar("reacting", default=False)
        failed: list[UUID] = []

        class ReadFails:
            def __init__(self, store: Any) -> None:
                self._store = store

            def __getattr__(self, name: str) -> Any:
                return getattr(self._store, name)

            async def work(self, aggregate_id: UUID) -> Any:
                if reacting.get() and not failed:
                    failed.append(aggregate_id)
                    raise OSError("the store failed the read (injected)")
                return await self._store.work(aggregate_id)

        async def reaction(uow: Any, run: Any) -> Any:
            token = reacting.set(True)
            try:
                return await driver.record_with_outcome(uow, run)
            finally:
                reacting.reset(token)

        reactions = driver.runs.outcome_reactions
        reactions[reactions.index(driver.record_with_outcome)] = reaction
        monkeypatch.setattr(driver, "store", ReadFails(driver.store))
        commits = await counted(gateway, lambda: send(gateway))
        events = [type(e).__name__ for _, e in store_of(gateway).events()]
    assert len(failed) == 1
    replied = commits.with_event("RoundOneReplied")
    assert "RunCompleted" not in replied  # the driver's commit, after the reply's
    assert events.count("RoundOneReplied") == 1
    assert events.count("AnnounceRequested") == 1
    assert events.count("ExchangeClosed") == 1
    assert len(commits.saves) == 6, commits.saves
