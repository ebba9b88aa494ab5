"""A yield (``sessions_yield``, decision 26): a turn ends to be woken when its sub-agents
report, or at a deadline, whichever is first — once.

``RunYielded`` records who waits (the session, and the run that yielded if a run did),
on which children (their spawns), how (``all`` or ``any``) and until when.
``YieldWoken`` records the wake: why (all, any, timeout), each finished child's report
handed to the woken turn, the children still running, and the woken turn's run, which
is started in the same transaction. A woken yield never wakes again, so the woken
turn, and each report in it, happens exactly once.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict, Field
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.subagent_announce import normalise_announce

YIELD_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/yields")

WaitFor = Literal["all", "any"]
WakeReason = Literal["all", "any", "timeout"]
YieldStatus = Literal["waiting", "woken"]


class YieldAlreadyWoken(SessionwireError):
    """A yield wakes once; a second wake is refused."""


def yield_id_for(run_id: str) -> UUID:
    """One yield per run: a turn that yields again (or is dispatched again after a crash
    and repeats the call) finds its first yield."""
    return uuid5(YIELD_NAMESPACE, run_id)


def wake_run_id_for(yield_id: UUID) -> UUID:
    return uuid5(yield_id, "wake")


class YieldChild(BaseModel):
    """A child the yield waits for: its spawn, session, task run and label."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    spawn_id: str
    child_key: str
    run_id: str
    label: str | None = None


class ChildReport(BaseModel):
    """A finished child's report as the woken turn receives it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    spawn_id: str
    child_key: str
    label: str | None = None
    status: str
    """The child run's outcome: ok, error, timeout or cancelled."""
    report: str
    """``Status:`` / ``Result:`` / ``Notes:`` as its announce normalised them."""


class ChildPending(BaseModel):
    """A child not finished at the wake: ``running`` (its task), or ``reporting`` (its
    task ended with ``outcome``, its announce step has not answered yet)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    spawn_id: str
    child_key: str
    label: str | None = None
    status: Literal["running", "reporting"]
    outcome: str | None = None


def child_report(outcome: str, reply: str | None, error: str | None) -> str:
    """A child's report as its announce step shapes it (without the stats line)."""
    result, notes = normalise_announce(reply, error=error)
    return f"Status: {outcome}\n\nResult:\n{result}\n\nNotes:\n{notes}"


class RunYieldState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    yield_id: str
    session_key: str
    agent_id: str
    run_id: str | None = None
    """The run that yielded; None when the tool was called outside any run."""
    wait_for: WaitFor = "all"
    due_at: int | None = None
    """When the yield wakes at the latest (ms since the epoch); None: no deadline."""
    message: str | None = None
    """The caller's private note, handed to the woken turn."""
    children: tuple[YieldChild, ...] = ()
    trace_id: str | None = None
    hops: int = 0
    status: YieldStatus = "waiting"
    reason: WakeReason | None = None
    wake_run_id: str | None = None
    reports: tuple[ChildReport, ...] = ()
    still_running: tuple[ChildPending, ...] = ()
    woken_at: int | None = None
    # Written only when set (a row stored before the field equals a rebuild).
    refused: str | None = Field(default=None, exclude_if=lambda refused: refused is None)
    """Why the woken turn was not started (its trace's budget): no run ``wake_run_id``."""

    @property
    def child_ids(self) -> list[str]:
        return [child.spawn_id for child in self.children]


@dataclass(frozen=True)
class AwaitChildren:
    """Wait until the children's reports say it may wake, or the clock reaches ``due_ms``."""

    due_ms: int | None


