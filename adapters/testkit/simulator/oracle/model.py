"""The reference model's view of a log: runs, exchanges, spawns and yields as the
contract describes them, built from the facts alone (event names and plain fields).

Every derived value (a deadline, a trace's usage, a chain's hop) is computed here from
the contract's rules, never read from what the product computed for itself; the
product's own derived fields (``deadline_at``, ``archive_at``, ``hops``) are only ever
compared against it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sessionwire.adapters.testkit.simulator.oracle.facts import Fact, plus, read_plan

# Event names (the product's event classes' names: the only thing shared with it).
RUN_STARTED = "RunStarted"
RUN_DISPATCHED = "RunDispatched"
RUN_COMPLETED = "RunCompleted"
RUN_FAILED = "RunFailed"
RUN_TIMED_OUT = "RunTimedOut"
RUN_CANCELLED = "RunCancelled"
RUN_STEERED = "RunSteered"
RUN_INPUT_REQUESTED = "RunInputRequested"
RUN_INPUT_PROVIDED = "RunInputProvided"
OUTCOMES = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_TIMED_OUT, RUN_CANCELLED})
EXCHANGE_OPENED = "ExchangeOpened"
TURN_BLOCKED = "TurnBlocked"
SUBAGENT_SPAWNED = "SubagentSpawned"
SUBAGENT_ANNOUNCED = "SubagentAnnounced"
ANNOUNCE_SKIPPED = "AnnounceSkipped"
SUBAGENT_ARCHIVED = "SubagentArchived"
SUBAGENT_DELETED = "SubagentDeleted"
# A spawn's report is made (announced or skipped) or it closed without one.
REPORTED = frozenset({SUBAGENT_ANNOUNCED, ANNOUNCE_SKIPPED, SUBAGENT_ARCHIVED, SUBAGENT_DELETED})
RUN_YIELDED = "RunYielded"
YIELD_WOKEN = "YieldWoken"
BUSY_DECIDED = "BusyDecided"
ACCESS_REFUSED = "AccessRefused"
SCHEDULE_DEFINED = "ScheduleDefined"
SCHEDULE_REDEFINED = "ScheduleRedefined"
SCHEDULE_FIRED = "ScheduleFired"
SCHEDULE_REMOVED = "ScheduleRemoved"
SESSION_OPENED = "SessionOpened"
SESSION_ARCHIVED = "SessionArchived"
SESSION_DELETED = "SessionDeleted"
MESSAGE_APPENDED = "MessageAppended"
MESSAGES_APPENDED = "MessagesAppended"
# The fields the model reads of each event (the simulator hands over only these).
READ_FIELDS: dict[str, set[str]] = {
    RUN_STARTED: {
        "session_key",
        "step",
        "timeout_seconds",
        "deadline_at",
        "message",
        "context",
        "trace_id",
        "parent_run_id",
        "hops",
        "turn",
        "exchange_id",
    },
    RUN_DISPATCHED: {"attempt"},
    RUN_COMPLETED: {"reply", "usage"},
    RUN_FAILED: {"error"},
    RUN_TIMED_OUT: {"timeout_seconds"},
    RUN_CANCELLED: {"reason"},
    RUN_STEERED: {"steered_by"},
    RUN_INPUT_REQUESTED: {"prompt", "options"},
    RUN_INPUT_PROVIDED: {"text", "by"},
    EXCHANGE_OPENED: {"requester_key", "target_key", "primary_run_id", "trace_id"},
    SUBAGENT_SPAWNED: {
        "child_key",
        "run_id",
        "cleanup",
        "archive_after_minutes",
        "requester_key",
        "trace_id",
    },
    RUN_YIELDED: {"session_key", "run_id", "wait_for", "due_at", "children", "trace_id"},
    YIELD_WOKEN: {"reason", "wake_run_id", "reports", "refused"},
    BUSY_DECIDED: {"decision", "steered_run_id", "parent_run_id", "trace_id", "run_id", "hops"},
    ACCESS_REFUSED: {"check", "tool", "trace_id", "message", "rule"},
    SESSION_OPENED: {"key"},
    SCHEDULE_DEFINED: {"schedule_id", "every_seconds", "cron", "session_key"},
    SCHEDULE_REDEFINED: {"every_seconds", "cron", "session_key"},
    SCHEDULE_FIRED: {"due_at", "first_due_at", "late", "run_id", "refused"},
    MESSAGE_APPENDED: {"originator_version", "message"},
    MESSAGES_APPENDED: {"originator_version", "messages"},
}
# Steps an agent runs for its own work: a send or spawn from one adds a hop; the steps
# the gateway runs itself (reply-back, announce, a yield's wake) stay on their hop.
AGENT_STEPS = frozenset({"primary", "subagent_task"})


@dataclass
class RunView:
    id: str
    session: str
    step: str
    started: datetime
    position: int
    timeout: float
    message: str
    context: str | None
    trace: str | None
    parent: str | None
    hops: int
    turn: int | None
    exchange: str | None
    recorded_deadline: datetime | None
    dispatches: list[Fact] = field(default_factory=list)
    outcome: Fact | None = None
    outcomes: int = 0
    steers: list[Fact] = field(default_factory=list)
    waits: list[Fact] = field(default_factory=list)
    """Its asks (RunInputRequested) and answers (RunInputProvided), in log order."""

    @property
    def deadline(self) -> datetime | None:
        """Decision 16: its start plus its timeout (a timeout of 0 or less has none)."""
        return plus(self.started, self.timeout) if self.timeout > 0 else None

    @property
    def plan(self) -> dict[str, Any] | None:
        if self.step in ("primary", "subagent_task", "reply_back"):
            return read_plan(self.message)
        return read_plan(self.context, self.message)

    def ended_by(self, position: int) -> bool:
        return self.outcome is not None and self.outcome.position < position


@dataclass
class SpawnView:
    id: str
    fact: Fact
    child_key: str
    run: str
    reported: Fact | None = None
    archived: Fact | None = None


@dataclass
class YieldView:
    id: str
    fact: Fact
    wakes: list[Fact] = field(default_factory=list)


@dataclass
class ScheduleView:
    """A schedule's definitions (the first and each redefinition, in order), its
    firings and its removals, as the log holds them."""

    id: str
    definitions: list[Fact] = field(default_factory=list)
    firings: list[Fact] = field(default_factory=list)
    removals: list[Fact] = field(default_factory=list)


@dataclass
class LogModel:
    """Everything the checks need, indexed once."""

    facts: list[Fact]
    runs: dict[str, RunView] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    exchanges: dict[str, Fact] = field(default_factory=dict)
    exchange_facts: dict[str, list[Fact]] = field(default_factory=lambda: defaultdict(list))
    spawns: dict[str, SpawnView] = field(default_factory=dict)
    yields: dict[str, YieldView] = field(default_factory=dict)
    schedules: dict[str, ScheduleView] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    """A session aggregate -> its key."""
    closed: dict[str, Fact] = field(default_factory=dict)
    """A session key -> its SessionArchived or SessionDeleted."""

    @classmethod
    def of(cls, facts: list[Fact]) -> LogModel:
        model = cls(facts=sorted(facts, key=lambda fact: fact.position))
        for fact in model.facts:
            model._take(fact)
        return model

    def _take(self, fact: Fact) -> None:
        name, aggregate = fact.type, fact.aggregate
        run = self.runs.get(aggregate)
        if name == RUN_STARTED:
            self._started(fact)
        elif name == RUN_DISPATCHED and run is not None:
            run.dispatches.append(fact)
        elif name in OUTCOMES and run is not None:
            run.outcomes += 1
            if run.outcome is None:
                run.outcome = fact
        elif name == RUN_STEERED and run is not None:
            run.steers.append(fact)
        elif name in (RUN_INPUT_REQUESTED, RUN_INPUT_PROVIDED) and run is not None:
            run.waits.append(fact)
        elif name == EXCHANGE_OPENED:
            self.exchanges[aggregate] = fact
        elif name == SUBAGENT_SPAWNED:
            self.spawns[aggregate] = SpawnView(
                aggregate, fact, str(fact.get("child_key", "")), str(fact.get("run_id", ""))
            )
        elif name in REPORTED and aggregate in self.spawns:
            spawn = self.spawns[aggregate]
            spawn.reported = spawn.reported or fact
            if name == SUBAGENT_ARCHIVED:
                spawn.archived = fact
        elif name == RUN_YIELDED:
            self.yields[aggregate] = YieldView(aggregate, fact)
        elif name == YIELD_WOKEN and aggregate in self.yields:
            self.yields[aggregate].wakes.append(fact)
        elif name in (SCHEDULE_DEFINED, SCHEDULE_REDEFINED):
            self.schedules.setdefault(aggregate, ScheduleView(aggregate)).definitions.append(fact)
        elif name == SCHEDULE_FIRED and aggregate in self.schedules:
            self.schedules[aggregate].firings.append(fact)
        elif name == SCHEDULE_REMOVED and aggregate in self.schedules:
            self.schedules[aggregate].removals.append(fact)
        elif name == SESSION_OPENED:
            self.sessions[aggregate] = str(fact.get("key", ""))
        elif name in (SESSION_ARCHIVED, SESSION_DELETED):
            key = self.sessions.get(aggregate)
            if key is not None:
                self.closed.setdefault(key, fact)
        if aggregate in self.exchanges:
            self.exchange_facts[aggregate].append(fact)

    def _started(self, fact: Fact) -> None:
        deadline_ms = fact.get("deadline_at")
        from_ms = None
        if isinstance(deadline_ms, int | float):
            from_ms = datetime.fromtimestamp(deadline_ms / 1000, tz=fact.at.tzinfo)
        parent = fact.get("parent_run_id")
        view = RunView(
            id=fact.aggregate,
            session=str(fact.get("session_key", "")),
            step=str(fact.get("step", "")),
            started=fact.at,
            position=fact.position,
            timeout=float(fact.get("timeout_seconds", 0.0)),
            message=str(fact.get("message", "")),
            context=fact.get("context"),
            trace=fact.get("trace_id"),
            parent=str(parent) if parent else None,
            hops=int(fact.get("hops", 0)),
            turn=fact.get("turn"),
            exchange=fact.get("exchange_id"),
            recorded_deadline=from_ms,
        )
        self.runs[view.id] = view
        if view.parent is not None:
            self.children[view.parent].append(view.id)

    def ancestors(self, run: str) -> list[str]:
        """``run``'s chain of causes, nearest first (cut at a cycle, which the log should
        never have)."""
        found: list[str] = []
        at = self.runs.get(run)
        while at is not None and at.parent is not None and at.parent not in found:
            found.append(at.parent)
            at = self.runs.get(at.parent)
        return found

    def descendants(self, run: str) -> list[str]:
        """Every run ``run`` caused, directly or through others, ended or not."""
        found: list[str] = []
        seen = {run}
        todo = list(self.children.get(run, ()))
        while todo:
            child = todo.pop()
            if child in seen:
                continue
            seen.add(child)
            found.append(child)
            todo.extend(self.children.get(child, ()))
        return found

    @property
    def end(self) -> datetime | None:
        return self.facts[-1].at if self.facts else None


__all__ = ["READ_FIELDS", "LogModel", "RunView", "ScheduleView", "SpawnView", "YieldView"]
