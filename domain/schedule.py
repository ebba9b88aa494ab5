"""A schedule (contract decision 36): a message sent into a session at each due time.

A schedule is either a five-field cron expression read in a time zone, or an interval in
seconds counted from when it was defined. Its due times follow from its definition
alone: ``next_due(after)`` is the first due time after an instant. ``ScheduleFired``
records one firing of one due time, with the run it started (or why its run was
refused); a firing's due time is always later than the last one recorded, so a due time
is never recorded twice, and two gateways racing to record it collide on the schedule's
version (one of them records it). A firing made after several due times passed (every
gateway was down) stands for all of them, once, and is recorded as late.

A definition's checks and its due times are ``schedule_timing.py``'s (croniter's
calendar), imported from here too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict, Field
from sessionwire.domain.base import Aggregate
from sessionwire.domain.schedule_timing import (
    Definition,
    InvalidSchedule,
    Timing,
    check_definition,
    from_ms,
    to_ms,
)

SCHEDULE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/schedules")
LATE_AFTER_SECONDS = 1.0
"""A firing more than this after its due time is late (the gateway was down, or busy)."""

ScheduleStatus = Literal["active", "removed"]
ScheduleSource = Literal["api", "config"]


def schedule_uuid(schedule_id: str) -> UUID:
    """One aggregate per schedule id: defining it again finds the same schedule."""
    return uuid5(SCHEDULE_NAMESPACE, schedule_id)


def firing_run_id(schedule_id: str, due_ms: int) -> UUID:
    """The run a due time starts: every gateway (and every retry) names the same run."""
    return uuid5(schedule_uuid(schedule_id), f"due:{due_ms}")


class ScheduleState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    schedule_id: str
    session_key: str
    message: str
    cron: str | None = None
    every_seconds: int | None = None
    tz: str = "UTC"
    anchor_ms: int
    """When the schedule was (last) defined: an interval counts from here, a cron
    expression's first due time is the first match after it."""
    source: ScheduleSource = "api"
    status: ScheduleStatus = "active"
    last_due_ms: int | None = None
    """The last due time fired (None: none yet): the next is the first one after it."""
    fired: int = 0
    late: int = 0
    refused: int = 0
    last_fired_ms: int | None = None
    last_run_id: str | None = None
    # Written only when set: a row stored without it equals a rebuild.
    last_refusal: str | None = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def timing(self) -> Timing:
        return Timing(
            cron=self.cron, every_seconds=self.every_seconds, tz=self.tz, anchor_ms=self.anchor_ms
        )

    @property
    def next_due_ms(self) -> int | None:
        if self.status != "active":
            return None
        return self.timing.next_due(
            self.anchor_ms if self.last_due_ms is None else self.last_due_ms
        )

    @property
    def definition(self) -> Definition:
        return Definition(
            session_key=self.session_key,
            message=self.message,
            cron=self.cron,
            every_seconds=self.every_seconds,
            tz=self.tz,
        )


@dataclass(frozen=True)
class AwaitDue:
    """Wait on the clock until ``due_ms``, then fire it."""

    due_ms: int


@dataclass(frozen=True)
class Firing:
    """What a firing at ``now`` records: the due time it fires, the first due time it
    stands for (earlier than ``due_ms`` when several passed unfired), and whether late."""

    due_ms: int
    first_due_ms: int
    late: bool
    run_id: UUID


