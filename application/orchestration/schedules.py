"""The process manager of schedules (contract decision 36, ADR 0047).

Each active schedule is driven by one task per gateway: it waits on the gateway clock
until the schedule's next due time, then records the firing (``ScheduleFired``) and the
run it starts in one transaction. The firing is a new version of the schedule's stream,
so when two gateways (PostgreSQL) wake for the same due time, one records it and the
other's save collides, reloads, and waits for the next due time: each due time fires
once. A gateway that starts after due times passed with none running fires once, late,
for all of them (``Schedule.firing``). Each firing's run is a trace of its own, admitted
by the trace budgets first (ADR 0034); refused, the firing is recorded with the refusal
and no run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from sessionwire.application.config.gateway_config import ScheduleEntry
from sessionwire.application.orchestration.budgeted_managers import BudgetedProcessManager
from sessionwire.application.orchestration.in_flight import Owner
from sessionwire.application.orchestration.run_scope import outside_any_run
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.causality import Causality
from sessionwire.domain.keys import agent_id_of
from sessionwire.domain.run import Run
from sessionwire.domain.schedule import (
    AwaitDue,
    Definition,
    Schedule,
    ScheduleSource,
    ScheduleState,
    check_definition,
    from_ms,
    schedule_uuid,
    to_ms,
)
from sessionwire.domain.trace_budget import BudgetExceeded

ACTIVE = ("active",)
WATCH_SECONDS = 30.0
"""How often a gateway on a shared store (PostgreSQL) on a real clock looks for schedules
another process defined (the CLI, another gateway), and starts driving them."""


class ScheduleDriver(BudgetedProcessManager[Schedule]):
    kind = "schedule"
    pending_statuses = ACTIVE
    aggregate_class = Schedule
    state_class = ScheduleState

    def setup(self) -> None:
        self.canonical = self.config.key_rules.canonical
        self.open_session: Callable[[str], Awaitable[None]] | None = None
        """Opens a session unless it exists (``GatewayService.ensure_session``)."""
        # What wakes a waiting driver early: the schedule was redefined or removed here.
        self._pokes: dict[UUID, asyncio.Future[None]] = {}
        self.driving = False
        """Whether this gateway drives schedules (it resumed its store's work): a
        command that only defines one (the CLI) leaves the firing to the gateways."""
        self._watch: asyncio.Task[None] | None = None

    async def resume(self) -> int:
        """Fire what came due while no gateway ran (once each, late), then drive every
        active schedule: when a gateway has opened, a due time missed is fired."""
        self.driving = True
        now_ms = to_ms(self.clock.now())
        for stored in await self.store.pending_work(self.kind, ACTIVE):
            due = ScheduleState.model_validate_json(stored.state_json).next_due_ms
            if due is not None and due <= now_ms:
                await self._fire(stored.id)
        found = await super().resume()
        # As the takeover watch (ADR 0028): not on a clock only a test moves, where a
        # timer that re-arms itself for ever would keep a drain from ending; a test
        # calls ``look_for_new`` when it means to.
        watching = self._watch is not None and not self._watch.done()
        if self.store.others_may_write() and self.clock.moves_by_itself and not watching:
            self._watch = self.in_flight.start(
                self._watching(), Owner("schedules", "watch"), context=outside_any_run()
            )
        return found

    async def look_for_new(self) -> None:
        """Drive every active schedule not driven here yet (defined by another process)."""
        for stored in await self.store.pending_work(self.kind, ACTIVE):
            self.start(stored.id)

    async def _watching(self) -> None:
        while True:
            # Parked: the look is this gateway's own rhythm, not work anyone waits for.
            await self.in_flight.sleep(WATCH_SECONDS, parked=True)
            try:
                await self.look_for_new()
            except Exception:  # a failing store: the next look tries again
                self.log.exception("looking for new schedules failed")

    def log_context(self, aggregate: Schedule) -> dict[str, Any]:
        return {"session_key": aggregate.state.session_key, "schedule": aggregate.state.schedule_id}

    # Commands -------------------------------------------------------------------------

    async def define(
        self,
        schedule_id: str,
        *,
        cron: str | None,
        every_seconds: float | None,
        message: str,
        session_key: str | None,
        tz: str,
        source: ScheduleSource = "api",
    ) -> ScheduleState:
        """Define (or define again) a schedule; the same definition again changes nothing
        (its due times go on). InvalidSchedule (a ValueError) says what is refused."""
        stored_cron, interval, zone = check_definition(
            schedule_id=schedule_id, cron=cron, every_seconds=every_seconds, tz=tz, message=message
        )
        key = self.canonical(session_key if session_key is not None else f"cron:{schedule_id}")
        definition = Definition(
            session_key=key, message=message, cron=stored_cron, every_seconds=interval, tz=zone
        )
        aggregate_id = schedule_uuid(schedule_id)
        async for uow in retrying(self.store, f"schedule {schedule_id}"):
            with uow:
                existing = await uow.work(aggregate_id, Schedule, ScheduleState)
                now = self.clock.now()
                if existing is None:
                    schedule = uow.add(
                        Schedule.define(
                            schedule_id=schedule_id, definition=definition, source=source, at=now
                        )
                    )
                elif (
                    existing.state.status == "active"
                    and existing.state.definition == definition
                    and existing.state.source == source
                ):
                    schedule = existing
                else:
                    existing.redefine(definition, source=source, at=now)
                    schedule = existing
                await uow.commit()
        if self.open_session is not None:
            await self.open_session(key)
        self._poke(aggregate_id)
        if self.driving:
            self.start(aggregate_id)
        self.log.info("schedule defined", schedule=schedule_id, session_key=key)
        return schedule.state

    async def remove(self, schedule_id: str) -> ScheduleState | None:
        """Remove the schedule (None: there is none by that id, or it is removed)."""
        aggregate_id = schedule_uuid(schedule_id)
        removed: ScheduleState | None = None
        async for uow in retrying(self.store, f"schedule {schedule_id} removal"):
            with uow:
                existing = await uow.work(aggregate_id, Schedule, ScheduleState)
                if existing is None or existing.state.status != "active":
                    return None
                existing.remove(at=self.clock.now())
                await uow.commit()
                removed = existing.state
        self._poke(aggregate_id)
        self.log.info("schedule removed", schedule=schedule_id)
        return removed

    async def listing(self) -> list[ScheduleState]:
        """The active schedules, oldest first (the work rows: no query of their own)."""
        stored = await self.store.pending_work(self.kind, ACTIVE)
        return [ScheduleState.model_validate_json(work.state_json) for work in stored]

    async def sync_config(self, entries: list[ScheduleEntry]) -> None:
        """Make the config's ``schedules`` section true: each entry defined (unchanged
        ones keep their due times), and schedules the config defined before but no
        longer names removed."""
        named = set()
        for entry in entries:
            named.add(entry.id)
            await self.define(
                entry.id,
                cron=entry.cron,
                every_seconds=entry.everySeconds,
                message=entry.message,
                session_key=entry.sessionKey,
                tz=entry.tz,
                source="config",
            )
        for state in await self.listing():
            if state.source == "config" and state.schedule_id not in named:
                await self.remove(state.schedule_id)

    # Driving --------------------------------------------------------------------------

    async def take(self, aggregate: Schedule, step: AwaitDue) -> None:
        aggregate_id = aggregate.id
        poke: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pokes[aggregate_id] = poke
        try:
            # Parked: a schedule's due times are its own (a real clock's wait_idle does
            # not wait for them); a VirtualClock's advance fires them on the way.
            if await self.in_flight.wait_for(poke, due=from_ms(step.due_ms), parked=True):
                return  # redefined or removed: the next step is looked up afresh
        finally:
            if self._pokes.get(aggregate_id) is poke:
                del self._pokes[aggregate_id]
        await self._fire(aggregate_id)

    async def _fire(self, aggregate_id: UUID) -> None:
        """Record the firing due now, with its run, in one transaction; nothing if none
        is due (another gateway fired it, or the schedule changed meanwhile)."""
        fresh = await self.load(aggregate_id)
        if fresh is None or fresh.firing(self.clock.now()) is None:
            return
        if self.open_session is not None:
            await self.open_session(fresh.state.session_key)
        planned = fresh.firing(self.clock.now())
        assert planned is not None
        # Each firing's run is a trace of its own: the firing is the outside message.
        chain = Causality.root(str(planned.run_id))
        run: Run | None = None
        refused: BudgetExceeded | None = None
        fired: ScheduleState | None = None
        late = False
        async with self.budgets.admit(chain.trace_id) as exceeded:
            async for uow in retrying(self.store, f"schedule {aggregate_id} firing"):
                with uow:
                    schedule = await uow.work(aggregate_id, Schedule, ScheduleState)
                    now = self.clock.now()
                    firing = None if schedule is None else schedule.firing(now)
                    if schedule is None or firing is None:
                        return
                    if firing.run_id != planned.run_id:
                        return  # looked again after a conflict: another due time now
                    schedule.fire(firing, at=now, refused=exceeded.message if exceeded else None)
                    state = schedule.state
                    if exceeded is None:
                        run = uow.add(
                            Run.start(
                                run_id=firing.run_id,
                                session_key=state.session_key,
                                agent_id=agent_id_of(state.session_key),
                                step="scheduled",
                                message=state.message,
                                timeout_seconds=self.config.agents.defaults.timeoutSeconds,
                                at=now,
                                causality=chain,
                            )
                        )
                    await uow.commit()
                    refused = exceeded
                    fired, late = state, firing.late
        if fired is None:
            return
        if refused is not None:
            self.log.info("schedule fired, its run refused", schedule=fired.schedule_id)
            await self.budgets.refuse(
                refused,
                chain=chain,
                requester_key=fired.session_key,
                tool="schedule",
                reference=fired.schedule_id,
                target_key=fired.session_key,
                caller_run_id=None,
            )
        if run is not None:
            self.log.info(
                "schedule fired",
                schedule=fired.schedule_id,
                session_key=fired.session_key,
                run_id=str(run.id),
                late=late,
            )
            self.runs.enqueue(run.id, run.state.session_key)

    def _poke(self, aggregate_id: UUID) -> None:
        poke = self._pokes.get(aggregate_id)
        if poke is not None and not poke.done():
            poke.set_result(None)
