"""The simulated agents and chat channels, and what they see the gateway do.

``SimulatedAgents`` is an ``AgentRuntime`` that does what the run's plan says: answer,
answer late, fail, hang until its timeout, return garbage, and make nested
``sessions_send`` / ``sessions_spawn`` calls through the gateway from inside its turn
(as an LLM runtime with tools does), including forwarding round a cycle.
``SimulatedChannels`` is a ``ChannelDelivery`` whose channels go down and recover on
the virtual clock and that, like a real channel, drops a repeated idempotency key.

Both belong to one simulated world that outlives gateway processes: a crashed
process's *incarnation* is dead, and a dead process neither runs agents nor posts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sessionwire.adapters.testkit.simulator.scopes import ScopedCall
from sessionwire.adapters.testkit.simulator.script import plan_text, read_plan
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.runtime import (
    AgentRuntime,
    ChannelDelivery,
    Delivery,
    InputRequest,
    RunReply,
    RunRequest,
)


@dataclass
class Incarnation:
    """One gateway process of the simulation; ``dead`` once it crashed."""

    number: int
    dead: bool = False

    def check_alive(self) -> None:
        # A dead process does nothing more: its tasks stop at their next step.
        if self.dead:
            raise asyncio.CancelledError(f"gateway process {self.number} crashed")


@dataclass(frozen=True)
class Observation:
    """Something an agent or a channel saw that breaks an invariant."""

    invariant: str
    detail: str


@dataclass
class Dispatch:
    """One run handed to an agent."""

    run_id: str
    session_key: str
    step: str
    at: datetime
    incarnation: int
    plan_id: int | None


# Long enough that a run's timeout always comes first.
HANG_SECONDS = 10 * 365 * 24 * 3600.0


async def _hang(request: RunRequest) -> None:
    """Never answer: wait on the run's clock until the run's timeout cancels the call
    (a wait on the clock, so the gateway knows the run is not runnable meanwhile)."""
    await request.clock.sleep(HANG_SECONDS)


ToolCaller = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
RunInspector = Callable[[RunRequest], list[Observation]]


class SimulatedAgents(AgentRuntime):
    """Agents that follow the plan in the message that started their run."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.incarnation = Incarnation(0)
        self.call_tool: ToolCaller | None = None
        self.inspect: RunInspector | None = None
        self.dispatches: list[Dispatch] = []
        self.observations: list[Observation] = []
        self.tool_results: list[tuple[str, dict[str, Any]]] = []
        self.scoped_calls: list[ScopedCall] = []
        """Every session tool call made (by an agent or a step), for the visibility check."""
        self.hop_refusals: list[int] = []
        """The depth (by its plan) of each send or spawn refused for the hop limit."""
        self.calling: set[asyncio.Task[Any]] = set()
        """Tasks in a tool call now (a store fault spares them: their caller hears it)."""
        self.after_reply: Callable[[], None] = lambda: None
        """Told as an agent has answered, before the gateway records it (a crash point)."""

    async def run(self, request: RunRequest) -> RunReply:
        reply = await self._run(request)
        self.after_reply()
        return reply

    async def _run(self, request: RunRequest) -> RunReply:
        incarnation = self.incarnation
        incarnation.check_alive()
        plan = _plan_for(request)
        self.dispatches.append(
            Dispatch(
                run_id=request.run_id,
                session_key=request.session_key,
                step=request.step,
                at=self.clock.now(),
                incarnation=incarnation.number,
                plan_id=plan.get("id") if plan else None,
            )
        )
        if self.inspect is not None:
            self.observations.extend(self.inspect(request))
        if plan is None:
            return RunReply(text="(nothing to do)")
        if request.step in ("primary", "subagent_task"):
            return await self._task(request, plan, incarnation)
        if request.step == "reply_back":
            if (request.turn or 0) > int(plan.get("pp", 0)):
                return RunReply(text="REPLY_SKIP")
            return RunReply(text=f"turn {request.turn} {plan_text(plan)}")
        return await self._announce(request, plan)

    async def _task(
        self, request: RunRequest, plan: dict[str, Any], incarnation: Incarnation
    ) -> RunReply:
        delay = float(plan.get("delay", 0))
        if delay > 0:
            await self.clock.sleep(delay)
        for call in plan.get("calls", []):
            await self._nested(request, call, incarnation)
        if plan.get("yield") in ("all", "any"):
            # The turn ends after it (sessions_yield); a wake turn follows, once.
            await self._call(request, "sessions_yield", {"waitFor": plan["yield"]}, incarnation)
            return RunReply(text=f"yielded {plan_text(plan)}")
        if "cycle" in plan:
            await self._forward(request, plan, incarnation)
        ask = plan.get("ask")
        if isinstance(ask, dict):
            # The turn stops to ask (decision 33); the answer is the next turn's message,
            # itself a plan (the script writes it), so the resumed turn is read like any.
            return RunReply(
                input_request=InputRequest(prompt=str(ask["prompt"]), options=ask.get("options")),
                usage={"input": 3, "output": 2},
            )
        kind = plan.get("kind", "ok")
        if kind == "fail":
            raise RuntimeError(f"simulated failure (plan {plan.get('id')})")
        if kind == "hang":
            await _hang(request)
        if kind == "garbage":
            garbage: Any = [42, {"text": "not a reply"}, RunReply(text=7)]  # type: ignore[arg-type]
            return garbage[int(plan.get("id", 0)) % len(garbage)]  # type: ignore[no-any-return]
        if kind == "empty":
            return RunReply(text="")
        return RunReply(
            text=f"done {plan_text(plan)}", usage={"input": 10, "output": 5}, model="sim-1"
        )

    async def _announce(self, request: RunRequest, plan: dict[str, Any]) -> RunReply:
        mode = plan.get("ann", "say")
        if mode == "skip":
            return RunReply(text="ANNOUNCE_SKIP")
        if mode == "fail":
            raise RuntimeError(f"simulated announce failure (plan {plan.get('id')})")
        if mode == "hang":
            await _hang(request)
        # Names its run: the channel tells whose announce or report a post is, whatever
        # key it came with (idempotency per owner, not per key).
        return RunReply(
            text=f"Result: plan {plan.get('id')} done (announce {request.run_id})\nNotes: none"
        )

    async def _nested(
        self, request: RunRequest, call: dict[str, Any], incarnation: Incarnation
    ) -> None:
        plan = call.get("plan", {})
        if call.get("tool") == "spawn":
            params: dict[str, Any] = {"task": plan_text(plan), "cleanup": call.get("cleanup")}
            if call.get("agent"):
                params["agentId"] = call["agent"]
            await self._call(request, "sessions_spawn", params, incarnation)
            return
        params = {
            "sessionKey": call.get("target"),
            "message": plan_text(plan),
            "timeoutSeconds": call.get("wait", 0),
        }
        await self._call(request, "sessions_send", params, incarnation)

    async def _forward(
        self, request: RunRequest, plan: dict[str, Any], incarnation: Incarnation
    ) -> None:
        """Forward the message to the next agent round the cycle, one hop further."""
        members = list(plan["cycle"])
        at = (int(plan.get("at", 0)) + 1) % len(members)
        onward = {**plan, "at": at, "depth": int(plan.get("depth", 1)) + 1}
        params = {
            "sessionKey": members[at],
            "message": plan_text(onward),
            "timeoutSeconds": plan.get("wait", 0),
        }
        await self._call(request, "sessions_send", params, incarnation)

    async def _call(
        self, request: RunRequest, tool: str, params: dict[str, Any], incarnation: Incarnation
    ) -> None:
        """Call a tool as the run's session, on the gateway that dispatched the run (its
        ``request.call_tool``): a run a reopen dispatched again, while the simulation
        still points at the gateway it killed, must not call into that one's closed
        store."""
        incarnation.check_alive()
        if request.call_tool is None and self.call_tool is None:
            return
        task = asyncio.current_task()
        if task is not None:
            self.calling.add(task)
        try:
            if request.call_tool is not None:
                result = await request.call_tool(tool, params)
            else:
                assert self.call_tool is not None
                result = await self.call_tool(request.session_key, tool, params)
        finally:
            self.calling.discard(task)
        self.tool_results.append((tool, result))
        self.scoped_calls.append(ScopedCall(request.session_key, tool, params, result))
        if "hop limit" in str(result.get("error", "")):
            plan = read_plan(str(params.get("message") or params.get("task") or ""))
            self.hop_refusals.append(int(plan.get("depth", 0)) if plan else 0)


