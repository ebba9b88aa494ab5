"""What the oracle reads: the recorded log as plain data, and the simulation's inputs.

Nothing here comes from the product's code: an event is its class's *name* and its
fields as plain values (the simulator turns each recorded event into a ``Fact``); the
inputs are the script's own config dict and what the simulator itself did (when each
gateway died and when the next one served again).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

# The simulated agents' plan marker (the simulator's own convention, not the product's).
PLAN_MARK = "sim:"
# Contract decision 17: maxHops when the config sets none.
DEFAULT_MAX_HOPS = 6
# Contract §4 / §5 decision 12: maxPingPongTurns when the config sets none.
DEFAULT_MAX_TURNS = 5
# OpenClaw's defaults, which the config documents (docs/runs.md, docs/subagents.md).
DEFAULT_ARCHIVE_MINUTES = 60.0
DEFAULT_MAX_CONCURRENT = 4


@dataclass(frozen=True)
class Fact:
    """One recorded event: its position in the log, its type's name, its aggregate, its
    time and its fields (plain values: strings, numbers, lists, dicts)."""

    position: int
    type: str
    aggregate: str
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.data.get(name, default)
        return default if value is None else value


@dataclass(frozen=True)
class ForkRead:
    """A fork the simulator made (decision 34) and what its history showed at the end."""

    key: str
    source: str
    at_version: int | None
    """The version asked for; None: the source's latest when the fork was made."""
    shown: tuple[tuple[str, int, str | None], ...]
    """Each line of the fork's history, oldest first: (role, timestamp, its forkedFrom)."""


@dataclass(frozen=True)
class World:
    """The simulation's inputs the contract's rules are derived from."""

    config: dict[str, Any]
    """The script's config, as written (never the product's parsed model)."""
    down: tuple[tuple[datetime, datetime], ...] = ()
    """Each crash: when the gateway died and when the next one served again."""
    deaths: tuple[int, ...] = ()
    """The log's head at each crash: nothing recorded up to it runs in the next process."""
    faults: tuple[tuple[datetime, str], ...] = ()
    """(time, aggregate) of each save a simulated store fault failed: what it would have
    recorded then is recorded at a retry, later (the gateway's own work gets over it)."""
    gateways: int = 1
    """Gateways on the store (two: a lease race the budget count allows, docs/budgets.md)."""
    fork_reads: tuple[ForkRead, ...] = ()
    """Each fork the simulator made and recorded, read at the end of the play."""
    answers: tuple[tuple[str, str, bool], ...] = ()
    """(run, text, accepted) of each answer the simulator gave a run (decision 33)."""
    until: datetime | None = None
    """The clock when the play ended (after the drain): later than the log's last event
    when nothing was recorded at the end."""

    def _section(self, *path: str) -> dict[str, Any]:
        node: Any = self.config
        for name in path:
            node = node.get(name) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else {}

    def _number(self, default: float, *path: str) -> float:
        *section, name = path
        value = self._section(*section).get(name)
        return float(value) if isinstance(value, int | float) else default

    @property
    def max_hops(self) -> int:
        return int(self._number(DEFAULT_MAX_HOPS, "session", "agentToAgent", "maxHops"))

    @property
    def max_turns(self) -> int:
        return int(self._number(DEFAULT_MAX_TURNS, "session", "agentToAgent", "maxPingPongTurns"))

    @property
    def max_concurrent(self) -> int:
        return int(self._number(DEFAULT_MAX_CONCURRENT, "agents", "defaults", "maxConcurrent"))

    @property
    def archive_minutes(self) -> float:
        path = ("agents", "defaults", "subagents", "archiveAfterMinutes")
        return self._number(DEFAULT_ARCHIVE_MINUTES, *path)

    @property
    def budget(self) -> dict[str, Any] | None:
        budget = self._section("session", "agentToAgent").get("budget")
        return budget if isinstance(budget, dict) else None

    def faulted(self, aggregate: str, since: datetime, until: datetime) -> bool:
        """Did a store fault fail a save of ``aggregate`` between the two times?"""
        return any(failed == aggregate and since <= at <= until for at, failed in self.faults)

    def was_down(self, at: datetime) -> datetime | None:
        """When the gateway served again, if it was down at ``at`` (a timer due while
        down fires when the next one opens)."""
        for died, up in self.down:
            if died <= at <= up:
                return up
        return None


def read_plan(*texts: Any) -> dict[str, Any] | None:
    """The first ``sim:{...}`` plan written in any of ``texts``."""
    decoder = json.JSONDecoder()
    for text in texts:
        if not isinstance(text, str):
            continue
        at = text.find(PLAN_MARK + "{")
        if at < 0:
            continue
        try:
            plan, _ = decoder.raw_decode(text, at + len(PLAN_MARK))
        except json.JSONDecodeError:
            continue
        if isinstance(plan, dict):
            return plan
    return None


def from_ms(value: Any) -> datetime | None:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def plus(at: datetime, seconds: float) -> datetime | None:
    """``at`` plus ``seconds``, to the millisecond as the log records times; None for a
    time without end."""
    if not math.isfinite(seconds):
        return None
    return at + timedelta(milliseconds=round(seconds * 1000))


__all__ = ["DEFAULT_MAX_HOPS", "Fact", "ForkRead", "World", "from_ms", "plus", "read_plan"]
