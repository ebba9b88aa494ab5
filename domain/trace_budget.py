"""Budgets per trace (contract decision 31, ADR 0034): how much work one chain may cost.

A trace is everything one outside message set going (decision 17): its sends, spawns,
reply-back turns, announce steps, and what those caused in turn. A budget bounds the
trace as a whole (runs, spawns, tokens, cost), whichever session or hop the work is on,
so an agent loop that respawns or re-sends ends once its trace has spent its budget.

The counts come from what is recorded (the trace's runs and their usage), never from a
counter kept beside them: a reopened gateway, or a second one, counts the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sessionwire.domain.policy import Refusal

OnExceeded = Literal["refuse", "cancel"]
BUDGET_RULE = "session.agentToAgent.budget"


@dataclass(frozen=True)
class TraceUsage:
    """What a trace has spent so far: runs started (any step), spawns, tokens, dollars,
    and the steers its runs sent (messages injected into other runs in flight)."""

    runs: int = 0
    spawns: int = 0
    tokens: int = 0
    cost: float = 0.0
    steers: int = 0

    def plus(self, *, spawn: bool, tokens: int, cost: float, steers: int = 0) -> TraceUsage:
        return TraceUsage(
            runs=self.runs + 1,
            spawns=self.spawns + (1 if spawn else 0),
            tokens=self.tokens + tokens,
            cost=self.cost + cost,
            steers=self.steers + steers,
        )


@dataclass(frozen=True)
class BudgetExceeded:
    """Which limit a trace has reached, with its count and its maximum."""

    limit: Literal["maxRuns", "maxSpawns", "maxSteers", "maxTokens", "maxCost"]
    used: float
    maximum: float

    @property
    def reason(self) -> str:
        used, maximum = _shown(self.limit, self.used), _shown(self.limit, self.maximum)
        return f"{self.limit} {maximum} reached ({used} {_UNITS[self.limit]} in this trace)"

    @property
    def message(self) -> str:
        return budget_message(self.reason)

    def refusal(self) -> Refusal:
        return Refusal("forbidden", self.message, "trace_budget", f"{BUDGET_RULE}.{self.limit}")


_UNITS = {
    "maxRuns": "runs",
    "maxSpawns": "spawns",
    "maxSteers": "steers",
    "maxTokens": "tokens",
    "maxCost": "USD",
}


def _shown(limit: str, value: float) -> str:
    if limit == "maxCost":
        return f"${value:.4f}".rstrip("0").rstrip(".") if value else "$0"
    return str(int(value))


def budget_message(reason: str) -> str:
    """The error a refused call answers (decision 31)."""
    return f"trace budget exceeded: {reason}"


@dataclass(frozen=True)
class TraceBudget:
    """``session.agentToAgent.budget``; a limit left unset (None) does not bound."""

    max_runs: int | None = None
    max_spawns: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    on_exceeded: OnExceeded = "refuse"
    max_steers: int | None = None

    @property
    def configured(self) -> bool:
        return any(
            limit is not None
            for limit in (
                self.max_runs,
                self.max_spawns,
                self.max_steers,
                self.max_tokens,
                self.max_cost,
            )
        )

    def exceeded(
        self, usage: TraceUsage, *, spawning: bool = False, steering: bool = False
    ) -> BudgetExceeded | None:
        """Why one more run (a spawn's when ``spawning``), or one more steer when
        ``steering``, may not go on in a trace that has spent ``usage``, or None. A steer
        starts no run but feeds one: it is refused once the trace may start no run
        either, and once it has sent ``maxSteers``. A limit of 0 refuses the first; tokens
        and cost are known only after runs end, so they refuse once reached."""
        if self.max_runs is not None and usage.runs >= self.max_runs:
            return BudgetExceeded("maxRuns", usage.runs, self.max_runs)
        if spawning and self.max_spawns is not None and usage.spawns >= self.max_spawns:
            return BudgetExceeded("maxSpawns", usage.spawns, self.max_spawns)
        if steering and self.max_steers is not None and usage.steers >= self.max_steers:
            return BudgetExceeded("maxSteers", usage.steers, self.max_steers)
        return self.spent(usage)

    def spent(self, usage: TraceUsage) -> BudgetExceeded | None:
        """The token or cost limit the trace's ended runs have reached, if any: what
        makes ``onExceeded: "cancel"`` stop the trace's work in flight."""
        if self.max_tokens is not None and usage.tokens >= self.max_tokens:
            return BudgetExceeded("maxTokens", usage.tokens, self.max_tokens)
        if self.max_cost is not None and usage.cost >= self.max_cost:
            return BudgetExceeded("maxCost", usage.cost, self.max_cost)
        return None

    def describe(self, usage: TraceUsage) -> dict[str, object]:
        """The budget and what the trace has spent, as ``session_status`` shows them."""
        limits: dict[str, object] = {"onExceeded": self.on_exceeded}
        for name, limit in (
            ("maxRuns", self.max_runs),
            ("maxSpawns", self.max_spawns),
            ("maxSteers", self.max_steers),
            ("maxTokens", self.max_tokens),
            ("maxCost", self.max_cost),
        ):
            if limit is not None:
                limits[name] = limit
        used: dict[str, object] = {"runs": usage.runs, "spawns": usage.spawns}
        if self.max_steers is not None:
            used["steers"] = usage.steers  # counted only when a limit bounds them
        used.update(tokens=usage.tokens, cost=round(usage.cost, 6))
        return {
            "limits": limits,
            "used": used,
            "exceeded": (found.reason if (found := self.exceeded(usage)) else None),
        }
