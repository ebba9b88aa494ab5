"""Plays a scenario on a gateway whose agents are scripted and whose clock is virtual.

The player records each step, drives simulated time until the step's work has settled
(a tool call that waits on an agent, a sub-agent that takes 95 seconds, an archive due
an hour later) and reports every event the store records, as it is recorded, to a view.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sessionwire.adapters.cli.demo.scenario import (
    AdvanceStep,
    CallStep,
    MessageStep,
    Scenario,
    Step,
)
from sessionwire.adapters.cli.event_lines import EventFeed, EventLine
from sessionwire.adapters.testkit.virtual_clock import VirtualClock
from sessionwire.application.gateway import GatewayService
from sessionwire.application.ports.store import Store
from sessionwire.domain.base import DomainEvent

REFUSED = {"error", "forbidden"}
FOLLOW_EVERY_SECONDS = 0.01
# A call that has nothing scheduled on the clock yet has not returned is waiting on real
# I/O (a database round trip); give it this many short real waits before calling it stuck.
STUCK_AFTER_WAITS = 1000


class DemoView(ABC):
    """What the player tells whoever is watching."""

    @abstractmethod
    def step_started(self, number: int, step: Step, now: datetime) -> None: ...

    @abstractmethod
    def event_recorded(self, line: EventLine) -> None: ...

    @abstractmethod
    def step_finished(self, number: int, step: Step, outcome: StepOutcome) -> None: ...


@dataclass
class StepOutcome:
    kind: str
    result: dict[str, Any] | None = None
    failure: str | None = None

    def to_json(self, number: int, step: Step) -> dict[str, Any]:
        return {
            "step": number,
            "kind": self.kind,
            "note": step.note,
            "result": self.result,
            "failure": self.failure,
        }


@dataclass
class DemoReport:
    outcomes: list[StepOutcome] = field(default_factory=list)
    sessions: dict[str, Any] = field(default_factory=dict)

    @property
    def failure(self) -> str | None:
        return next((o.failure for o in self.outcomes if o.failure), None)


def describe_step(step: Step) -> str:
    """A short title for a step: what it does, not what happens."""
    if step.message is not None:
        return f"message → {step.message.session} ({step.message.role})"
    if step.call is not None:
        return f"{step.call.tool} as {step.call.requester}"
    assert step.advance is not None
    return f"simulated time +{_duration(step.advance.total_seconds)}"


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


class DemoPlayer:
    def __init__(
        self,
        gateway: GatewayService,
        clock: VirtualClock,
        scenario: Scenario,
        view: DemoView,
        *,
        pace_seconds: float = 0,
    ) -> None:
        self.gateway = gateway
        self.clock = clock
        self.scenario = scenario
        self.view = view
        self.pace_seconds = pace_seconds
        self.feed: EventFeed | None = None
        # The follower and the steps both drain the feed: one at a time.
        self._draining = asyncio.Lock()

    async def play(self) -> DemoReport:
        report = DemoReport()
        self.feed = await self.gateway.store.read(EventFeed, self.gateway.rules.display)
        follower = asyncio.create_task(self._follow())
        try:
            for number, step in enumerate(self.scenario.steps, start=1):
                await self._drain()
                self.view.step_started(number, step, self.clock.now())
                outcome = await self._play(step)
                await self.gateway.wait_idle()
                await self._drain()
                if outcome.failure:
                    outcome.failure = f"step {number} ({describe_step(step)}): {outcome.failure}"
                self.view.step_finished(number, step, outcome)
                report.outcomes.append(outcome)
                if outcome.failure:
                    break
                if self.pace_seconds:
                    await asyncio.sleep(self.pace_seconds)
        finally:
            follower.cancel()
            await self._drain()
        report.sessions = await self.gateway.call_tool(
            self.scenario.listAs, "sessions_list", {"messageLimit": 1}
        )
        return report

    async def _play(self, step: Step) -> StepOutcome:
        if step.message is not None:
            return await self._message(step.message)
        if step.call is not None:
            return await self._call(step.call)
        assert step.advance is not None
        return await self._advance(step.advance)

    async def _message(self, step: MessageStep) -> StepOutcome:
        try:
            recorded = await self.gateway.record_message(
                step.session,
                role=step.role,
                content=step.text,
                channel=step.channel,
                chat_type=step.chatType,
                display_name=step.displayName,
                to=step.to,
                account_id=step.accountId,
                label=step.label,
                sender_is_owner=step.owner,
            )
        except ValueError as error:
            return StepOutcome("message", failure=str(error))
        return StepOutcome("message", result=recorded)

    async def _call(self, step: CallStep) -> StepOutcome:
        call = asyncio.create_task(
            self.gateway.call_tool(step.requester, step.tool, dict(step.params))
        )
        # A call may wait on an agent whose reply is scripted for later: move simulated
        # time to each next wake-up until the call returns.
        idle_waits = 0
        while not call.done():
            await self.gateway.wait_idle()
            if call.done():
                break
            due = self.clock.next_wake()
            if due is not None:
                await self.clock.advance(max(timedelta(0), due - self.clock.now()))
                continue
            idle_waits += 1
            if idle_waits > STUCK_AFTER_WAITS:
                call.cancel()
                return StepOutcome("call", failure=f"{step.tool} never returned")
            await asyncio.wait({call}, timeout=FOLLOW_EVERY_SECONDS)
        result = call.result()
        status = result.get("status")
        if step.expect is not None and status != step.expect:
            failure = f"{step.tool} returned {status!r}, the scenario expects {step.expect!r}"
            return StepOutcome("call", result=result, failure=failure)
        if step.expect is None and status in REFUSED:
            return StepOutcome("call", result=result, failure=f"{status}: {result.get('error')}")
        return StepOutcome("call", result=result)

    async def _advance(self, step: AdvanceStep) -> StepOutcome:
        target = self.clock.now() + timedelta(seconds=step.total_seconds)
        # Hop from wake-up to wake-up, letting each one's work settle before the next:
        # a child that finishes on the way sets an archive timer that may fall due too.
        while (due := self.clock.next_wake()) is not None and due <= target:
            await self.clock.advance(max(timedelta(0), due - self.clock.now()))
            await self.gateway.wait_idle()
        await self.clock.advance(target - self.clock.now())
        return StepOutcome("advance", result={"now": self.clock.now().isoformat()})

    async def _follow(self) -> None:
        while True:
            await self._drain()
            await asyncio.sleep(FOLLOW_EVERY_SECONDS)

    async def _drain(self) -> None:
        feed = self.feed
        assert feed is not None, "the feed starts with play()"
        async with self._draining:
            lines = await self.gateway.store.read(lambda _: feed.new_lines())
        for line in lines:
            self.view.event_recorded(line)


async def start_after_the_log(gateway: GatewayService, clock: VirtualClock) -> None:
    """Move the clock past the store's last event, so a replayed demo never goes back
    in time (a second run on the same store starts after the first one's simulated hour)."""

    def last_event(store: Store) -> DomainEvent | None:
        return next((event for _, event in store.events(start=store.log_position())), None)

    last = await gateway.store.read(last_event)
    if last is not None and last.timestamp >= clock.now():
        await clock.advance(last.timestamp - clock.now() + timedelta(seconds=1))
