"""The invariants the simulator checks, and the log reader that checks most of them.

Each invariant has a name (what ``--skip`` and a result's violations use) and what it
promises.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.application.ports.event_log import EventLog
from sessionwire.domain.busy_decision import busy_decision_id
from sessionwire.domain.trace_budget import TraceBudget, TraceUsage


@dataclass(frozen=True)
class Invariant:
    name: str
    promise: str


INVARIANTS: dict[str, Invariant] = {
    invariant.name: invariant
    for invariant in (
        Invariant(
            "slots-free",
            "a lane slot is held only by a running run; at idle every slot is free",
        ),
        Invariant(
            "runs-end",
            "every run ends with exactly one outcome (never two; none pending at idle)",
        ),
        Invariant(
            "deadlines",
            "no run is handed to an agent past its deadline (start + timeout)",
        ),
        Invariant(
            "exactly-once",
            "each ping-pong turn, announce and report is recorded and posted at most once",
        ),
        Invariant(
            "deliveries-settle",
            "a delivery that failed is retried until delivered or recorded abandoned",
        ),
        Invariant(
            "closed-sessions",
            "no run is handed to an agent in a deleted or archived session",
        ),
        Invariant(
            "hop-limit",
            "no chain of sends goes past session.agentToAgent.maxHops; every step's work ends",
        ),
        Invariant(
            "tool-answers",
            "a tool call always answers (no internal error, never raises)",
        ),
        Invariant(
            "cancel-outcome",
            "a cancelled run has exactly one outcome, RunCancelled, and is never handed to "
            "its agent after the cancel; once a cancel has answered, no run it caused that "
            "had started before it is left not ended",
        ),
        Invariant(
            "busy-decided",
            "a BusyDecided 'rejected' started no run; an 'interrupted' one cancelled (with "
            "RunCancelled) every run it names",
        ),
        Invariant(
            "send-delivery",
            "a sessions_send's delivery is what its recorded busy decision says: none or "
            "no run ahead 'started', N runs ahead 'queued' at N, 'rejected' 'refused' "
            "(decision 29)",
        ),
        Invariant(
            "subscribers",
            "a subscriber from position P sees exactly the events after P, in order, once "
            "each (across reopens)",
        ),
        Invariant(
            "crash-points",
            "every event recorded passed the simulator's crash point: each save path, on "
            "every store and writer, goes through the one awaited save (decision 23)",
        ),
        Invariant(
            "off-loop",
            "no SQL runs on the event loop's thread: every store call the gateway makes is "
            "awaited (the loop guard is armed for the whole simulation; decision 23)",
        ),
        Invariant(
            "trace-budget",
            "no run starts in a trace past session.agentToAgent.budget: its runs, its spawns, "
            "and the tokens its runs recorded before it started (decision 31)",
        ),
        Invariant(
            "steers",
            "a steer is recorded (RunSteered) only on a run that has not ended, and a steer "
            "answered ok is recorded",
        ),
        Invariant(
            "yields-wake-once",
            "every yield (RunYielded) wakes exactly once (one YieldWoken, whose woken turn "
            "starts; never two; none waiting at idle)",
        ),
        Invariant("read-models", "the read models equal a rebuild from the event log"),
        Invariant("hash-chain", "the hash chain verifies (audit verify is clean)"),
    )
}

# The decision 17 default.
DEFAULT_MAX_HOPS = 6
OUTCOMES = frozenset({"RunCompleted", "RunFailed", "RunTimedOut", "RunCancelled"})
DELIVERY_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/deliveries")
ANNOUNCE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/subagent-announces")


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str
    step: int | None = None
    """The index of the step after which it was seen (None: at the end)."""

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "step": self.step, "detail": self.detail}

    def __str__(self) -> str:
        where = "at the end" if self.step is None else f"after step {self.step}"
        return f"[{self.invariant}] {where}: {self.detail}"


@dataclass
class LogReader:
    """Reads the event log as it grows and keeps what the invariants need."""

    position: int = 0
    outcomes: Counter[UUID] = field(default_factory=Counter)
    runs: dict[UUID, tuple[str, str]] = field(default_factory=dict)
    turns: dict[UUID, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    announces: Counter[UUID] = field(default_factory=Counter)
    reports: Counter[UUID] = field(default_factory=Counter)
    # Delivery idempotency key -> the exchange or spawn it belongs to.
    delivery_owner: dict[str, UUID] = field(default_factory=dict)
    abandoned: set[UUID] = field(default_factory=set)
    parents: dict[UUID, UUID] = field(default_factory=dict)
    """Run -> the run that caused it (``parent_run_id``)."""
    started_at: dict[UUID, int] = field(default_factory=dict)
    """Run -> the log position of its RunStarted."""
    ended: dict[UUID, tuple[str, int]] = field(default_factory=dict)
    """Run -> its first outcome and that outcome's log position."""
    rejected: dict[UUID, str] = field(default_factory=dict)
    """A BusyDecided 'rejected' -> the run id its send answered with (none may start)."""
    interrupted: dict[UUID, tuple[str, ...]] = field(default_factory=dict)
    """A BusyDecided 'interrupted' -> the runs it says it cancelled."""
    wakes: dict[UUID, int] = field(default_factory=dict)
    """Yield -> how many YieldWoken it recorded."""
    wake_runs: dict[UUID, UUID] = field(default_factory=dict)
    """Yield -> the run its (first) wake started."""
    decided: dict[UUID, tuple[str, int | None]] = field(default_factory=dict)
    """Every BusyDecided -> its decision and the runs it recorded ahead of the send."""
    events: int = 0
    recorded: list[tuple[UUID, int]] = field(default_factory=list)
    """(aggregate, version) of each event read since the caller last cleared it."""
    digest: Any = field(default_factory=hashlib.sha256)
    """Over each event's type, aggregate, version and time: the run's fingerprint."""
    budget: TraceBudget | None = None
    """The script's trace budget, when it sets one (decision 31)."""
    spent: dict[str, TraceUsage] = field(default_factory=dict)
    """Trace -> what its runs recorded so far (runs, spawns, tokens)."""
    trace_of: dict[UUID, str] = field(default_factory=dict)
    budget_problems: list[str] = field(default_factory=list)
    steered: dict[UUID, int] = field(default_factory=dict)
    """Run -> the log position of its last RunSteered."""
    steer_problems: list[str] = field(default_factory=list)

    def read(self, store: EventLog) -> list[str]:
        """Read the events recorded since the last call; the problems they show."""
        problems: list[str] = []
        for position, event in store.events(start=self.position + 1):
            self.position = position
            self.events += 1
            name = type(event).__name__
            aggregate = event.originator_id
            self.recorded.append((aggregate, event.originator_version))
            self.digest.update(
                f"{name}|{aggregate}|{event.originator_version}|{event.timestamp}\n".encode()
            )
            if name == "RunStarted":
                self.runs[aggregate] = (
                    str(getattr(event, "session_key", "?")),
                    str(getattr(event, "step", "?")),
                )
                self.started_at[aggregate] = position
                parent = getattr(event, "parent_run_id", None)
                if parent:
                    self.parents[aggregate] = UUID(str(parent))
                self._admit(aggregate, event, position)
            elif name == "RunSteered":
                self.steered[aggregate] = position
                if aggregate in self.ended:
                    session, step = self.runs.get(aggregate, ("?", "?"))
                    self.steer_problems.append(
                        f"run {aggregate} ({step} in {session}) was steered at log position "
                        f"{position}, after its outcome {self.ended[aggregate][0]}"
                    )
            elif name in OUTCOMES:
                self._spend(aggregate, event)
                self.outcomes[aggregate] += 1
                self.ended.setdefault(aggregate, (name, position))
                if self.outcomes[aggregate] > 1:
                    session, step = self.runs.get(aggregate, ("?", "?"))
                    problems.append(
                        f"run {aggregate} ({step} in {session}) ended twice: another "
                        f"{name} at log position {position}"
                    )
            elif name == "ExchangeOpened":
                self.delivery_owner[str(uuid5(DELIVERY_NAMESPACE, str(aggregate)))] = aggregate
            elif name == "SubagentSpawned":
                self.delivery_owner[str(uuid5(ANNOUNCE_NAMESPACE, str(aggregate)))] = aggregate
            elif name == "PingPongTurn":
                turn = int(getattr(event, "turn", -1))
                self.turns[aggregate][turn] += 1
                if self.turns[aggregate][turn] > 1:
                    problems.append(f"exchange {aggregate} recorded ping-pong turn {turn} twice")
            elif name == "AnnounceDelivered":
                self.announces[aggregate] += 1
                if self.announces[aggregate] > 1:
                    problems.append(f"exchange {aggregate} recorded its announce delivered twice")
            elif name == "SubagentAnnounced":
                self.reports[aggregate] += 1
                if self.reports[aggregate] > 1:
                    problems.append(f"spawn {aggregate} recorded its report twice")
            elif name == "RunYielded":
                self.wakes.setdefault(aggregate, 0)
            elif name == "YieldWoken":
                self.wakes[aggregate] = self.wakes.get(aggregate, 0) + 1
                wake_run = _uuid(str(getattr(event, "wake_run_id", "")))
                if wake_run is not None:
                    self.wake_runs.setdefault(aggregate, wake_run)
                if self.wakes[aggregate] > 1:
                    problems.append(f"yield {aggregate} woke twice (log position {position})")
            elif name == "BusyDecided":
                decision = str(getattr(event, "decision", ""))
                self.decided[aggregate] = (decision, getattr(event, "runs_ahead", None))
                if decision == "rejected":
                    self.rejected[aggregate] = str(getattr(event, "run_id", None) or "")
                elif decision == "interrupted":
                    self.interrupted[aggregate] = tuple(
                        str(run) for run in getattr(event, "cancelled_run_ids", ())
                    )
            if "Abandon" in name:
                self.abandoned.add(aggregate)
        return problems

    def _admit(self, run: UUID, event: Any, position: int) -> None:
        """A run started: its trace must not have reached its budget before it."""
        trace = getattr(event, "trace_id", None)
        if not trace:
            return
        self.trace_of[run] = str(trace)
        step = str(getattr(event, "step", "?"))
        used = self.spent.get(str(trace), TraceUsage())
        if self.budget is not None:
            exceeded = self.budget.exceeded(used, spawning=step == "subagent_task")
            if exceeded is not None:
                self.budget_problems.append(
                    f"run {run} ({step} in {getattr(event, 'session_key', '?')}) started at "
                    f"log position {position} in trace {trace}, past its budget: "
                    f"{exceeded.reason}"
                )
        self.spent[str(trace)] = used.plus(spawn=step == "subagent_task", tokens=0, cost=0.0)

    def _spend(self, run: UUID, event: Any) -> None:
        """A run's first outcome: the tokens its usage recorded count in its trace."""
        trace = self.trace_of.get(run)
        usage = getattr(event, "usage", None)
        if trace is None or usage is None or run in self.ended:
            return
        total = usage.totalTokens if usage.totalTokens is not None else usage.input + usage.output
        used = self.spent.get(trace, TraceUsage())
        self.spent[trace] = TraceUsage(
            runs=used.runs, spawns=used.spawns, tokens=used.tokens + total, cost=used.cost
        )

    @property
    def fingerprint(self) -> str:
        return str(self.digest.hexdigest())

    def runs_without_one_outcome(self) -> list[UUID]:
        return [run for run in self.runs if self.outcomes[run] != 1]

    def yield_problems(self) -> list[str]:
        """Yields that did not wake exactly once, or whose woken turn never started
        (checked at idle, when every yield's deadline has passed)."""
        problems: list[str] = []
        for yielded, count in self.wakes.items():
            if count != 1:
                problems.append(f"yield {yielded} woke {count} times")
            elif self.wake_runs.get(yielded) not in self.runs:
                problems.append(f"yield {yielded} woke, but its turn never started")
        return problems

    def descendants(self, run: UUID) -> list[UUID]:
        """The runs ``run`` caused, directly or not (by ``parent_run_id``)."""
        children: dict[UUID, list[UUID]] = defaultdict(list)
        for child, parent in self.parents.items():
            children[parent].append(child)
        found: list[UUID] = []
        todo = list(children.get(run, ()))
        while todo:
            child = todo.pop()
            found.append(child)
            todo.extend(children.get(child, ()))
        return found

    def busy_problems(self) -> list[str]:
        """What the BusyDecided events read so far say that the log contradicts."""
        problems: list[str] = []
        for decision, run_id in self.rejected.items():
            if run_id and _uuid(run_id) in self.runs:
                problems.append(
                    f"busy decision {decision} rejected a send, yet run {run_id} started"
                )
        for decision, cancelled in self.interrupted.items():
            for run_id in cancelled:
                run = _uuid(run_id)
                outcome = self.ended.get(run) if run is not None else None
                if outcome is None or outcome[0] != "RunCancelled":
                    got = outcome[0] if outcome else "no outcome"
                    problems.append(
                        f"busy decision {decision} interrupted run {run_id}, which has {got}"
                    )
        return problems

    def delivery_problem(self, run_id: str, delivery: dict[str, Any]) -> str | None:
        """What the log says against the ``delivery`` a send answered for run ``run_id``."""
        run = _uuid(run_id)
        if run is None:
            return f"a send answered delivery {delivery} with run id {run_id!r}"
        decided = self.decided.get(busy_decision_id(run))
        if decided is None:
            expected: dict[str, Any] = {"status": "started"}
        elif decided[0] == "rejected":
            expected = {"status": "refused"}
        elif decided[1] == 0:
            expected = {"status": "started"}
        else:
            expected = {"status": "queued"}
            if decided[1] is not None:
                expected["position"] = decided[1]
        shown = {k: v for k, v in delivery.items() if k in ("status", "position")}
        if shown != expected:
            return (
                f"send {run_id} answered delivery {delivery}, but its recorded decision "
                f"({decided or 'none: the session was idle'}) says {expected}"
            )
        return None


