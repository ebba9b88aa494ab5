"""A schedule's definition checked, and its due times (contract decision 36).

Apart from the schedule aggregate (``schedule.py``): a config names its schedules and is
checked here, and a process that loads a config but runs no schedule (``sessions list``)
builds none of the aggregate's models (issue 38 item 7). The calendar is croniter's (a
well-kept parser, not one of our own) over zoneinfo's time zones: both are pure
computation over data, no clock and no I/O of ours. croniter (and dateutil under it) is
imported by the first cron expression checked or read, not with the module.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sessionwire.domain.errors import SessionwireError

# A schedule id becomes part of a session key (``cron:<id>``): characters a key keeps.
SCHEDULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MIN_INTERVAL_SECONDS = 1
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
MAX_SCHEDULE_MESSAGE = 100_000


class InvalidSchedule(SessionwireError, ValueError):
    """A schedule's definition is refused; the message says why."""


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
        from croniter import croniter

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
        from croniter import croniter

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
    from croniter import croniter

    try:
        # Asked for a first due time too: an expression no date matches ("0 0 31 2 *")
        # is refused here, not found out at the first wait.
        croniter(normalised, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (ValueError, KeyError, TypeError, OverflowError) as error:
        raise InvalidSchedule(f"cron {cron!r} is not valid: {error}") from error
    return normalised
