"""The invariants the simulator checks, and the log reader that checks most of them.

Each invariant has a name (what ``--skip`` and a result's violations use) and what it
promises.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from sessionwire.adapters.testkit.simulator.oracle import CHECKS, Fact
from sessionwire.adapters.testkit.simulator.oracle.model import READ_FIELDS
from sessionwire.adapters.testkit.simulator.script import read_plan
from sessionwire.application.ports.event_log import EventLog
from sessionwire.domain.busy_decision import busy_decision_id


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
            "a run is handed to an agent strictly before its deadline (start + timeout), "
            "never at it or after",
        ),
        Invariant(
            "liveness",
            "a run whose plan answers within its deadline completes ok; a run never handed "
            "to its agent timed out only while something held it back (its session busy, "
            "the lane full, the gateway down); a step that makes no progress is a failure, "
            "not a hang",
        ),
        Invariant(
            "turn-limit",
            "an exchange runs at most session.agentToAgent.maxPingPongTurns reply-back turns",
        ),
        Invariant(
            "transcript-lines",
            "a dispatched run appends exactly one user line, however often it was "
            "dispatched, and at most one reply line; a run never dispatched appends none",
        ),
        Invariant(
            "report-route",
            "a sub-agent's report goes to the route captured when it was spawned, "
            "whatever the requester's route is by the time it reports",
        ),
        Invariant(
            "exactly-once",
            "each ping-pong turn, announce and report is recorded at most once, and posted "
            "at most once per exchange or spawn (whatever idempotency keys it used)",
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
            "no run is more than session.agentToAgent.maxHops sends deep, and no send "
            "within it is refused (exactly: the chain's sends counted by the script's "
            "plans); every step's work ends",
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
            "a BusyDecided 'rejected' or 'steered' started no run (the send's run id, "
            "whichever event comes first); an 'interrupted' one cancelled (with "
            "RunCancelled) every run it names",
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
            "stale-owner",
            "a gateway that paused past its lease and was taken over records nothing more "
            "for the runs it lost: its late writes are refused (decision 24)",
        ),
        Invariant("read-models", "the read models equal a rebuild from the event log"),
        Invariant("hash-chain", "the hash chain verifies (audit verify is clean)"),
        Invariant(
            "send-delivery",
            "a sessions_send's delivery is what its recorded busy decision says: none or "
            "no run ahead 'started', N runs ahead 'queued' at N, 'rejected' 'refused', "
            "'steered' into the run its decision names (decision 29)",
        ),
        Invariant(
            "steers",
            "a steer is recorded (RunSteered) only on a run that has not ended, and a steer "
            "answered ok is recorded; a send answered 'steered' joined a run that had not "
            "ended (its BusyDecided 'steered' names the run, recorded with its RunSteered "
            "before any outcome of it)",
        ),
        Invariant(
            "visibility",
            "every sessions_list, sessions_history, sessions_send and sessions_search "
            "answer obeys the configured tools.sessions.visibility (self | tree | agent | "
            "all): no session outside the scope listed, read, sent into or found by a "
            "search, and none inside it refused for visibility (decisions 28, 35)",
        ),
        Invariant(
            "yields-wake-once",
            "every yield (RunYielded) wakes exactly once (one YieldWoken, whose woken turn "
            "starts; never two; none waiting at idle)",
        ),
    )
}
# The reference model's checks (``oracle/``): run at idle on the whole log.
INVARIANTS.update({name: Invariant(name, oracle.promise) for name, oracle in CHECKS.items()})

# The decision 17 default.
DEFAULT_MAX_HOPS = 6
OUTCOMES = frozenset({"RunCompleted", "RunFailed", "RunTimedOut", "RunCancelled"})
DELIVERY_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/deliveries")
ANNOUNCE_NAMESPACE = uuid5(NAMESPACE_URL, "https://sessionwire.dev/subagent-announces")
# Plans whose agent answers with a reply (``empty``: an empty one): the run completes ok.
ANSWERS_OK = frozenset({"ok", "slow", "empty"})
# Transcript lines a run writes itself: the words it was given and its agent's reply
# (a sub-agent's report in its requester's transcript is the spawn's line, not a run's);
# an answer to a run that asked (``user``: a person's or the answering session's words,
# on the run) is the next turn's words.
RUN_LINE_KINDS = frozenset({"a2a", "system", "agent", "announce", "user"})
# Runs whose first dispatch appends the words they were given to the transcript.
LINE_STEPS = frozenset({"primary", "subagent_task", "reply_back", "announce", "subagent_announce"})


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


@dataclass(frozen=True)
class RunRecord:
    """What the log says about one run, as the invariants need it."""

    session: str
    step: str
    started: datetime
    timeout_seconds: float
    message: str
    context: str | None
    turn: int | None
    exchange_id: str | None
    hops: int

    @property
    def deadline(self) -> datetime | None:
        """Start plus timeout, computed here (not the run's own ``deadline_at``)."""
        if not math.isfinite(self.timeout_seconds):
            return None
        return self.started + timedelta(seconds=self.timeout_seconds)


@dataclass
class LogReader:
    """Reads the event log as it grows and keeps what the invariants need."""

    position: int = 0
    outcomes: Counter[UUID] = field(default_factory=Counter)
    runs: dict[UUID, tuple[str, str]] = field(default_factory=dict)
    records: dict[UUID, RunRecord] = field(default_factory=dict)
    turns: dict[UUID, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    announces: Counter[UUID] = field(default_factory=Counter)
    reports: Counter[UUID] = field(default_factory=Counter)
    # Delivery idempotency key -> the exchange or spawn it belongs to.
    delivery_owner: dict[str, UUID] = field(default_factory=dict)
    announce_owner: dict[str, UUID] = field(default_factory=dict)
    """An announce run's id -> the exchange or spawn it announces for."""
    child_owner: dict[str, UUID] = field(default_factory=dict)
    """A spawned child's session key -> its spawn."""
    captured_routes: dict[UUID, tuple[str, str]] = field(default_factory=dict)
    """Spawn -> the report route (channel, to) it captured when it was spawned."""
    abandoned: set[UUID] = field(default_factory=set)
    parents: dict[UUID, UUID] = field(default_factory=dict)
    """Run -> the run that caused it (``parent_run_id``)."""
    started_at: dict[UUID, int] = field(default_factory=dict)
    """Run -> the log position of its RunStarted."""
    dispatched: dict[UUID, list[datetime]] = field(default_factory=lambda: defaultdict(list))
    """Run -> the time of each of its RunDispatched."""
    ended: dict[UUID, tuple[str, int]] = field(default_factory=dict)
    """Run -> its first outcome and that outcome's log position."""
    ended_at: dict[UUID, datetime] = field(default_factory=dict)
    user_lines: Counter[UUID] = field(default_factory=Counter)
    """Run -> transcript lines it appended as the words it was given (user role)."""
    reply_lines: Counter[UUID] = field(default_factory=Counter)
    """Run -> transcript lines it appended as its agent's reply (assistant role)."""
    reply_backs: dict[str, set[UUID]] = field(default_factory=lambda: defaultdict(set))
    """Exchange id -> the reply-back runs it started."""
    session_keys: dict[UUID, str] = field(default_factory=dict)
    """A session aggregate -> its key."""
    closed_at: dict[str, datetime] = field(default_factory=dict)
    """A session key -> when it was archived or deleted."""
    rejected: set[UUID] = field(default_factory=set)
    """The ids of BusyDecided 'rejected' (one per send: ``busy_decision_id(run id)``)."""
    run_of_decision: dict[UUID, UUID] = field(default_factory=dict)
    """``busy_decision_id(run)`` -> run, for every run started."""
    interrupted: dict[UUID, tuple[str, ...]] = field(default_factory=dict)
    """A BusyDecided 'interrupted' -> the runs it says it cancelled."""
    events: int = 0
    recorded: list[tuple[UUID, int]] = field(default_factory=list)
    """(aggregate, version) of each event read since the caller last cleared it."""
    digest: Any = field(default_factory=hashlib.sha256)
    """Over each event's type, aggregate, version and time: the run's fingerprint."""
    max_hops: int = DEFAULT_MAX_HOPS
    max_turns: int | None = None
    """The configured maxPingPongTurns (None: not checked)."""
    wakes: dict[UUID, int] = field(default_factory=dict)
    """Yield -> how many YieldWoken it recorded."""
    wake_runs: dict[UUID, UUID] = field(default_factory=dict)
    """Yield -> the run its (first) wake started."""
    wakes_refused: set[UUID] = field(default_factory=set)
    """Yields whose wake the trace's budget refused a turn (none starts)."""
    decided: dict[UUID, tuple[str, int | None]] = field(default_factory=dict)
    """Every BusyDecided -> its decision and the runs it recorded ahead of the send."""
    facts: list[Fact] = field(default_factory=list)
    """Every event read, as plain data: what the reference model (``oracle/``) reads."""
    steered: dict[UUID, int] = field(default_factory=dict)
    """Run -> the log position of its last RunSteered."""
    steer_problems: list[str] = field(default_factory=list)
    steer_lines: Counter[UUID] = field(default_factory=Counter)
    """Run -> steers whose transcript line (saved with the RunSteered, after it) is owed:
    a steer's line carries the steered run's provenance but is not the run's own."""
    steered_sends: dict[UUID, UUID] = field(default_factory=dict)
    """A BusyDecided 'steered' -> the run it says the send joined."""
    joined: Counter[UUID] = field(default_factory=Counter)
    """Run -> how many sends a BusyDecided 'steered' says joined it."""
    steers_seen: Counter[UUID] = field(default_factory=Counter)
    """Run -> its RunSteered events so far."""
    spawned_by: dict[str, str] = field(default_factory=dict)
    """A child session's key -> the session that spawned it (the visibility tree)."""
    asked: Counter[UUID] = field(default_factory=Counter)
    """Run -> its RunInputRequested: each ask's prompt is one more line of its agent's."""
    turns_dispatched: Counter[UUID] = field(default_factory=Counter)
    """Run -> its turns handed to an agent (the first, then one per answer that was):
    each appends the words it was given once (the answer is the next turn's)."""
    fresh_turn: set[UUID] = field(default_factory=set)
    """Runs whose next dispatch starts a turn (started, or answered since)."""

    def read(self, store: EventLog) -> list[tuple[str, str]]:
        """Read the events recorded since the last call; the problems they show, each
        as (invariant, detail)."""
        problems: list[tuple[str, str]] = []
        for position, event in store.events(start=self.position + 1):
            self.position = position
            problems += self.take(position, event)
        return problems

    def take(self, position: int, event: Any) -> list[tuple[str, str]]:
        """One event of the log at ``position``: what the invariants keep of it, and the
        problems it shows (a hand-made log is fed here by the invariants' own tests)."""
        problems: list[tuple[str, str]] = []
        self.events += 1
        name = type(event).__name__
        aggregate = event.originator_id
        self.recorded.append((aggregate, event.originator_version))
        self.digest.update(
            f"{name}|{aggregate}|{event.originator_version}|{event.timestamp}\n".encode()
        )
        fields = READ_FIELDS.get(name, ())
        data = {key: _plain(getattr(event, key, None)) for key in fields}
        self.facts.append(Fact(position, name, str(aggregate), event.timestamp, data))
        if name == "RunStarted":
            problems += self._run_started(position, event)
        elif name == "RunSteered":
            self.steered[aggregate] = position
            self.steers_seen[aggregate] += 1
            self.steer_lines[aggregate] += 1
            if aggregate in self.ended:
                session, step = self.runs.get(aggregate, ("?", "?"))
                self.steer_problems.append(
                    f"run {aggregate} ({step} in {session}) was steered at log position "
                    f"{position}, after its outcome {self.ended[aggregate][0]}"
                )
        elif name == "RunInputRequested":
            self.asked[aggregate] += 1
        elif name == "RunInputProvided":
            self.fresh_turn.add(aggregate)
        elif name == "RunDispatched":
            self.dispatched[aggregate].append(event.timestamp)
            if aggregate in self.fresh_turn:
                self.fresh_turn.discard(aggregate)
                self.turns_dispatched[aggregate] += 1
            record = self.records.get(aggregate)
            deadline = record.deadline if record is not None else None
            if record is not None and deadline is not None and event.timestamp >= deadline:
                problems.append(
                    (
                        "deadlines",
                        f"run {aggregate} ({record.step} in {record.session}) dispatched at "
                        f"{event.timestamp.isoformat()}, at or past its deadline "
                        f"{deadline.isoformat()}",
                    )
                )
        elif name in OUTCOMES:
            self.outcomes[aggregate] += 1
            self.ended.setdefault(aggregate, (name, position))
            self.ended_at.setdefault(aggregate, event.timestamp)
            if self.outcomes[aggregate] > 1:
                session, step = self.runs.get(aggregate, ("?", "?"))
                problems.append(
                    (
                        "runs-end",
                        f"run {aggregate} ({step} in {session}) ended twice: another "
                        f"{name} at log position {position}",
                    )
                )
        elif name == "ExchangeOpened":
            self.delivery_owner[str(uuid5(DELIVERY_NAMESPACE, str(aggregate)))] = aggregate
        elif name == "SubagentSpawned":
            self.delivery_owner[str(uuid5(ANNOUNCE_NAMESPACE, str(aggregate)))] = aggregate
            self.child_owner[str(event.child_key)] = aggregate
            spawner = getattr(event, "requester_key", None)
            if spawner:
                self.spawned_by[str(event.child_key)] = str(spawner)
            channel, to = getattr(event, "report_channel", None), getattr(event, "report_to", None)
            if getattr(event, "route_captured", False) and channel and to:
                self.captured_routes[aggregate] = (str(channel), str(to))
        elif name in ("AnnounceRequested", "SubagentAnnounceRequested"):
            self.announce_owner[str(event.run_id)] = aggregate
        elif name == "PingPongTurn":
            turn = int(getattr(event, "turn", -1))
            self.turns[aggregate][turn] += 1
            if self.turns[aggregate][turn] > 1:
                problems.append(
                    ("exactly-once", f"exchange {aggregate} recorded ping-pong turn {turn} twice")
                )
            if self.max_turns is not None and turn > self.max_turns:
                problems.append(
                    (
                        "turn-limit",
                        f"exchange {aggregate} recorded ping-pong turn {turn} "
                        f"(maxPingPongTurns {self.max_turns})",
                    )
                )
        elif name == "AnnounceDelivered":
            self.announces[aggregate] += 1
            if self.announces[aggregate] > 1:
                problems.append(
                    ("exactly-once", f"exchange {aggregate} recorded its announce delivered twice")
                )
        elif name == "SubagentAnnounced":
            self.reports[aggregate] += 1
            if self.reports[aggregate] > 1:
                problems.append(("exactly-once", f"spawn {aggregate} recorded its report twice"))
            problems += self._report_route(aggregate, event)
        elif name == "RunYielded":
            self.wakes.setdefault(aggregate, 0)
        elif name == "YieldWoken":
            self.wakes[aggregate] = self.wakes.get(aggregate, 0) + 1
            wake_run = _uuid(str(getattr(event, "wake_run_id", "")))
            if getattr(event, "refused", None):
                self.wakes_refused.add(aggregate)  # its trace's budget: no turn starts
            elif wake_run is not None:
                self.wake_runs.setdefault(aggregate, wake_run)
            if self.wakes[aggregate] > 1:
                problems.append(
                    ("yields-wake-once", f"yield {aggregate} woke twice (log position {position})")
                )
        elif name == "SessionOpened":
            self.session_keys[aggregate] = str(event.key)
        elif name in ("SessionArchived", "SessionDeleted"):
            key = self.session_keys.get(aggregate)
            if key is not None:
                self.closed_at.setdefault(key, event.timestamp)
        elif name in ("MessageAppended", "MessagesAppended"):
            problems += self._lines(event)
        elif name == "BusyDecided":
            decision = str(getattr(event, "decision", ""))
            self.decided[aggregate] = (decision, getattr(event, "runs_ahead", None))
            problems += _decision_names_its_run(aggregate, decision, getattr(event, "run_id", None))
            if decision == "rejected":
                self.rejected.add(aggregate)
                run = self.run_of_decision.get(aggregate)
                if run is not None:
                    problems.append(_rejected_yet_started(aggregate, run))
            elif decision == "interrupted":
                self.interrupted[aggregate] = tuple(
                    str(run) for run in getattr(event, "cancelled_run_ids", ())
                )
            elif decision == "steered":
                problems += self._steered_send(aggregate, getattr(event, "steered_run_id", None))
        if "Abandon" in name:
            self.abandoned.add(aggregate)
        return problems

    def _run_started(self, position: int, event: Any) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        run = event.originator_id
        record = RunRecord(
            session=str(getattr(event, "session_key", "?")),
            step=str(getattr(event, "step", "?")),
            started=event.timestamp,
            timeout_seconds=float(getattr(event, "timeout_seconds", math.inf)),
            message=str(getattr(event, "message", "")),
            context=getattr(event, "context", None),
            turn=getattr(event, "turn", None),
            exchange_id=getattr(event, "exchange_id", None),
            hops=int(getattr(event, "hops", 0) or 0),
        )
        self.records[run] = record
        self.fresh_turn.add(run)
        self.runs[run] = (record.session, record.step)
        self.started_at[run] = position
        parent = getattr(event, "parent_run_id", None)
        if parent:
            self.parents[run] = UUID(str(parent))
        decision = busy_decision_id(run)
        self.run_of_decision[decision] = run
        if decision in self.rejected:
            problems.append(_rejected_yet_started(decision, run))
        if decision in self.steered_sends:
            problems.append(_rejected_yet_started(decision, run, "steered"))
        if record.step == "reply_back" and record.exchange_id:
            runs = self.reply_backs[record.exchange_id]
            runs.add(run)
            if self.max_turns is not None and len(runs) > self.max_turns:
                problems.append(
                    (
                        "turn-limit",
                        f"exchange {record.exchange_id} started reply-back run {len(runs)} "
                        f"(turn {record.turn}; maxPingPongTurns {self.max_turns})",
                    )
                )
        depth = _depth(record)
        if record.hops > self.max_hops or (depth is not None and depth > self.max_hops):
            problems.append(
                (
                    "hop-limit",
                    f"run {run} ({record.step} in {record.session}) started "
                    f"{max(record.hops, depth or 0)} sends deep (maxHops {self.max_hops})",
                )
            )
        return problems

    def _report_route(self, spawn: UUID, event: Any) -> list[tuple[str, str]]:
        captured = self.captured_routes.get(spawn)
        channel, to = getattr(event, "channel", None), getattr(event, "to", None)
        if captured is None or channel is None or (channel, to) == captured:
            return []
        return [
            (
                "report-route",
                f"spawn {spawn} reported to {channel}:{to}, not to the route it captured "
                f"when spawned ({captured[0]}:{captured[1]})",
            )
        ]

    def _steered_send(self, decision: UUID, run_id: Any) -> list[tuple[str, str]]:
        """A send's BusyDecided 'steered': the run it joined had a RunSteered recorded
        with it (the same transaction, just before) and no outcome yet."""
        run = _uuid(str(run_id)) if run_id else None
        if run is None:
            return [("busy-decided", f"busy decision {decision} steered a send into no run")]
        self.steered_sends[decision] = run
        self.joined[run] += 1
        started = self.run_of_decision.get(decision)
        problems = [] if started is None else [_rejected_yet_started(decision, started, "steered")]
        if run in self.ended:
            outcome, at = self.ended[run]
            self.steer_problems.append(
                f"busy decision {decision} steered a send into run {run}, which had ended "
                f"({outcome} at log position {at})"
            )
        elif self.steers_seen[run] < self.joined[run]:
            self.steer_problems.append(
                f"busy decision {decision} steered a send into run {run}, which has no "
                "RunSteered recorded for it"
            )
        return problems

    def _lines(self, event: Any) -> list[tuple[str, str]]:
        provenance = getattr(event, "provenance", None)
        run_id = getattr(provenance, "run_id", None)
        kind = getattr(provenance, "kind", None)
        if not run_id or kind not in RUN_LINE_KINDS:
            return []
        messages = getattr(event, "messages", None) or [event.message]
        run = UUID(str(run_id))
        problems: list[tuple[str, str]] = []
        for message in messages:
            if message.role == "user" and self.steer_lines[run] > 0:
                self.steer_lines[run] -= 1  # the steer's line, not one the run wrote
                continue
            lines = self.user_lines if message.role == "user" else self.reply_lines
            lines[run] += 1
            # A run that asked for input says each prompt and hears each answer too.
            owed = self.asked[run] if message.role != "user" else self.turns_dispatched[run] - 1
            if lines[run] > 1 + max(0, owed):
                session, step = self.runs.get(run, ("?", "?"))
                problems.append(
                    (
                        "transcript-lines",
                        f"run {run} ({step} in {session}) appended its "
                        f"{'user' if message.role == 'user' else 'reply'} line "
                        f"{lines[run]} times",
                    )
                )
        return problems

    def yield_problems(self) -> list[str]:
        """Yields that did not wake exactly once, or whose woken turn never started
        (checked at idle, when every yield's deadline has passed)."""
        problems: list[str] = []
        for yielded, count in self.wakes.items():
            if count != 1:
                problems.append(f"yield {yielded} woke {count} times")
            elif yielded not in self.wakes_refused and self.wake_runs.get(yielded) not in self.runs:
                problems.append(f"yield {yielded} woke, but its turn never started")
        return problems

    def delivery_problem(self, run_id: str, delivery: dict[str, Any]) -> str | None:
        """What the log says against the ``delivery`` a send answered for run ``run_id``."""
        run = _uuid(run_id)
        if run is None:
            return f"a send answered delivery {delivery} with run id {run_id!r}"
        if delivery.get("status") == "steered":
            # The send's own run id is not in its answer: the run it joined is.
            if delivery.get("runId") == run_id and self.joined[run] > 0:
                return None
            return (
                f"send answered delivery {delivery} for run {run_id}, but no busy decision "
                "recorded a send steered into that run"
            )
        decided = self.decided.get(busy_decision_id(run))
        if decided is None:
            expected: dict[str, Any] = {"status": "started"}
        elif decided[0] == "rejected":
            expected = {"status": "refused"}
        elif decided[0] == "steered":
            expected = {"status": "steered"}
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

    @property
    def fingerprint(self) -> str:
        return str(self.digest.hexdigest())

    def runs_without_one_outcome(self) -> list[UUID]:
        return [run for run in self.runs if self.outcomes[run] != 1]

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
        """What the 'interrupted' BusyDecided events read so far say that the log
        contradicts (a 'rejected' one is checked as its events are read)."""
        problems: list[str] = []
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

    def cascade_problems(self) -> list[str]:
        """At idle: every run a cancelled run caused, that had started before the cancel
        and not ended by then, ended cancelled, or by itself at the cancel's instant (a
        race with the cascade), never later (a cascade a crash cut short, say)."""
        problems: list[str] = []
        for root, (outcome, cancelled_at) in self.ended.items():
            if outcome != "RunCancelled":
                continue
            when = self.ended_at[root]
            for child in self.descendants(root):
                ended = self.ended.get(child)
                if ended is None or self.started_at.get(child, cancelled_at) > cancelled_at:
                    continue  # pending (runs-end says it), or started after the cancel
                name, position = ended
                if name == "RunCancelled" or position < cancelled_at:
                    continue
                if self.ended_at[child] > when:
                    session, step = self.runs.get(child, ("?", "?"))
                    problems.append(
                        f"run {child} ({step} in {session}), caused by run {root} cancelled at "
                        f"{when.isoformat()}, ended {name} at "
                        f"{self.ended_at[child].isoformat()}: the cascade never reached it"
                    )
        return problems

    def line_problems(self) -> list[str]:
        """At idle: a dispatched run has its one user line; a run never dispatched none."""
        problems: list[str] = []
        for run, record in self.records.items():
            if record.step not in LINE_STEPS:
                continue
            want = self.turns_dispatched[run]
            got = self.user_lines[run]
            if got != want:
                problems.append(
                    f"run {run} ({record.step} in {record.session}), dispatched "
                    f"{len(self.dispatched.get(run, ()))} time(s) in {want} turn(s), appended "
                    f"{got} user line(s)"
                )
            completed = self.ended.get(run, ("",))[0] == "RunCompleted"
            if self.reply_lines[run] > self.asked[run] + completed:
                problems.append(
                    f"run {run} ({record.step} in {record.session}) appended "
                    f"{self.reply_lines[run]} reply line(s) for {self.asked[run]} ask(s) "
                    f"and its outcome {self.ended.get(run, ('none',))[0]}"
                )
        return problems

    def liveness_problems(self, *, lane: int, down: list[tuple[datetime, datetime]]) -> list[str]:
        """At idle: each run's outcome against what its plan says its agent does.

        ``lane`` is maxConcurrent; ``down`` the spans of virtual time in which a gateway
        died and a new one opened (a crash interrupts whatever ran then)."""
        problems: list[str] = []
        for run, record in self.records.items():
            outcome = self.ended.get(run)
            if outcome is None or outcome[0] == "RunCancelled":
                continue  # runs-end says it; a cancel is an outcome asked for
            end = self.ended_at[run]
            deadline = record.deadline
            need = seconds_to_answer(record)
            if need is None or deadline is None:
                continue  # its plan does not answer ok, or cannot say by when
            dispatches = self.dispatched.get(run, [])
            if dispatches:
                last = dispatches[-1]
                if outcome[0] == "RunCompleted" or _overlaps(down, last, end):
                    continue
                if last + timedelta(seconds=need) < deadline:
                    problems.append(
                        f"run {run} ({record.step} in {record.session}) was handed to its "
                        f"agent at {last.isoformat()}, its plan answers ok within {need:g}s, "
                        f"its deadline is {deadline.isoformat()}, yet it ended {outcome[0]}"
                    )
                continue
            closed = self.closed_at.get(record.session)
            if closed is not None and closed <= end:
                continue  # its session was archived or deleted before it could run
            if _overlaps(down, record.started, end) or self._held_back(run, record, end, lane):
                continue
            problems.append(
                f"run {run} ({record.step} in {record.session}), whose plan answers ok, was "
                f"never handed to its agent and ended {outcome[0]} at {end.isoformat()} with "
                "nothing holding it back (its session idle and open, the lane free, no crash)"
            )
        return problems

    def _held_back(self, run: UUID, record: RunRecord, end: datetime, lane: int) -> bool:
        """Was something ahead of ``run`` while it waited (start to ``end``)? A run of
        its session that started before it and had not ended when it started; or at
        least ``lane`` runs handed to agents and not ended in that span."""
        start = self.started_at[run]
        busy = 0
        for other, other_record in self.records.items():
            if other == run:
                continue
            other_end = self.ended_at.get(other)
            alive = other_end is None or other_end > record.started
            if other_record.session == record.session and self.started_at[other] < start and alive:
                return True
            dispatches = self.dispatched.get(other)
            if dispatches and dispatches[0] <= end and alive:
                busy += 1
        return busy >= lane


def seconds_to_answer(record: RunRecord) -> float | None:
    """How long the agent takes to answer ok, by the run's plan (what the simulated
    agents do with it); None when the plan does not answer ok or cannot say by when (a
    nested send that waits also waits for a lane slot back)."""
    step = record.step
    if step in ("primary", "subagent_task", "reply_back"):
        plan = read_plan(record.message)
    else:
        plan = read_plan(record.context, record.message)
    if plan is None:
        return 0.0  # "(nothing to do)"
    if step == "reply_back":
        return 0.0
    if step in ("primary", "subagent_task"):
        if plan.get("kind", "ok") not in ANSWERS_OK or "ask" in plan:
            return None  # an ask waits for a person: its outcome is the answer's turn's
        calls = list(plan.get("calls", []))
        if "cycle" in plan:
            calls.append({"tool": "send", "wait": plan.get("wait", 0)})
        if any(float(call.get("wait", 0) or 0) > 0 for call in calls if call.get("tool") == "send"):
            return None
        return float(plan.get("delay", 0) if plan.get("kind") == "slow" else 0)
    return 0.0 if plan.get("ann", "say") in ("say", "skip") else None


def _depth(record: RunRecord) -> int | None:
    """How many sends deep the script's plan says the run is (primary and sub-agent
    task runs: the plan its message carries)."""
    if record.step not in ("primary", "subagent_task"):
        return None
    plan = read_plan(record.message)
    if plan is None:
        return None
    try:
        return int(plan.get("depth", 1))
    except (TypeError, ValueError):
        return None


def _overlaps(spans: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> bool:
    return any(down <= end and up >= start for down, up in spans)


def _decision_names_its_run(
    decision: UUID, outcome: str, run_id: str | None
) -> list[tuple[str, str]]:
    """A decision names the send's run (its own id derives from that run's) unless it
    rejected or steered the send, which started nothing: then it names none."""
    if outcome in ("rejected", "steered"):
        if run_id is None:
            return []
        return [
            ("busy-decided", f"busy decision {decision} {outcome} a send yet names run {run_id}")
        ]
    run = _uuid(str(run_id)) if run_id else None
    if run is not None and busy_decision_id(run) == decision:
        return []
    return [
        (
            "busy-decided",
            f"busy decision {decision} ({outcome}) names run {run_id}, not the send's run",
        )
    ]


def _rejected_yet_started(decision: UUID, run: UUID, outcome: str = "rejected") -> tuple[str, str]:
    return ("busy-decided", f"busy decision {decision} {outcome} a send, yet its run {run} started")


def _plain(value: Any) -> Any:
    """A field as plain data for the reference model: models become dicts."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


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
    "RunRecord",
    "Violation",
    "seconds_to_answer",
    "subscriber_problems",
]