def _uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


@dataclass
class Follower:
    """A simulated subscriber: where it started and what it has seen."""

    after: int
    """The position it subscribed after (P)."""
    seen: list[tuple[int, str]] = field(default_factory=list)
    """(position, type) of each event it received, in order."""
    position: int = 0
    """The last position it passed: where it resumes on a new gateway."""
    checked: int = 0
    """How many of ``seen`` have been checked against the log."""

    def __post_init__(self) -> None:
        self.position = self.after


def subscriber_problems(
    follower: Follower, log: list[tuple[int, str]], head: int, *, complete: bool
) -> list[str]:
    """What is wrong with what ``follower`` saw, given the sealed log's single appends
    ``log`` (position, type) from the start and its ``head`` when the follower last read:
    every event after P, in order, once each; with ``complete``, all of them up to head."""
    start = next(
        (at for at, (position, _) in enumerate(log) if position > follower.after), len(log)
    )
    expected = log[start:]
    problems: list[str] = []
    for index in range(follower.checked, len(follower.seen)):
        got = follower.seen[index]
        want = expected[index] if index < len(expected) else None
        if got != want:
            problems.append(
                f"subscriber from position {follower.after}: event #{index + 1} it saw is "
                f"{got[1]}@{got[0]}, the log has "
                f"{f'{want[1]}@{want[0]}' if want else 'nothing more'} there"
            )
            follower.checked = len(follower.seen)  # said once, not at every step
            return problems
    follower.checked = len(follower.seen)
    if complete:
        owed = [entry for entry in expected[len(follower.seen) :] if entry[0] <= head]
        if owed:
            problems.append(
                f"subscriber from position {follower.after} missed {len(owed)} event(s) "
                f"recorded before its last read, the first {owed[0][1]}@{owed[0][0]}"
            )
    return problems


__all__ = [
    "DEFAULT_MAX_HOPS",
    "INVARIANTS",
    "Follower",
    "Invariant",
    "LogReader",
    "Violation",
    "subscriber_problems",
]
