"""The reference model's checks: what the contract says must be true of a log, given
the simulation's inputs, each derived here by the model's own arithmetic.

Each check takes the ``LogModel`` of a whole play (read at idle, after the drain) and
the ``World`` it was played in, and says what contradicts the contract; each names the
decision or doc it is written from.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from sessionwire.adapters.testkit.simulator.oracle.facts import Fact, World, from_ms, plus
from sessionwire.adapters.testkit.simulator.oracle.model import (
    ACCESS_REFUSED,
    AGENT_STEPS,
    BUSY_DECIDED,
    MESSAGE_APPENDED,
    MESSAGES_APPENDED,
    OUTCOMES,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_DISPATCHED,
    RUN_INPUT_PROVIDED,
    RUN_INPUT_REQUESTED,
    RUN_STARTED,
    RUN_TIMED_OUT,
    SESSION_OPENED,
    TURN_BLOCKED,
    LogModel,
    RunView,
)

REPLY_SKIP = "REPLY_SKIP"
KEPT = 3
"""Problems kept per check and per subject: one bug tends to show everywhere."""

Check = Callable[[LogModel, World], Iterator[str]]


@dataclass(frozen=True)
class OracleCheck:
    name: str
    promise: str
    check: Check


def _late(world: World, due: datetime, at: datetime, aggregate: str = "") -> bool:
    """Was ``at`` later than ``due`` allows? A timer due while the gateway was down
    fires when the next one serves (decision 8, 16); a save a store fault failed is
    made again later."""
    if at <= due or world.faulted(aggregate, due, at):
        return False
    up = world.was_down(due)
    return up is None or at > up


def reply_turns(model: LogModel, world: World) -> Iterator[str]:
    """Reply-back turns alternate requester, target, requester… (turn 1 in the
    requester's session), at most maxPingPongTurns of them, each once; the loop goes on
    while the last turn answered (not REPLY_SKIP) and stops after a REPLY_SKIP."""
    turns: dict[str, dict[int, list[RunView]]] = defaultdict(lambda: defaultdict(list))
    for run in model.runs.values():
        if run.step == "reply_back" and run.exchange and run.turn is not None:
            turns[run.exchange][int(run.turn)].append(run)
    limit = world.max_turns
    for exchange_id, opened in model.exchanges.items():
        requester = str(opened.get("requester_key", ""))
        target = str(opened.get("target_key", ""))
        by_turn = turns.get(exchange_id, {})
        blocked = any(fact.type == TURN_BLOCKED for fact in model.exchange_facts[exchange_id])
        for turn, runs in sorted(by_turn.items()):
            speaker = requester if turn % 2 == 1 else target
            if turn < 1 or turn > limit:
                yield f"exchange {exchange_id} ran turn {turn} (maxPingPongTurns {limit})"
            if len(runs) > 1:
                yield f"exchange {exchange_id} started reply-back turn {turn} {len(runs)} times"
            for run in runs:
                if run.session != speaker:
                    yield (
                        f"exchange {exchange_id}'s reply-back turn {turn} ran in {run.session}, "
                        f"not in {speaker} ({'requester' if turn % 2 else 'target'}'s turn)"
                    )
            if turn > 1:
                before = by_turn.get(turn - 1)
                said = _reply(before[0]) if before else None
                if said is None or said.strip() == REPLY_SKIP:
                    yield (
                        f"exchange {exchange_id} ran reply-back turn {turn} after turn "
                        f"{turn - 1} {'answered REPLY_SKIP' if said else 'gave no reply'}"
                    )
        primary = model.runs.get(str(opened.get("primary_run_id", "")))
        if blocked or primary is None or requester == target:
            continue  # a send into its own session has no one to reply to: no loop
        last, said = 0, _reply(primary)
        while said is not None and said.strip() not in ("", REPLY_SKIP) and last < limit:
            following = by_turn.get(last + 1)
            if not following:
                if not _closed_before_turn(model, (requester, target), primary):
                    yield (
                        f"exchange {exchange_id} stopped after turn {last}, whose reply "
                        f"went on, with {limit} turns allowed: turn {last + 1} never started"
                    )
                break
            last, said = last + 1, _reply(following[0])


def _reply(run: RunView) -> str | None:
    outcome = run.outcome
    if outcome is None or outcome.type != RUN_COMPLETED:
        return None
    reply = outcome.get("reply")
    return reply if isinstance(reply, str) else None


def _closed_before_turn(model: LogModel, keys: tuple[str, str], primary: RunView) -> bool:
    """A session of the exchange was archived or deleted: its turn cannot run."""
    return any(key in model.closed for key in keys)


def deadlines(model: LogModel, world: World) -> Iterator[str]:
    """Decision 16: a run's deadline is its start plus its timeout, recorded as such;
    no dispatch at or after it; no outcome but a timeout after it; the timeout recorded
    at it for a run that was handed to its agent (or, if the gateway was down then, when
    the next one opened)."""
    for run in model.runs.values():
        deadline = run.deadline
        if deadline is None:
            continue
        what = f"run {run.id} ({run.step} in {run.session})"
        if run.recorded_deadline is not None and run.recorded_deadline != deadline:
            yield (
                f"{what} recorded its deadline as {run.recorded_deadline.isoformat()}; its start "
                f"plus its {run.timeout:g}s timeout is {deadline.isoformat()}"
            )
        for dispatch in run.dispatches:
            if dispatch.at >= deadline:
                yield (
                    f"{what} was dispatched at {dispatch.at.isoformat()}, at or after its "
                    f"deadline {deadline.isoformat()}"
                )
        outcome = run.outcome
        if outcome is None:
            continue
        if outcome.type == RUN_TIMED_OUT:
            if outcome.at < deadline:
                yield (
                    f"{what} timed out at {outcome.at.isoformat()}, before its deadline "
                    f"{deadline.isoformat()}"
                )
            elif run.dispatches and _late(world, deadline, outcome.at, run.id):
                # A run still queued is timed out as it reaches the head of its mailbox
                # (never dispatched: decision 16's promise); a running one at its deadline.
                yield (
                    f"{what} timed out at {outcome.at.isoformat()}, later than its deadline "
                    f"{deadline.isoformat()} (the gateway was up then)"
                )
        elif outcome.at > deadline and not world.faulted(run.id, deadline, outcome.at):
            yield (
                f"{what} ended {outcome.type} at {outcome.at.isoformat()}, after its deadline "
                f"{deadline.isoformat()} (it should have timed out then)"
            )


def lanes(model: LogModel, world: World) -> Iterator[str]:
    """At every instant (every point of the log): at most maxConcurrent runs execute,
    a run waiting for a nested send lending its place to the runs it caused (docs:
    embedding, openai-runtime), and queueing for a place again when its wait is over;
    one run at a time per session (decision 6). A run waiting for input holds no place
    (decision 33). A crash ends whatever executed in the process that died."""
    limit = world.max_concurrent
    deaths = sorted(world.deaths)

    executing: dict[str, RunView] = {}
    lent: set[str] = set()
    back: set[str] = set()
    """Runs that lent their place and whose wait is over: each queues for a place again
    (it may not have one) until the log shows it at work (an event of its own or a run it
    caused starting)."""
    said = 0
    for fact in model.facts:
        while deaths and fact.position > deaths[0]:
            executing.clear()
            lent.clear()
            back.clear()
            deaths.pop(0)
        run = model.runs.get(fact.aggregate)
        seen_at_work = {fact.aggregate}
        if fact.type == RUN_STARTED and run is not None and run.parent is not None:
            seen_at_work.add(run.parent)
        back -= seen_at_work
        lent -= seen_at_work
        if run is None:
            continue
        if fact.type in OUTCOMES or fact.type == RUN_INPUT_REQUESTED:
            # A run waiting for input holds no slot (decision 33): its turn has ended.
            executing.pop(run.id, None)
            continue
        if fact.type != RUN_DISPATCHED:
            continue
        executing.pop(run.id, None)
        for other in list(executing.values()):
            if world.faulted(other.id, other.dispatches[-1].at, fact.at):
                del executing[other.id]  # its outcome waits for a retry, it runs no more
                continue
            if other.session == run.session and said < KEPT:
                said += 1
                yield (
                    f"run {run.id} ({run.step}) was dispatched in {run.session} at "
                    f"{fact.at.isoformat()} while its run {other.id} ({other.step}) executed"
                )
        executing[run.id] = run
        lending = {
            other
            for other in executing
            if any(
                child in executing or not model.runs[child].ended_by(fact.position + 1)
                for child in model.children.get(other, ())
            )
        }
        back |= {other for other in lent if other in executing and other not in lending}
        lent = lending
        count = len(executing) - len(lending) - len(back & set(executing) - lending)
        if count > limit and said < KEPT:
            said += 1
            yield (
                f"{count} runs executed at once at {fact.at.isoformat()} (log position "
                f"{fact.position}), maxConcurrent {limit}: "
                + ", ".join(sorted(set(executing) - lending))
            )


def archive_time(model: LogModel, world: World) -> Iterator[str]:
    """Decision 8: a kept child is archived archiveAfterMinutes after its run ended,
    never before, and not later than that (or than its report, if that came after)
    while the gateway was up; every kept child that reported is archived by idle."""
    minutes = world.archive_minutes
    for spawn in model.spawns.values():
        child = model.runs.get(spawn.run)
        if child is None or child.outcome is None or spawn.fact.get("cleanup") != "keep":
            continue
        due = plus(child.outcome.at, minutes * 60)
        if due is None:
            continue
        archived = spawn.archived or model.closed.get(spawn.child_key)
        what = f"child {spawn.child_key} (spawn {spawn.id})"
        if archived is None:
            end = model.end
            if spawn.reported is not None and end is not None and end > due:
                yield f"{what} ended at {child.outcome.at.isoformat()} and was never archived"
            continue
        if archived.at < due:
            yield (
                f"{what} was archived at {archived.at.isoformat()}, before its run's end "
                f"{child.outcome.at.isoformat()} plus {minutes:g} min"
            )
        latest = max(due, spawn.reported.at if spawn.reported is not None else due)
        if _late(world, latest, archived.at, archived.aggregate):
            yield (
                f"{what} was archived at {archived.at.isoformat()}, later than its run's end "
                f"plus {minutes:g} min ({due.isoformat()}) and its report"
            )
        recorded = spawn.fact.get("archive_after_minutes")
        if isinstance(recorded, int | float) and abs(recorded - minutes) > 1e-9:
            yield f"{what} recorded archiveAfterMinutes {recorded}, configured {minutes:g}"


def yield_wake(model: LogModel, world: World) -> Iterator[str]:
    """Decision 26: a yield wakes once, its woken turn starting with it; no later than
    its children's reports say (all: the last; any: the first) or its deadline (the
    yielding run's own, by default), whichever is first; never before; an ``all`` wake
    carries every child's report, any wake each report made before it, once."""
    for yielded in model.yields.values():
        fact = yielded.fact
        what = f"yield {yielded.id} ({fact.get('wait_for', 'all')} in {fact.get('session_key')})"
        if len(yielded.wakes) != 1:
            yield f"{what} woke {len(yielded.wakes)} times"
            if not yielded.wakes:
                continue
        wake = yielded.wakes[0]
        children = [str(child.get("spawn_id")) for child in fact.get("children", [])]
        reports: list[datetime] = []
        for spawn_id in children:
            spawn = model.spawns.get(spawn_id)
            if spawn is not None and spawn.reported is not None:
                reports.append(spawn.reported.at)
        mode = str(fact.get("wait_for", "all"))
        due = _yield_due(model, fact)
        if mode == "all":
            children_say = max(reports) if len(reports) == len(children) and reports else None
        else:
            children_say = min(reports) if reports else None
        latest = (
            min(at for at in (children_say, due) if at is not None)
            if (children_say or due)
            else None
        )
        if latest is not None and _late(world, latest, wake.at, yielded.id):
            yield (
                f"{what} woke at {wake.at.isoformat()}, later than {latest.isoformat()} "
                f"(children {children_say and children_say.isoformat()}, deadline "
                f"{due and due.isoformat()})"
            )
        if (children_say is None or wake.at < children_say) and (due is None or wake.at < due):
            yield f"{what} woke at {wake.at.isoformat()}, before its children or its deadline"
        carried = Counter(str(report.get("spawn_id")) for report in wake.get("reports", []))
        for spawn_id, count in carried.items():
            if count > 1:
                yield f"{what}'s wake carried the report of spawn {spawn_id} {count} times"
        for spawn_id in children:
            spawn = model.spawns.get(spawn_id)
            report = spawn.reported if spawn is not None else None
            if report is not None and report.position < wake.position and spawn_id not in carried:
                yield f"{what}'s wake lacks the report of spawn {spawn_id}, made before it"
        if mode == "all" and wake.get("reason") == "all" and set(carried) != set(children):
            yield f"{what} woke for all its children carrying {len(carried)} of {len(children)}"
        woken = model.runs.get(str(wake.get("wake_run_id", "")))
        if wake.get("refused"):
            # The woken turn was refused (its trace's budget): no turn may start; whether
            # the refusal was due is the trace-budget check's own count.
            if woken is not None:
                yield f"{what}'s woken turn was refused, yet run {woken.id} started"
        elif woken is None or woken.session != fact.get("session_key"):
            yield f"{what} woke, but its turn never started in its session"


def _yield_due(model: LogModel, fact: Fact) -> datetime | None:
    """The yielding run's deadline, unless the yield gave its own timeout (``due_at``
    later than the run's deadline would be wrong; sooner is a timeout given)."""
    run = model.runs.get(str(fact.get("run_id", "")))
    recorded = from_ms(fact.get("due_at"))
    deadline = run.deadline if run is not None else None
    if deadline is None:
        return recorded
    return min(deadline, recorded) if recorded is not None else deadline


def cancel_closure(model: LogModel, world: World) -> Iterator[str]:
    """docs/runs.md: a cancel cancels every run it caused, directly or through runs
    that had ended (the whole causal tree), that had started and not ended: each ends
    RunCancelled, or by itself no later than the cancel's instant."""
    for run in model.runs.values():
        cancel = run.outcome
        if cancel is None or cancel.type != RUN_CANCELLED:
            continue
        for child in model.descendants(run.id)[:200]:
            below = model.runs[child]
            if below.position > cancel.position or below.ended_by(cancel.position):
                continue
            outcome = below.outcome
            if outcome is None or outcome.type == RUN_CANCELLED or outcome.at <= cancel.at:
                continue
            yield (
                f"run {child} ({below.step} in {below.session}), caused by run {run.id} "
                f"(through {len(model.ancestors(child)) - len(model.ancestors(run.id)) - 1} "
                f"run(s) between), was running when it was cancelled at "
                f"{cancel.at.isoformat()} and ended {outcome.type} at {outcome.at.isoformat()}"
            )


def steer_target(model: LogModel, world: World) -> Iterator[str]:
    """A steer joins only a run still open (not ended when it was recorded); a busy
    send steered (decision 29) never joins the run that sent it nor any of its causes."""
    for run in model.runs.values():
        for steer in run.steers:
            if run.ended_by(steer.position):
                assert run.outcome is not None
                yield (
                    f"run {run.id} ({run.step} in {run.session}) was steered at "
                    f"{steer.at.isoformat()} after it ended {run.outcome.type}"
                )
    for fact in model.facts:
        if fact.type != BUSY_DECIDED or fact.get("decision") != "steered":
            continue
        joined = str(fact.get("steered_run_id", ""))
        sender = fact.get("parent_run_id")
        lineage = [str(sender), *model.ancestors(str(sender))] if sender else []
        if joined in lineage:
            yield (
                f"a send from run {sender} was steered into run {joined}, "
                f"{'itself' if joined == sender else 'which caused it'}"
            )
        target = model.runs.get(joined)
        if target is not None and target.ended_by(fact.position):
            yield f"a send was steered into run {joined}, which had ended"


def trace_budget(model: LogModel, world: World) -> Iterator[str]:
    """Decision 31 by the model's own count: each start of a run in a trace (any step:
    a send, a spawn, reply-back and announce turns, a spawn's report step, a yield's
    woken turn) is refused once the trace has maxRuns runs, maxSpawns spawned task runs
    (for a spawn), or its ended runs recorded maxTokens tokens; a refusal for the budget
    only when one of those holds. A busy send steered into a run asks it too, and counts
    against ``maxSteers`` (the lead's rule for the budgets branch)."""
    budget = world.budget
    if budget is None or world.gateways > 1:
        return  # two gateways may both pass one start (docs/budgets.md, limits)
    runs: Counter[str] = Counter()
    spawns: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    steers: Counter[str] = Counter()
    counted: set[str] = set()
    max_runs, max_spawns = budget.get("maxRuns"), budget.get("maxSpawns")
    max_tokens, max_steers = budget.get("maxTokens"), budget.get("maxSteers")

    def reached(trace: str, spawning: bool) -> str | None:
        if max_runs is not None and runs[trace] >= max_runs:
            return f"maxRuns {max_runs} reached ({runs[trace]} runs)"
        if spawning and max_spawns is not None and spawns[trace] >= max_spawns:
            return f"maxSpawns {max_spawns} reached ({spawns[trace]} spawns)"
        if max_tokens is not None and tokens[trace] >= max_tokens:
            return f"maxTokens {max_tokens} reached ({tokens[trace]} tokens)"
        return None

    for fact in model.facts:
        trace = fact.get("trace_id")
        if fact.type == RUN_STARTED and trace:
            step = str(fact.get("step"))
            why = reached(trace, step == "subagent_task")
            if why is not None:
                yield (
                    f"run {fact.aggregate} ({step} in {fact.get('session_key')}) started in "
                    f"trace {trace} past its budget: {why}"
                )
            runs[trace] += 1
            spawns[trace] += step == "subagent_task"
        elif fact.type in OUTCOMES and fact.aggregate not in counted:
            counted.add(fact.aggregate)
            run = model.runs.get(fact.aggregate)
            usage = fact.get("usage")
            if run is not None and run.trace and isinstance(usage, dict):
                total = usage.get("totalTokens")
                if total is None:
                    total = int(usage.get("input") or 0) + int(usage.get("output") or 0)
                tokens[run.trace] += int(total)
        elif fact.type == BUSY_DECIDED and fact.get("decision") == "steered" and trace:
            # The lead's rule (the budgets branch): a steer asks the sender's trace
            # budget like a start, and counts against maxSteers when that is set.
            why = reached(trace, False)
            if why is None and max_steers is not None and steers[trace] >= max_steers:
                why = f"maxSteers {max_steers} reached ({steers[trace]} steers)"
            if why is not None:
                yield f"a send in trace {trace} was steered into a run past its budget: {why}"
            steers[trace] += 1
        elif fact.type == ACCESS_REFUSED and fact.get("check") == "trace_budget" and trace:
            spawning = fact.get("tool") == "sessions_spawn"
            if reached(trace, spawning) is None and reached(trace, True) is None:
                yield (
                    f"a {fact.get('tool')} in trace {trace} was refused for the budget with "
                    f"{runs[trace]} runs, {spawns[trace]} spawns, {tokens[trace]} tokens "
                    f"recorded: none of its limits reached ({fact.get('message')})"
                )


def hop_count(model: LogModel, world: World) -> Iterator[str]:
    """Decision 17: a chain's first run is hop 1; an agent's own send or spawn adds one
    hop, the steps the gateway runs itself (reply-back, announce, a yield's wake) stay on
    their cause's hop (a steered run may go on from its steer's hop); no run is deeper
    than maxHops. A send steered into a busy run is a hop on its sender's chain (its
    sender's + 1), refused past maxHops."""
    limit = world.max_hops
    for fact in model.facts:
        if fact.type == BUSY_DECIDED and fact.get("decision") == "steered":
            sender = model.runs.get(str(fact.get("parent_run_id", "")))
            hops = fact.get("hops")
            if isinstance(hops, int) and hops > limit:
                yield f"a send steered at hop {hops} of its chain (maxHops {limit})"
            # A sender steered before it sent goes on from its steer's hop, as its own
            # runs may (below): its send is then deeper than its start says.
            resteered = sender is not None and any(
                steer.position < fact.position for steer in sender.steers
            )
            if (
                sender is not None
                and isinstance(hops, int)
                and hops != sender.hops + 1
                and not (resteered and hops > sender.hops + 1)
            ):
                yield f"a send steered from hop {sender.hops} records hop {hops}"
    for run in model.runs.values():
        what = f"run {run.id} ({run.step} in {run.session})"
        if run.hops > limit:
            yield f"{what} is hop {run.hops} of its chain (maxHops {limit})"
        if run.trace is None:
            continue
        parent = model.runs.get(run.parent) if run.parent else None
        if parent is None:
            if run.parent is None and run.step == "primary" and run.hops != 1:
                yield f"{what} starts a chain yet records hop {run.hops}"
            continue
        if parent.trace != run.trace:
            yield f"{what} is in trace {run.trace}, its cause {parent.id} in {parent.trace}"
        want = parent.hops + 1 if run.step in AGENT_STEPS else parent.hops
        steered = any(steer.position < run.position for steer in parent.steers)
        if run.hops != want and not (steered and run.hops > want):
            yield f"{what} records hop {run.hops}; caused by hop {parent.hops}, it is hop {want}"


LATE_AFTER_MS = 1000
"""docs/schedules.md: a firing more than a second after its due time is late."""


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def schedule_fires(model: LogModel, world: World) -> Iterator[str]:
    """Decision 36 by the model's own interval arithmetic: a schedule defined at A every
    I seconds is due at A + I, A + 2I, …; each due time is fired once, in order, none
    skipped (a firing after a gap names the first due time it stands for and the last,
    and is late); none before it is due, none later than the gateway allows (at once,
    or when the next gateway serves); a firing's run starts with it in the schedule's
    session (none when refused); and by the end of the log every due time that came
    has been fired. Cron schedules are left to the product's tests (the oracle keeps no
    calendar of its own)."""
    for schedule in model.schedules.values():
        facts = sorted(
            [*schedule.definitions, *schedule.firings, *schedule.removals],
            key=lambda fact: fact.position,
        )
        every_ms: int | None = None
        next_due: int | None = None
        session = ""
        active = False
        what = f"schedule {schedule.id}"
        for fact in facts:
            if fact.type in ("ScheduleDefined", "ScheduleRedefined"):
                every = fact.get("every_seconds")
                every_ms = int(every * 1000) if isinstance(every, int | float) else None
                next_due = _ms(fact.at) + every_ms if every_ms else None
                session = str(fact.get("session_key", ""))
                active = True
                continue
            if fact.type == "ScheduleRemoved":
                if active and next_due is not None and next_due < _ms(fact.at):
                    yield f"{what}'s due time {next_due} came before its removal, unfired"
                active = False
                continue
            if not active:
                yield f"{what} fired at {fact.at.isoformat()} after its removal"
                continue
            if every_ms is None or next_due is None:
                continue  # a cron schedule
            due, first = int(fact.get("due_at", 0)), int(fact.get("first_due_at", 0))
            late, at = bool(fact.get("late", False)), _ms(fact.at)
            if first != next_due:
                word = "again" if first < next_due else "skipping due times"
                yield f"{what} fired from {first} {word}: its next due time was {next_due}"
            if (due - next_due) % every_ms or due < first:
                yield f"{what} fired due time {due}, not one of its own (every {every_ms} ms)"
            if at < due:
                yield f"{what} fired due time {due} early, at {at}"
            if due + every_ms <= at:
                yield f"{what} fired at {at} for {due}, leaving due time {due + every_ms} out"
            if due > first and not late:
                yield f"{what} fired once for due times {first}..{due} without saying late"
            if not late and at - due > LATE_AFTER_MS:
                yield f"{what} fired {at - due} ms after its due time {due} without saying late"
            first_at = from_ms(first)
            if first_at is not None and _late(world, first_at, fact.at, schedule.id):
                yield f"{what} fired due time {first} at {fact.at.isoformat()}, later than allowed"
            run = model.runs.get(str(fact.get("run_id", "")))
            if fact.get("refused"):
                if run is not None:
                    yield f"{what}'s firing of {due} was refused, yet run {run.id} started"
            elif run is None or run.step != "scheduled" or run.session != session:
                yield f"{what} fired {due} but its run never started in {session}"
            elif run.started != fact.at:
                yield f"{what} fired {due} at {at}, its run started at {_ms(run.started)}"
            next_due = due + every_ms
        end = model.end
        if active and next_due is not None and end is not None and next_due < _ms(end):
            came = from_ms(next_due)
            if came is not None and not world.faulted(schedule.id, came, end):
                yield f"{what}'s due time {next_due} came (the log goes on to {end}) unfired"


def plan_once(model: LogModel, world: World) -> Iterator[str]:
    """A run's plan makes each of its sends and spawns once, however often the run was
    dispatched (a crash, a takeover): one run per nested plan per run that made it."""
    made: Counter[tuple[str, int]] = Counter()
    for run in model.runs.values():
        if run.parent is None or run.step not in AGENT_STEPS:
            continue
        plan = run.plan
        if plan is None or "cycle" in plan or not isinstance(plan.get("id"), int):
            continue
        made[(run.parent, int(plan["id"]))] += 1
    for (parent, plan_id), count in made.items():
        if count > 1:
            cause = model.runs[parent]
            yield (
                f"run {parent} ({cause.step} in {cause.session}, dispatched "
                f"{len(cause.dispatches)} time(s)) made plan {plan_id}'s call {count} times"
            )


def _lines(fact: Fact) -> list[tuple[int, str, int]]:
    """(stream version, role, timestamp) of each transcript line a message fact holds."""
    if fact.type == MESSAGE_APPENDED:
        message = fact.get("message", {})
        return [
            (int(fact.get("originator_version", 0)), message.get("role"), message.get("timestamp"))
        ]
    messages = fact.get("messages", [])
    first = int(fact.get("originator_version", 0)) - len(messages) + 1
    return [(first + i, m.get("role"), m.get("timestamp")) for i, m in enumerate(messages)]


def fork_history(model: LogModel, world: World) -> Iterator[str]:
    """A fork's history (decision 34, docs/fork.md) is the lines its source held at the
    fork, each flagged ``forkedFrom`` the source, then its own, none flagged. What the
    source held is the oracle's own count: the source's lines recorded before the fork's
    session opened, at or below the version the simulator asked for. A line the source
    recorded after the fork is never in it."""
    aggregates = {key: aggregate for aggregate, key in model.sessions.items()}
    opened = {
        str(fact.get("key", "")): fact.position
        for fact in model.facts
        if fact.type == SESSION_OPENED
    }
    for read in world.fork_reads:
        source = aggregates.get(read.source)
        forked_at = opened.get(read.key)
        if source is None or forked_at is None:
            continue
        held = [
            (role, timestamp)
            for fact in model.facts
            if fact.aggregate == source
            and fact.position < forked_at
            and fact.type in (MESSAGE_APPENDED, MESSAGES_APPENDED)
            for version, role, timestamp in _lines(fact)
            if read.at_version is None or version <= read.at_version
        ]
        # The leading flagged lines are what it shows as inherited.
        count = next((i for i, line in enumerate(read.shown) if line[2] is None), len(read.shown))
        inherited = [(role, at) for role, at, _ in read.shown[:count]]
        own = read.shown[count:]
        if inherited != held:
            extra = len(inherited) - len(held)
            yield (
                f"fork {read.key} of {read.source} (version {read.at_version or 'latest'}) "
                f"shows {len(inherited)} inherited line(s), the source held {len(held)} then"
                + (f": {extra} it recorded later" if extra > 0 else "")
            )
        if any(flag is not None for _, _, flag in own):
            yield f"fork {read.key} shows an inherited line after its own lines"
        if any(flag != read.source for _, _, flag in read.shown[: len(inherited)]):
            yield f"fork {read.key} flags a line as inherited from another session"


def _dies_between(world: World, first: Fact, then: Fact) -> bool:
    """Did a gateway die (or a store fault fail a save of the run) between the two
    facts? Only then may one turn be handed to its agent again."""
    if any(first.position <= death < then.position for death in world.deaths):
        return True
    return world.faulted(first.aggregate, first.at, then.at)


def input_waits(model: LogModel, world: World) -> Iterator[str]:
    """Decision 33 (docs/input.md), by the model's own walk of each run's turns: a turn
    that asks ends with the ask; a waiting run is handed to no agent until an answer is
    accepted; an answer is accepted only while the run waits, before its deadline, and
    (when the ask named options) only one of them, so never a second one; each accepted
    answer starts exactly one next turn (handed to its agent again only across a crash)
    unless a cancel or the deadline ends the run first; a run still waiting at its
    deadline ends timeout. What the simulator's answers were told matches the log: as
    many accepted as recorded, per run."""
    for run in model.runs.values():
        if not run.waits:
            continue
        what = f"run {run.id} ({run.step} in {run.session})"
        deadline = run.deadline
        outcome = run.outcome
        facts = sorted([*run.dispatches, *run.waits], key=lambda fact: fact.position)
        waiting: Fact | None = None
        answered: Fact | None = None
        turn: list[Fact] = []
        for fact in facts:
            if outcome is not None and fact.position > outcome.position:
                if fact.type == RUN_INPUT_PROVIDED:
                    yield (
                        f"{what} accepted an answer at {fact.at.isoformat()}, after its "
                        f"outcome {outcome.type}"
                    )
                continue  # a dispatch after the outcome: deadline-facts', runs-end's
            if fact.type == RUN_DISPATCHED:
                if waiting is not None:
                    yield (
                        f"{what} was handed to its agent at {fact.at.isoformat()} while it "
                        f"waited for input, with no answer"
                    )
                if turn and answered is not None and not _dies_between(world, turn[-1], fact):
                    yield (
                        f"{what} was handed to its agent {len(turn) + 1} times in one gateway "
                        f"process for the answer at {answered.at.isoformat()}"
                    )
                turn.append(fact)
            elif fact.type == RUN_INPUT_REQUESTED:
                if not turn:
                    yield f"{what} asked for input at {fact.at.isoformat()} with no turn run"
                waiting, answered, turn = fact, None, []
            else:
                if waiting is None:
                    yield (
                        f"{what} accepted an answer at {fact.at.isoformat()} while it did "
                        "not wait for one (a second answer, or one before its ask)"
                    )
                else:
                    options = waiting.get("options")
                    if isinstance(options, list) and fact.get("text") not in options:
                        yield f"{what} accepted an answer that is none of its options"
                if deadline is not None and fact.at >= deadline:
                    yield (
                        f"{what} accepted an answer at {fact.at.isoformat()}, at or after its "
                        f"deadline {deadline.isoformat()}"
                    )
                waiting, answered, turn = None, fact, []
        if waiting is not None:
            if outcome is None:
                end = max((at for at in (model.end, world.until) if at is not None), default=None)
                if deadline is not None and end is not None and end > deadline:
                    yield f"{what} still waits for input past its deadline {deadline.isoformat()}"
            elif outcome.type not in (RUN_TIMED_OUT, RUN_CANCELLED):
                yield f"{what} ended {outcome.type} while it waited for input, unanswered"
        elif (
            answered is not None
            and not turn
            and outcome is not None
            and outcome.type not in (RUN_TIMED_OUT, RUN_CANCELLED)
        ):
            yield f"{what} ended {outcome.type} with no turn run for its answer"
    provided = Counter(
        run.id
        for run in model.runs.values()
        for fact in run.waits
        if fact.type == RUN_INPUT_PROVIDED
    )
    accepted = Counter(run for run, _, taken in world.answers if taken)
    for run_id in set(provided) | set(accepted):
        if provided[run_id] != accepted[run_id]:
            yield (
                f"run {run_id}: {accepted[run_id]} answer(s) were told they were accepted, "
                f"{provided[run_id]} recorded"
            )


CHECKS: dict[str, OracleCheck] = {
    check.name: check
    for check in (
        OracleCheck(
            "reply-turns",
            "who speaks in each reply-back turn (requester, target, …) and how many turns "
            "(up to maxPingPongTurns, on until a REPLY_SKIP), derived from the plans",
            reply_turns,
        ),
        OracleCheck(
            "deadline-facts",
            "start + timeout is the deadline: no dispatch at or after it, no outcome but "
            "a timeout after it, the timeout recorded at it (decision 16)",
            deadlines,
        ),
        OracleCheck(
            "lane-limit",
            "at every instant at most maxConcurrent runs execute (a waiting send lends its "
            "place) and one per session",
            lanes,
        ),
        OracleCheck(
            "archive-time",
            "a kept child is archived at its run's end + archiveAfterMinutes (decision 8)",
            archive_time,
        ),
        OracleCheck(
            "yield-wake",
            "a yield wakes once, no later than its children's reports or its deadline, "
            "carrying every report made before it (decision 26)",
            yield_wake,
        ),
        OracleCheck(
            "cancel-closure",
            "a cancel reaches the whole causal tree, through runs that had ended",
            cancel_closure,
        ),
        OracleCheck(
            "steer-target",
            "a steer joins only an open run, never the sender's own run or its causes",
            steer_target,
        ),
        OracleCheck(
            "trace-budget",
            "every run start in a trace past session.agentToAgent.budget is refused, and "
            "no other, by the oracle's own count of runs, spawns and tokens (decision 31)",
            trace_budget,
        ),
        OracleCheck(
            "hop-count",
            "hops per causal chain: +1 per agent send or spawn, same hop for the gateway's "
            "own steps, never past maxHops (decision 17)",
            hop_count,
        ),
        OracleCheck(
            "schedules-fire-once",
            "each due time of an interval schedule fires once, in order, none skipped, "
            "none early or later than a gateway could, a gap once and late (decision 36)",
            schedule_fires,
        ),
        OracleCheck(
            "fork-history",
            "a fork shows the lines its source held at the fork (by the oracle's own count), "
            "flagged forkedFrom, then its own: never a line the source recorded later "
            "(decision 34)",
            fork_history,
        ),
        OracleCheck(
            "input-waits",
            "a waiting run is resumed only by an accepted answer, exactly one turn per "
            "answer, never a second answer, none at or after its deadline, which ends it "
            "timeout (decision 33)",
            input_waits,
        ),
        OracleCheck(
            "plan-once",
            "one plan's sends and spawns are made once across re-dispatches",
            plan_once,
        ),
    )
}


def check(model: LogModel, world: World) -> list[tuple[str, str]]:
    """Every check's problems with this log, as (check name, detail)."""
    problems: list[tuple[str, str]] = []
    for oracle in CHECKS.values():
        for index, problem in enumerate(oracle.check(model, world)):
            if index >= KEPT * 4:
                break
            problems.append((oracle.name, problem))
    return problems


__all__ = ["CHECKS", "OracleCheck", "check"]
