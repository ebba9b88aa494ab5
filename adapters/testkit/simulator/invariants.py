"""The invariants the simulator checks, and the log reader that checks most of them.

Each invariant has a name (what ``--skip`` and a result's violations use), what it
promises, and, when it holds only with work not yet merged, which work that is.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.application.ports.event_log import EventLog


@dataclass(frozen=True)
class Invariant:
    name: str
    promise: str
    needs: str | None = None
    """The feature it needs, while that is not in the gateway yet."""


INVARIANTS: dict[str, Invariant] = {
    invariant.name: invariant
    for invariant in (
        Invariant(
            "slots-free",
            "a lane slot is held only by a running run; at idle every slot is free",
            needs="slots that belong to runs (issue 12 item 2)",
        ),
        Invariant(
            "runs-end",
            "every run ends with exactly one outcome (never two; none pending at idle)",
        ),
        Invariant(
            "deadlines",
            "no run is handed to an agent past its deadline (start + timeout)",
            needs="deadlines as facts (issue 12 item 3)",
        ),
        Invariant(
            "exactly-once",
            "each ping-pong turn, announce and report is recorded and posted at most once",
        ),
        Invariant(
            "deliveries-settle",
            "a delivery that failed is retried until delivered or recorded abandoned",
            needs="the delivery outbox (issue 12 item 5)",
        ),
        Invariant(
            "closed-sessions",
            "no run is handed to an agent in a deleted or archived session",
        ),
        Invariant(
            "hop-limit",
            "no chain of sends goes past session.agentToAgent.maxHops; every step's work ends",
            needs="causality and a hop limit (issue 12 item 4)",
        ),
        Invariant(
            "tool-answers",
            "a tool call always answers (no internal error, never raises)",
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
    events: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    """Over each event's type, aggregate, version and time: the run's fingerprint."""

    def read(self, store: EventLog) -> list[str]:
        """Read the events recorded since the last call; the problems they show."""
        problems: list[str] = []
        for position, event in store.events(start=self.position + 1):
            self.position = position
            self.events += 1
            name = type(event).__name__
            aggregate = event.originator_id
            self.digest.update(
                f"{name}|{aggregate}|{event.originator_version}|{event.timestamp}\n".encode()
            )
            if name == "RunStarted":
                self.runs[aggregate] = (
                    str(getattr(event, "session_key", "?")),
                    str(getattr(event, "step", "?")),
                )
            elif name in OUTCOMES:
                self.outcomes[aggregate] += 1
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
            if "Abandon" in name:
                self.abandoned.add(aggregate)
        return problems

    @property
    def fingerprint(self) -> str:
        return str(self.digest.hexdigest())

    def runs_without_one_outcome(self) -> list[UUID]:
        return [run for run in self.runs if self.outcomes[run] != 1]


__all__ = ["DEFAULT_MAX_HOPS", "INVARIANTS", "Invariant", "LogReader", "Violation"]