def _plan_for(request: RunRequest) -> dict[str, Any] | None:
    if request.step in ("primary", "subagent_task", "reply_back"):
        return read_plan(request.message)
    # The announce steps carry the original message (or task) in their context.
    return read_plan(request.context, request.message)


@dataclass
class DeliveryRecord:
    idempotency_key: str
    channel: str
    session_key: str
    at: datetime
    incarnation: int
    delivered: bool
    duplicate: bool = False
    to: str = ""
    message: str = ""


@dataclass
class SimulatedChannels:
    """Chat channels that fail while down; a repeated idempotency key is dropped."""

    clock: Clock
    down_until: dict[str, datetime] = field(default_factory=dict)
    attempts: list[DeliveryRecord] = field(default_factory=list)
    delivered: dict[str, DeliveryRecord] = field(default_factory=dict)
    observations: list[Observation] = field(default_factory=list)
    after_post: Callable[[], None] = lambda: None
    """Told as a post is accepted, before the gateway records it (a crash point)."""

    def take_down(self, channel: str, seconds: float) -> None:
        until = self.clock.now() + timedelta(seconds=seconds)
        self.down_until[channel] = max(until, self.down_until.get(channel, until))

    def all_up(self) -> None:
        self.down_until.clear()

    def port(self, incarnation: Incarnation) -> ChannelDelivery:
        """The ``ChannelDelivery`` one gateway process posts through."""
        return _ChannelPort(self, incarnation)

    def post(self, delivery: Delivery, incarnation: Incarnation) -> None:
        incarnation.check_alive()
        now = self.clock.now()
        key = delivery.idempotency_key
        down = self.down_until.get(delivery.channel)
        record = DeliveryRecord(
            idempotency_key=key,
            channel=delivery.channel,
            session_key=delivery.session_key,
            at=now,
            incarnation=incarnation.number,
            delivered=down is None or now >= down,
            to=delivery.to,
            message=delivery.message,
        )
        if not record.delivered:
            self.attempts.append(record)
            raise ConnectionError(f"channel {delivery.channel} is down (simulated)")
        earlier = self.delivered.get(key)
        if earlier is not None:
            record.duplicate = True
            # Across a crash a repeat is expected (the post happened, its record did not):
            # the channel drops it by its idempotency key. Within one process it is a bug.
            if earlier.incarnation == incarnation.number:
                self.observations.append(
                    Observation(
                        "exactly-once",
                        f"delivery {key} to {delivery.channel} for {delivery.session_key} "
                        f"posted twice by one gateway process",
                    )
                )
        else:
            self.delivered[key] = record
        self.attempts.append(record)
        self.after_post()


class _ChannelPort(ChannelDelivery):
    def __init__(self, channels: SimulatedChannels, incarnation: Incarnation) -> None:
        self.channels = channels
        self.incarnation = incarnation

    async def deliver(self, delivery: Delivery) -> None:
        self.channels.post(delivery, self.incarnation)


def run_uuid(request: RunRequest) -> UUID:
    return UUID(request.run_id)


__all__ = [
    "DeliveryRecord",
    "Dispatch",
    "Incarnation",
    "Observation",
    "SimulatedAgents",
    "SimulatedChannels",
]