class RunYield(Aggregate):
    state: RunYieldState

    class RunYielded(Aggregate.Created):
        session_key: str
        agent_id: str
        run_id: str | None = None
        wait_for: WaitFor = "all"
        due_at: int | None = None
        message: str | None = None
        children: tuple[YieldChild, ...] = ()
        trace_id: str | None = None
        hops: int = 0

    class YieldWoken(Aggregate.Event):
        reason: WakeReason
        wake_run_id: str
        reports: tuple[ChildReport, ...] = ()
        still_running: tuple[ChildPending, ...] = ()
        refused: str | None = None
        """The woken turn was refused (its trace's budget, ADR 0034): it never starts."""

        def apply(self, aggregate: RunYield) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={
                    "status": "woken",
                    "reason": self.reason,
                    "wake_run_id": self.wake_run_id,
                    "reports": self.reports,
                    "still_running": self.still_running,
                    "woken_at": int(self.timestamp.timestamp() * 1000),
                    "refused": self.refused,
                }
            )

    def __init__(
        self,
        session_key: str,
        agent_id: str,
        run_id: str | None = None,
        wait_for: WaitFor = "all",
        due_at: int | None = None,
        message: str | None = None,
        children: tuple[YieldChild, ...] = (),
        trace_id: str | None = None,
        hops: int = 0,
    ) -> None:
        self.state = RunYieldState(
            yield_id=str(self.id),
            session_key=session_key,
            agent_id=agent_id,
            run_id=run_id,
            wait_for=wait_for,
            due_at=due_at,
            message=message,
            children=tuple(children),
            trace_id=trace_id,
            hops=hops,
        )

    @classmethod
    def record(
        cls,
        *,
        yield_id: UUID,
        session_key: str,
        agent_id: str,
        run_id: str | None,
        wait_for: WaitFor,
        due_at: int | None,
        message: str | None,
        children: Collection[YieldChild],
        causality: Causality | None,
        at: datetime,
    ) -> RunYield:
        if not children:
            raise ValueError("a yield waits for at least one child")
        return cls._create(
            cls.RunYielded,
            id=yield_id,
            timestamp=at,
            session_key=session_key,
            agent_id=agent_id,
            run_id=run_id,
            wait_for=wait_for,
            due_at=due_at,
            message=message,
            children=tuple(children),
            trace_id=causality.trace_id if causality else None,
            hops=causality.hops if causality else 0,
        )

    # Decisions ------------------------------------------------------------------------

    def next_step(self) -> AwaitChildren | None:
        if self.state.status != "waiting":
            return None
        return AwaitChildren(due_ms=self.state.due_at)

    def wake_reason(self, finished: Collection[str], now_ms: int) -> WakeReason | None:
        """Why it wakes now, given the spawn ids of the children that have reported;
        None: it keeps waiting. Children first: a wake with every report in it is
        ``all`` even when the deadline has passed too."""
        if self.state.status != "waiting":
            return None
        done = [spawn_id for spawn_id in self.state.child_ids if spawn_id in finished]
        if self.state.wait_for == "all" and len(done) == len(self.state.children):
            return "all"
        if self.state.wait_for == "any" and done:
            return "any"
        if self.state.due_at is not None and now_ms >= self.state.due_at:
            return "timeout"
        return None

    def wake_causality(self) -> Causality:
        """The woken turn's chain: it answers the run that yielded, on its hop."""
        state = self.state
        if state.trace_id is None:
            return Causality.root(str(wake_run_id_for(self.id)))
        return Causality(trace_id=state.trace_id, parent_run_id=state.run_id, hops=state.hops)

    # Commands -------------------------------------------------------------------------

    def wake(
        self,
        *,
        reason: WakeReason,
        reports: Collection[ChildReport],
        still_running: Collection[ChildPending],
        at: datetime,
        refused: str | None = None,
    ) -> UUID:
        """Record the wake (once: YieldAlreadyWoken after); the woken turn's run id (not
        started when ``refused`` says why it may not be)."""
        if self.state.status != "waiting":
            raise YieldAlreadyWoken(f"yield {self.id} woke already ({self.state.reason})")
        wake_run_id = wake_run_id_for(self.id)
        self.trigger_event(
            self.YieldWoken,
            timestamp=at,
            reason=reason,
            wake_run_id=str(wake_run_id),
            reports=tuple(reports),
            still_running=tuple(still_running),
            refused=refused,
        )
        return wake_run_id


REASON_LINES: dict[WakeReason, str] = {
    "all": "every sub-agent you waited for has finished",
    "any": "a sub-agent you waited for has finished",
    "timeout": "the wait timed out before the sub-agents you waited for finished",
}


def wake_message(state: RunYieldState) -> str:
    """What the woken turn is told: why it woke, each finished child's report, the
    children still running, and the note the yield left."""
    assert state.reason is not None, "only a woken yield has a wake message"
    lines = [f"[sessions_yield] You were woken: {REASON_LINES[state.reason]}."]
    if state.message:
        lines += ["", "Your note when you yielded:", state.message]
    for report in state.reports:
        name = f"{report.child_key} ({report.label})" if report.label else report.child_key
        lines += ["", f"Sub-agent {name} finished:", report.report]
    if state.still_running:
        lines += ["", "Still running:"]
        for pending in state.still_running:
            name = f"{pending.child_key} ({pending.label})" if pending.label else pending.child_key
            status = (
                f"reporting (its run ended: {pending.outcome})"
                if pending.status == "reporting"
                else "running"
            )
            lines.append(f"- {name}: {status}")
    return "\n".join(lines)