class Schedule(Aggregate):
    state: ScheduleState

    class ScheduleDefined(Aggregate.Created):
        schedule_id: str
        session_key: str
        message: str
        cron: str | None = None
        every_seconds: int | None = None
        tz: str = "UTC"
        source: ScheduleSource = "api"

    class ScheduleRedefined(Aggregate.Event):
        """Defined again with another definition (or after its removal): its due times
        count afresh from now."""

        session_key: str
        message: str
        cron: str | None = None
        every_seconds: int | None = None
        tz: str = "UTC"
        source: ScheduleSource = "api"

        def apply(self, aggregate: Schedule) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={
                    "session_key": self.session_key,
                    "message": self.message,
                    "cron": self.cron,
                    "every_seconds": self.every_seconds,
                    "tz": self.tz,
                    "source": self.source,
                    "anchor_ms": to_ms(self.timestamp),
                    "status": "active",
                    "last_due_ms": None,
                }
            )

    class ScheduleFired(Aggregate.Event):
        """One due time fired: its run started, or refused (``refused`` says why)."""

        due_at: int
        first_due_at: int
        """The first due time this firing stands for: ``due_at`` unless several passed."""
        late: bool = False
        run_id: str
        refused: str | None = None

        def apply(self, aggregate: Schedule) -> None:
            state = aggregate.state
            aggregate.state = state.model_copy(
                update={
                    "last_due_ms": self.due_at,
                    "fired": state.fired + 1,
                    "late": state.late + (1 if self.late else 0),
                    "refused": state.refused + (1 if self.refused else 0),
                    "last_fired_ms": to_ms(self.timestamp),
                    "last_run_id": self.run_id,
                    "last_refusal": self.refused,
                }
            )

    class ScheduleRemoved(Aggregate.Event):
        def apply(self, aggregate: Schedule) -> None:
            aggregate.state = aggregate.state.model_copy(update={"status": "removed"})

    def __init__(
        self,
        schedule_id: str,
        session_key: str,
        message: str,
        cron: str | None = None,
        every_seconds: int | None = None,
        tz: str = "UTC",
        source: ScheduleSource = "api",
    ) -> None:
        self.state = ScheduleState(
            schedule_id=schedule_id,
            session_key=session_key,
            message=message,
            cron=cron,
            every_seconds=every_seconds,
            tz=tz,
            source=source,
            anchor_ms=to_ms(self.created_on),
        )

    @classmethod
    def define(
        cls, *, schedule_id: str, definition: Definition, source: ScheduleSource, at: datetime
    ) -> Schedule:
        return cls._create(
            cls.ScheduleDefined,
            id=schedule_uuid(schedule_id),
            timestamp=at,
            schedule_id=schedule_id,
            source=source,
            **asdict(definition),
        )

    # Decisions ------------------------------------------------------------------------

    def next_step(self) -> AwaitDue | None:
        due = self.state.next_due_ms
        return None if due is None else AwaitDue(due_ms=due)

    def firing(self, now: datetime) -> Firing | None:
        """What fires at ``now``: None before the next due time (or once removed)."""
        first = self.state.next_due_ms
        now_ms = to_ms(now)
        if first is None or first > now_ms:
            return None
        due = self.state.timing.latest_due(first, now_ms)
        late = due != first or (now_ms - due) > LATE_AFTER_SECONDS * 1000
        return Firing(
            due_ms=due,
            first_due_ms=first,
            late=late,
            run_id=firing_run_id(self.state.schedule_id, due),
        )

    # Commands -------------------------------------------------------------------------

    def redefine(self, definition: Definition, *, source: ScheduleSource, at: datetime) -> None:
        self.trigger_event(
            self.ScheduleRedefined, timestamp=at, source=source, **asdict(definition)
        )

    def fire(self, firing: Firing, *, at: datetime, refused: str | None = None) -> None:
        last = self.state.last_due_ms
        if self.state.status != "active":
            raise InvalidSchedule(f"schedule {self.state.schedule_id} is removed")
        if last is not None and firing.due_ms <= last:
            raise InvalidSchedule(
                f"schedule {self.state.schedule_id} fired {from_ms(last).isoformat()} already"
            )
        self.trigger_event(
            self.ScheduleFired,
            timestamp=at,
            due_at=firing.due_ms,
            first_due_at=firing.first_due_ms,
            late=firing.late,
            run_id=str(firing.run_id),
            refused=refused,
        )

    def remove(self, *, at: datetime) -> None:
        if self.state.status == "active":
            self.trigger_event(self.ScheduleRemoved, timestamp=at)


def schedule_view(state: ScheduleState) -> dict[str, object]:
    """A schedule as ``gw.schedules()`` lists it (camelCase, times in ISO 8601 UTC)."""
    due = state.next_due_ms

    def iso(ms: int | None) -> str | None:
        return None if ms is None else from_ms(ms).isoformat().replace("+00:00", "Z")

    view: dict[str, object] = {
        "id": state.schedule_id,
        "sessionKey": state.session_key,
        "message": state.message,
        "cron": state.cron,
        "everySeconds": state.every_seconds,
        "tz": state.tz,
        "source": state.source,
        "status": state.status,
        "nextDueAt": iso(due),
        "lastDueAt": iso(state.last_due_ms),
        "lastFiredAt": iso(state.last_fired_ms),
        "lastRunId": state.last_run_id,
        "fired": state.fired,
        "late": state.late,
        "refused": state.refused,
    }
    if state.last_refusal is not None:
        view["lastRefusal"] = state.last_refusal
    return view


__all__ = [
    "AwaitDue",
    "Definition",
    "Firing",
    "InvalidSchedule",
    "Schedule",
    "ScheduleState",
    "Timing",
    "check_definition",
    "firing_run_id",
    "from_ms",
    "schedule_uuid",
    "schedule_view",
    "to_ms",
]
