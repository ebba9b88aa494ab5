"""The process manager of sub-agent spawns: child run, announce, cleanup, archive timer.

Like the exchange driver, it asks the spawn aggregate for its next step, does it and
records the outcome. The archive timer waits on the gateway clock for the time the spawn
recorded, so a gateway restarted before that time waits for the rest, and one restarted
after it archives at once.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import structlog
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.orchestration.exchanges import run_state_reply
from sessionwire.application.orchestration.process_managers import ProcessManager
from sessionwire.application.orchestration.runs import RunEngine
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery
from sessionwire.application.ports.store import Store
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.session import to_millis
from sessionwire.domain.spawn import (
    Announce,
    ArchiveAt,
    AwaitChildRun,
    DeleteChild,
    Spawn,
    SpawnState,
    StartAnnounceRun,
)
from sessionwire.domain.subagent_announce import AnnounceStats, format_announce
from sessionwire.domain.transcript import TranscriptMessage

log = structlog.get_logger("sessionwire.spawns")

ANNOUNCE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/subagent-announces")


class SpawnDriver(ProcessManager[Spawn]):
    kind = "spawn"
    pending_statuses = ("running", "announcing", "waiting_archive")
    aggregate_class = Spawn
    state_class = SpawnState

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        runs: RunEngine,
        delivery: ChannelDelivery,
        config: GatewayConfig,
    ) -> None:
        super().__init__(store)
        self.clock = clock
        self.runs = runs
        self.delivery = delivery
        self.config = config

    def log_context(self, aggregate: Spawn) -> dict[str, Any]:
        return {"session_key": aggregate.state.child_key, "run_id": aggregate.state.run_id}

    async def take(
        self,
        spawn: Spawn,
        step: AwaitChildRun | StartAnnounceRun | Announce | ArchiveAt | DeleteChild,
    ) -> None:
        if isinstance(step, AwaitChildRun):
            state = await self.runs.wait(UUID(step.run_id))
            assert state is not None
            self._record_run_end(spawn, state)
            self.store.save(spawn)
        elif isinstance(step, StartAnnounceRun):
            await self._announce_run(spawn, step)
        elif isinstance(step, Announce):
            await self._announce(spawn, step)
        elif isinstance(step, DeleteChild):
            await self._close_child(spawn, archive=False)
        else:
            delay_ms = step.due_ms - to_millis(self.clock.now())
            if delay_ms > 0:
                task = asyncio.current_task()
                if task is not None:
                    task.set_name(f"spawn:{spawn.id}:timer")
                await self.clock.sleep(delay_ms / 1000)
                if task is not None:
                    task.set_name(f"spawn:{spawn.id}")
            await self._close_child(spawn, archive=True)

    def _record_run_end(self, spawn: Spawn, state: RunState) -> None:
        outcome = state.status if state.status in {"ok", "error", "timeout"} else "error"
        spawn.run_ended(
            outcome=outcome,
            error=state.error,
            started_at=state.started_at,
            ended_at=state.ended_at or to_millis(self.clock.now()),
            usage=state.usage,
            at=self.clock.now(),
        )

    async def _announce_run(self, spawn: Spawn, step: StartAnnounceRun) -> None:
        now = self.clock.now()
        spawn.request_announce(step.run_id, at=now)
        run = Run.start(
            run_id=step.run_id,
            session_key=step.session_key,
            agent_id=spawn.state.agent_id,
            step="subagent_announce",
            message=step.message,
            context=step.context,
            timeout_seconds=self.config.agents.defaults.timeoutSeconds,
            requester_key=spawn.state.requester_key,
            at=now,
        )
        self.runs.ensure_started(run, spawn)
        state = await self.runs.wait(step.run_id)
        spawn = self.load(spawn.id) or spawn
        spawn.record_announce_reply(run_state_reply(state), at=self.clock.now())
        self.store.save(spawn)

    def _report(self, spawn: Spawn, reply: str | None) -> str:
        state = spawn.state
        child = self.store.session(state.child_key)
        usage = state.usage
        session_id = child.state.session_id if child else None
        stats = AnnounceStats(
            runtime_ms=(
                state.ended_at - state.started_at
                if state.ended_at is not None and state.started_at is not None
                else None
            ),
            input_tokens=usage.input if usage else None,
            output_tokens=usage.output if usage else None,
            total_tokens=usage.totalTokens if usage else None,
            cost=self.config.cost_of(state.model, usage),
            session_key=state.child_key,
            session_id=session_id,
            transcript=f"{self.store.location}#{session_id}" if session_id else None,
        )
        return format_announce(
            reply, status=state.outcome or "unknown", error=state.error, stats=stats
        )

    async def _announce(self, spawn: Spawn, step: Announce) -> None:
        if step.skip:
            spawn.skip_announce("ANNOUNCE_SKIP", at=self.clock.now())
            self.store.save(spawn)
            return
        message = self._report(spawn, step.reply)
        requester = self.store.session(spawn.state.requester_key)
        origin = requester.state if requester else None
        channel = origin.last_channel if origin else None
        to = origin.last_to if origin else None
        account_id = origin.last_account_id if origin else None
        # Decision 10: a session whose send policy denies gets no delivery on its channel;
        # the report is still recorded (its transcript, the spawn's events), never lost.
        denied_by = None
        if origin is not None:
            decision = self.config.send_policy.decide(
                origin.policy_target(self.config.key_rules), channel=channel
            )
            denied_by = None if decision.allowed else decision.rule
        if channel and to and denied_by is None:
            try:
                await self.delivery.deliver(
                    Delivery(
                        channel=channel,
                        to=to,
                        account_id=account_id,
                        message=message,
                        session_key=spawn.state.requester_key,
                        idempotency_key=str(uuid5(ANNOUNCE_NAMESPACE, str(spawn.id))),
                    )
                )
            except Exception as error:  # recorded in the transcript even if the channel fails
                log.warning(
                    "sub-agent announce delivery failed",
                    session_key=spawn.state.requester_key,
                    error=f"{type(error).__name__}: {error}",
                )
                channel = to = account_id = None
        else:
            channel = to = account_id = None
        if denied_by is not None:
            channel = to = account_id = None
        await self._save_announce(spawn, message, channel, to, account_id, denied_by)

    async def _save_announce(
        self,
        spawn: Spawn,
        message: str,
        channel: str | None,
        to: str | None,
        account_id: str | None,
        denied_by: str | None,
    ) -> None:
        """Record the report in the requester's transcript and on the spawn, together."""
        async for uow in retrying(self.store, f"spawn {spawn.id} announce"):
            with uow:
                now = self.clock.now()
                fresh = uow.work(spawn.id, Spawn, SpawnState)
                if fresh is None or fresh.state.announced:
                    return
                if denied_by is not None:
                    fresh.suppress_delivery(rule=denied_by, at=now)
                fresh.announced(
                    message=message, channel=channel, to=to, account_id=account_id, at=now
                )
                requester = uow.session(spawn.state.requester_key)
                if requester is not None and requester.state.status == "active":
                    requester.append_message(
                        TranscriptMessage(
                            role="assistant",
                            content=[{"type": "text", "text": message}],
                            timestamp=int(now.timestamp() * 1000),
                        ),
                        at=now,
                    )
                uow.commit()

    async def _close_child(self, spawn: Spawn, *, archive: bool) -> None:
        async for uow in retrying(self.store, f"spawn {spawn.id} cleanup"):
            with uow:
                now = self.clock.now()
                fresh = uow.work(spawn.id, Spawn, SpawnState)
                if fresh is None or fresh.state.status == "closed":
                    return
                child = uow.session(fresh.state.child_key)
                if child is not None and archive:
                    child.archive(reason="archiveAfterMinutes elapsed", at=now)
                elif child is not None:
                    child.delete(reason='sessions_spawn cleanup "delete"', at=now)
                if archive:
                    fresh.archived(at=now)
                else:
                    fresh.deleted(at=now)
                uow.commit()
