"""A schedule (contract decision 36): a message sent into a session at each due time.

A schedule is either a five-field cron expression read in a time zone, or an interval in
seconds counted from when it was defined. Its due times follow from its definition
alone: ``next_due(after)`` is the first due time after an instant. ``ScheduleFired``
records one firing of one due time, with the run it started (or why its run was
refused); a firing's due time is always later than the last one recorded, so a due time
is never recorded twice, and two gateways racing to record it collide on the schedule's
version (one of them records it). A firing made after several due times passed (every
gateway was down) stands for all of them, once, and is recorded as late.

The calendar is croniter's (a well-kept parser, not one of our own) over zoneinfo's time
zones: both are pure computation over data, no clock and no I/O of ours.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field
from sessionwire.domain.base import Aggregate
from sessionwire.domain.errors import SessionwireError

SCHEDULE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/schedules")
# A schedule id becomes part of a session key (``cron:<id>``): characters a key keeps.
SCHEDULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MIN_INTERVAL_SECONDS = 1
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
MAX_SCHEDULE_MESSAGE = 100_000
LATE_AFTER_SECONDS = 1.0
"""A firing more than this after its due time is late (the gateway was down, or busy)."""

ScheduleStatus = Literal["active", "removed"]
ScheduleSource = Literal["api", "config"]


class InvalidSchedule(SessionwireError, ValueError):
    """A schedule's definition is refused; the message says why."""


def schedule_uuid(schedule_id: str) -> UUID:
    """One aggregate per schedule id: defining it again finds the same schedule."""
    return uuid5(SCHEDULE_NAMESPACE, schedule_id)


def firing_run_id(schedule_id: str, due_ms: int) -> UUID:
    """The run a due time starts: every gateway (and every retry) names the same run."""
    return uuid5(schedule_uuid(schedule_id), f"due:{due_ms}")


def to_ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@dataclass(frozen=True)
class Definition:
    """What a schedule sends where, and when: checked (``check_definition``)."""

    session_key: str
    message: str
    cron: str | None
    every_seconds: int | None
    tz: str


@dataclass(frozen=True)
class Timing:
    """When a schedule is due: a cron expression in ``tz``, or every ``every_seconds``
    from ``anchor_ms`` (when it was defined)."""

    cron: str | None
    every_seconds: int | None
    tz: str
    anchor_ms: int

    def next_due(self, after_ms: int) -> int:
        """The first due time strictly after ``after_ms`` (ms since the epoch)."""
        if self.every_seconds is not None:
            step = self.every_seconds * 1000
            periods = max(0, (after_ms - self.anchor_ms) // step) + 1
            return self.anchor_ms + periods * step
        assert self.cron is not None
        start = from_ms(after_ms).astimezone(ZoneInfo(self.tz))
        found: datetime = croniter(self.cron, start).get_next(datetime)
        return to_ms(found)

    def latest_due(self, first_ms: int, now_ms: int) -> int:
        """The last due time at or before ``now_ms``, starting from the due ``first_ms``
        (itself at or before ``now_ms``): what a firing after a gap stands for."""
        if self.every_seconds is not None:
            step = self.every_seconds * 1000
            return first_ms + ((now_ms - first_ms) // step) * step
        assert self.cron is not None
        start = from_ms(now_ms).astimezone(ZoneInfo(self.tz))
        previous = to_ms(croniter(self.cron, start).get_prev(datetime))
        # get_prev is strictly before now: ``now`` itself may be a due time.
        candidate = self.next_due(previous)
        latest = candidate if candidate <= now_ms else previous
        return max(first_ms, latest)


def check_definition(
    *,
    schedule_id: str,
    cron: str | None,
    every_seconds: float | None,
    tz: str,
    message: str,
) -> tuple[str | None, int | None, str]:
    """The definition as stored (cron normalised to single spaces, interval as whole
    seconds, the zone's name), or InvalidSchedule saying what is wrong."""
    if not isinstance(schedule_id, str) or not SCHEDULE_ID.match(schedule_id):
        raise InvalidSchedule(
            "a schedule id is 1-100 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    if not isinstance(message, str) or not message.strip():
        raise InvalidSchedule("a schedule's message is empty")
    if len(message) > MAX_SCHEDULE_MESSAGE:
        raise InvalidSchedule(f"a schedule's message is longer than {MAX_SCHEDULE_MESSAGE}")
    if (cron is None) == (every_seconds is None):
        raise InvalidSchedule("give exactly one of cron or every_seconds")
    zone = _check_zone(tz)
    if every_seconds is not None:
        return None, _check_interval(every_seconds), zone
    assert cron is not None
    return _check_cron(cron), None, zone


def _check_interval(value: float) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSchedule(f"every_seconds must be a number, not {type(value).__name__}")
    if not math.isfinite(value) or value != int(value):
        raise InvalidSchedule(f"every_seconds must be a whole number of seconds, not {value}")
    if not MIN_INTERVAL_SECONDS <= value <= MAX_INTERVAL_SECONDS:
        raise InvalidSchedule(
            f"every_seconds must be between {MIN_INTERVAL_SECONDS} and "
            f"{MAX_INTERVAL_SECONDS} (a year), not {int(value)}"
        )
    return int(value)


def _check_zone(tz: str) -> str:
    if not isinstance(tz, str) or not tz.strip():
        raise InvalidSchedule("tz is empty (an IANA time zone such as 'UTC' or 'Europe/Berlin')")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise InvalidSchedule(
            f"unknown time zone {tz!r} (an IANA name such as 'UTC' or 'Europe/Berlin')"
        ) from error
    return tz


def _check_cron(cron: str) -> str:
    if not isinstance(cron, str):
        raise InvalidSchedule(f"cron must be a string, not {type(cron).__name__}")
    fields = cron.split()
    if len(fields) != 5:
        raise InvalidSchedule(
            f"cron {cron!r} has {len(fields)} fields; it takes five: minute hour "
            "day-of-month month day-of-week"
        )
    normalised = " ".join(fields)
    try:
        # Asked for a first due time too: an expression no date matches ("0 0 31 2 *")
        # is refused here, not found out at the first wait.
        croniter(normalised, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (ValueError, KeyError, TypeError, OverflowError) as error:
        raise InvalidSchedule(f"cron {cron!r} is not valid: {error}") from error
    return normalised


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
    "schedule_uuid",
    "schedule_view",
]
