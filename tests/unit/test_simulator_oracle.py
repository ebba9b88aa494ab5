"""The reference model's checks (``adapters/testkit/simulator/oracle``), each fed a
hand-made log it must pass and logs that break what it checks.

The logs are written from the contract, not recorded by the product: an event is its
name and plain fields, as the oracle reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sessionwire.adapters.testkit.simulator.oracle import CHECKS, Fact, LogModel, World
from sessionwire.adapters.testkit.simulator.oracle.facts import ForkRead

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
A, B, C = "agent:main:main", "agent:beta:main", "agent:main:discord:group:ops"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Log:
    """A log written by hand: each ``add`` is the next position."""

    def __init__(self) -> None:
        self.facts: list[Fact] = []

    def add(self, type_: str, aggregate: str, seconds: float, **data: Any) -> Log:
        self.facts.append(Fact(len(self.facts) + 1, type_, aggregate, at(seconds), data))
        return self

    def run(
        self,
        run: str,
        seconds: float,
        *,
        session: str = A,
        step: str = "primary",
        timeout: float = 600,
        parent: str | None = None,
        trace: str | None = "t1",
        hops: int = 1,
        **data: Any,
    ) -> Log:
        return self.add(
            "RunStarted",
            run,
            seconds,
            session_key=session,
            step=step,
            timeout_seconds=timeout,
            parent_run_id=parent,
            trace_id=trace,
            hops=hops,
            message=data.pop("message", ""),
            **data,
        )

    def ran(
        self, run: str, start: float, end: float, outcome: str = "RunCompleted", **kw: Any
    ) -> Log:
        """A run dispatched at ``start`` and ended at ``end`` (started at ``start``)."""
        reply = kw.pop("reply", "done")
        self.run(run, start, **kw).add("RunDispatched", run, start, attempt=1)
        if outcome == "RunCompleted":
            return self.add(outcome, run, end, reply=reply)
        return self.add(outcome, run, end)


def problems(name: str, log: Log, world: World | None = None) -> list[str]:
    world = world or World(config={})
    return list(CHECKS[name].check(LogModel.of(log.facts), world))


def config(**agent_to_agent: Any) -> dict[str, Any]:
    return {"session": {"agentToAgent": agent_to_agent}}


# reply-turns -------------------------------------------------------------------------


def exchange(turns: list[tuple[str, str]], *, primary_reply: str = "done") -> Log:
    """A send from A to B: its primary run, then reply-back turns (session, reply)."""
    log = Log().ran("p", 0, 1, session=B, reply=primary_reply)
    log.add("ExchangeOpened", "x", 0, requester_key=A, target_key=B, primary_run_id="p")
    for turn, (session, reply) in enumerate(turns, start=1):
        log.ran(
            f"r{turn}",
            turn,
            turn + 0.5,
            session=session,
            step="reply_back",
            turn=turn,
            exchange_id="x",
            parent="p",
            reply=reply,
        )
    return log


def test_reply_turns_alternate_and_stop_at_the_skip() -> None:
    world = World(config=config(maxPingPongTurns=5))
    assert problems("reply-turns", exchange([(A, "turn 1"), (B, "REPLY_SKIP")]), world) == []


@pytest.mark.parametrize(
    ("turns", "limit", "said"),
    [
        ([(B, "turn 1"), (A, "REPLY_SKIP")], 5, "not in agent:main:main"),  # wrong speaker
        ([(A, "REPLY_SKIP"), (B, "turn 2")], 5, "answered REPLY_SKIP"),  # went on after skip
        ([(A, "turn 1")], 5, "turn 2 never started"),  # stopped too soon
        ([(A, "turn 1"), (B, "turn 2")], 1, "maxPingPongTurns 1"),  # one turn too many
        ([], 2, "turn 1 never started"),  # no loop at all
    ],
)
def test_reply_turns_see_a_wrong_loop(turns: list[tuple[str, str]], limit: int, said: str) -> None:
    found = problems("reply-turns", exchange(turns), World(config=config(maxPingPongTurns=limit)))
    assert any(said in problem for problem in found), found


def test_reply_turns_a_send_into_its_own_session_has_no_loop() -> None:
    log = Log().ran("p", 0, 1)
    log.add("ExchangeOpened", "x", 0, requester_key=A, target_key=A, primary_run_id="p")
    assert problems("reply-turns", log) == []


# deadline-facts ----------------------------------------------------------------------


def test_deadlines_a_timeout_at_the_deadline_passes() -> None:
    log = Log().ran("r", 0, 30, "RunTimedOut", timeout=30)
    assert problems("deadline-facts", log) == []


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (Log().ran("r", 0, 70, timeout=30), "after its deadline"),  # ended ok 40 s late
        (Log().ran("r", 0, 35, "RunTimedOut", timeout=30), "later than its deadline"),
        (Log().ran("r", 0, 20, "RunTimedOut", timeout=30), "before its deadline"),
        (
            Log().run("r", 0, timeout=30).add("RunDispatched", "r", 30, attempt=1),
            "at or after its deadline",
        ),
        (
            Log().run("r", 0, timeout=30, deadline_at=int(at(31).timestamp() * 1000)),
            "recorded its deadline",
        ),
    ],
)
def test_deadlines_see_a_wrong_time(log: Log, said: str) -> None:
    found = problems("deadline-facts", log)
    assert any(said in problem for problem in found), found


def test_deadlines_a_timeout_due_while_down_is_recorded_when_the_next_gateway_opens() -> None:
    log = Log().ran("r", 0, 50, "RunTimedOut", timeout=30)
    assert problems("deadline-facts", log, World(config={}, down=((at(20), at(50)),))) == []
    assert problems("deadline-facts", log, World(config={}, down=((at(20), at(40)),)))


# lane-limit --------------------------------------------------------------------------


def lane(limit: int) -> World:
    return World(config={"agents": {"defaults": {"maxConcurrent": limit}}})


def test_lanes_runs_in_turn_pass() -> None:
    log = Log().ran("a", 0, 5).ran("b", 5, 9, session=B)
    assert problems("lane-limit", log, lane(1)) == []


def test_lanes_two_runs_at_once_with_one_slot_fail() -> None:
    log = Log().run("a", 0).add("RunDispatched", "a", 0, attempt=1)
    log.ran("b", 1, 2, session=B).add("RunCompleted", "a", 3, reply="x")
    assert any("2 runs executed at once" in p for p in problems("lane-limit", log, lane(1)))
    assert problems("lane-limit", log, lane(2)) == []


def test_lanes_a_waiting_send_lends_its_slot_and_a_crash_frees_all() -> None:
    log = Log().run("a", 0).add("RunDispatched", "a", 0, attempt=1)
    log.ran("b", 1, 2, session=B, parent="a", hops=2).add("RunCompleted", "a", 3, reply="x")
    assert problems("lane-limit", log, lane(1)) == []
    crashed = Log().run("a", 0).add("RunDispatched", "a", 0, attempt=1)
    crashed.ran("b", 1, 2, session=B)
    assert problems("lane-limit", crashed, World(config=lane(1).config, deaths=(2,))) == []


def test_lanes_two_runs_of_one_session_at_once_fail() -> None:
    log = Log().run("a", 0).add("RunDispatched", "a", 0, attempt=1).ran("b", 1, 2)
    assert any("while its run a" in p for p in problems("lane-limit", log, lane(4)))


# archive-time ------------------------------------------------------------------------


def spawned(archived_after: float | None, minutes: float = 60) -> tuple[Log, World]:
    log = Log().ran("c", 0, 10, session="agent:main:subagent:1", step="subagent_task")
    log.add(
        "SubagentSpawned",
        "s",
        0,
        child_key="agent:main:subagent:1",
        run_id="c",
        cleanup="keep",
        archive_after_minutes=minutes,
    )
    log.add("SubagentAnnounced", "s", 11)
    if archived_after is not None:
        log.add("SubagentArchived", "s", 10 + archived_after)
    world = World(config={"agents": {"defaults": {"subagents": {"archiveAfterMinutes": minutes}}}})
    return log, world


def test_archive_at_the_end_plus_the_minutes_passes() -> None:
    assert problems("archive-time", *spawned(3600)) == []


@pytest.mark.parametrize(
    ("after", "said"),
    [(3540, "before its run's end"), (3660, "later than"), (None, "never archived")],
)
def test_archive_at_a_wrong_time_fails(after: float | None, said: str) -> None:
    log, world = spawned(after)
    log.add("SessionPatched", "other", 7 * 86_400)  # the log goes on past the archive time
    assert any(said in p for p in problems("archive-time", log, world))


# yield-wake --------------------------------------------------------------------------


def yielded(
    mode: str,
    wake_at: float,
    reports: list[str],
    *,
    wakes: int = 1,
    refused: str | None = None,
    turn: bool = True,
) -> Log:
    log = Log().ran("y", 0, 1, timeout=600)
    children = []
    for index, report_at in ((1, 5.0), (2, 8.0)):
        log.add(
            "SubagentSpawned",
            f"s{index}",
            0,
            child_key=f"k{index}",
            run_id=f"c{index}",
            cleanup="delete",
        )
        children.append({"spawn_id": f"s{index}", "child_key": f"k{index}"})
        if report_at < wake_at or (report_at == wake_at):
            log.add("SubagentAnnounced", f"s{index}", report_at)
    log.facts.sort(key=lambda fact: fact.at)
    log.add("RunYielded", "Y", 1, session_key=A, run_id="y", wait_for=mode, children=children)
    for _ in range(wakes):
        log.add(
            "YieldWoken",
            "Y",
            wake_at,
            reason=mode,
            wake_run_id="w",
            reports=[{"spawn_id": spawn} for spawn in reports],
            refused=refused,
        )
    if turn:
        log.run("w", wake_at, step="yield_wake", parent="y")
    for index, report_at in ((1, 5.0), (2, 8.0)):
        if report_at > wake_at:
            log.add("SubagentAnnounced", f"s{index}", report_at)
    return log


def test_yields_wake_once_on_time_with_every_report() -> None:
    assert problems("yield-wake", yielded("all", 8, ["s1", "s2"])) == []
    assert problems("yield-wake", yielded("any", 5, ["s1"])) == []
    # A woken turn refused for its trace's budget starts no run (whether the refusal
    # was due is trace-budget's count).
    assert (
        problems("yield-wake", yielded("all", 8, ["s1", "s2"], refused="maxRuns", turn=False)) == []
    )


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (yielded("all", 9, ["s1", "s2"]), "later than"),  # woke a second late
        (yielded("any", 8, ["s1", "s2"]), "later than"),  # waited for all
        (yielded("all", 8, ["s1"]), "lacks the report of spawn s2"),
        (yielded("all", 8, ["s1", "s2"], wakes=2), "woke 2 times"),
        (yielded("all", 5, ["s1"]), "before its children"),
        (yielded("all", 8, ["s1", "s2"], turn=False), "its turn never started"),
        (yielded("all", 8, ["s1", "s2"], refused="maxRuns"), "was refused, yet run w started"),
    ],
)
def test_yields_see_a_wrong_wake(log: Log, said: str) -> None:
    found = problems("yield-wake", log)
    assert any(said in problem for problem in found), found


# cancel-closure ----------------------------------------------------------------------


def tree(grandchild: str, ended_at: float) -> Log:
    """R sent to M (which ended), M sent to G (still running when R is cancelled)."""
    log = Log().run("R", 0).add("RunDispatched", "R", 0, attempt=1)
    log.ran("M", 1, 2, session=B, parent="R", hops=2)
    log.run("G", 1.5, session=C, parent="M", hops=3).add("RunDispatched", "G", 1.5, attempt=1)
    log.add("RunCancelled", "R", 5)
    return log.add(grandchild, "G", ended_at, reply="late")


def test_cancel_reaches_through_an_ended_middle() -> None:
    assert problems("cancel-closure", tree("RunCancelled", 5)) == []


def test_cancel_stopping_at_an_ended_middle_fails() -> None:
    found = problems("cancel-closure", tree("RunCompleted", 9))
    assert any("run G" in problem and "1 run(s) between" in problem for problem in found)


# steer-target ------------------------------------------------------------------------


def steered(into: str) -> Log:
    """Run P (in A) sent to B, whose run S waits; P is the sender's cause of run Q."""
    log = Log().run("P", 0).add("RunDispatched", "P", 0, attempt=1)
    log.run("Q", 1, session=B, parent="P", hops=2).add("RunDispatched", "Q", 1, attempt=1)
    log.run("O", 1, session=C, trace="t2").add("RunDispatched", "O", 1, attempt=1)
    return log.add(
        "BusyDecided", "d", 2, decision="steered", steered_run_id=into, parent_run_id="Q"
    )


def test_a_steer_into_another_open_run_passes() -> None:
    assert problems("steer-target", steered("O")) == []


def test_a_steer_into_the_senders_lineage_fails() -> None:
    assert any("which caused it" in p for p in problems("steer-target", steered("P")))
    assert any("itself" in p for p in problems("steer-target", steered("Q")))


def test_a_steer_after_the_end_fails() -> None:
    log = Log().ran("r", 0, 1).add("RunSteered", "r", 2, steered_by=A)
    assert any("after it ended" in p for p in problems("steer-target", log))
    ended = Log().ran("O", 0, 1)
    ended.add("BusyDecided", "d", 2, decision="steered", steered_run_id="O", parent_run_id=None)
    assert any("which had ended" in p for p in problems("steer-target", ended))


# trace-budget ------------------------------------------------------------------------


def test_budget_counts_every_start_the_wake_too() -> None:
    world = World(config=config(budget={"maxRuns": 2}))
    log = Log().ran("a", 0, 1).ran("b", 1, 2, step="reply_back", parent="a")
    assert problems("trace-budget", log, world) == []
    log.run("w", 3, step="yield_wake", parent="a")
    assert any("yield_wake" in p and "maxRuns 2" in p for p in problems("trace-budget", log, world))


def test_budget_counts_spawns_and_tokens_itself() -> None:
    spawns = World(config=config(budget={"maxSpawns": 1}))
    log = Log().ran("a", 0, 1, step="subagent_task").ran("b", 1, 2, step="reply_back")
    assert problems("trace-budget", log, spawns) == []
    log.run("c", 3, step="subagent_task")
    assert any("maxSpawns 1" in p for p in problems("trace-budget", log, spawns))
    tokens = World(config=config(budget={"maxTokens": 15}))
    used = (
        Log().run("a", 0).add("RunCompleted", "a", 1, reply="x", usage={"input": 10, "output": 5})
    )
    used.run("b", 2)
    assert any("maxTokens 15" in p for p in problems("trace-budget", used, tokens))


def test_budget_a_refusal_with_nothing_reached_fails() -> None:
    world = World(config=config(budget={"maxRuns": 3}))
    log = (
        Log()
        .ran("a", 0, 1)
        .add(
            "AccessRefused",
            "z",
            1,
            check="trace_budget",
            tool="sessions_send",
            trace_id="t1",
            message="exceeded",
        )
    )
    assert any("none of its limits reached" in p for p in problems("trace-budget", log, world))
    log.ran("b", 2, 3).ran("c", 4, 5).add(
        "AccessRefused", "z2", 6, check="trace_budget", tool="sessions_send", trace_id="t1"
    )
    assert len(problems("trace-budget", log, world)) == 1  # the first refusal only


def test_budget_a_steer_asks_it_and_counts_against_max_steers() -> None:
    log = Log().ran("a", 0, 1).ran("q", 1, 5, session=B, parent="a", hops=2)
    log.add("BusyDecided", "d1", 2, decision="steered", steered_run_id="q", trace_id="t1")
    assert problems("trace-budget", log, World(config=config(budget={"maxRuns": 3}))) == []
    assert any(
        "steered into a run past its budget: maxRuns 2" in p
        for p in problems("trace-budget", log, World(config=config(budget={"maxRuns": 2})))
    )
    log.add("BusyDecided", "d2", 3, decision="steered", steered_run_id="q", trace_id="t1")
    found = problems("trace-budget", log, World(config=config(budget={"maxSteers": 1})))
    assert len(found) == 1
    assert "maxSteers 1 reached (1 steers)" in found[0]


# hop-count ---------------------------------------------------------------------------


def test_a_steered_send_is_a_hop_on_its_senders_chain() -> None:
    log = Log().ran("a", 0, 1).ran("q", 1, 5, session=B, parent="a", hops=2)
    log.add(
        "BusyDecided", "d", 2, decision="steered", steered_run_id="a", parent_run_id="q", hops=3
    )
    assert problems("hop-count", log) == []
    wrong = Log().ran("a", 0, 1).ran("q", 1, 5, session=B, parent="a", hops=2)
    wrong.add(
        "BusyDecided", "d", 2, decision="steered", steered_run_id="a", parent_run_id="q", hops=2
    )
    assert any("records hop 2" in p for p in problems("hop-count", wrong))
    deep = World(config=config(maxHops=2))
    assert any("maxHops 2" in p for p in problems("hop-count", log, deep))


def test_a_sender_steered_before_it_sends_goes_on_from_its_steers_hop() -> None:
    # q (hop 1) was steered at hop 2 by a send from p; its own send steered on is hop 3.
    log = Log().run("q", 0, session=B).add("RunSteered", "q", 1, steered_by=A)
    log.add(
        "BusyDecided", "d", 2, decision="steered", steered_run_id="x", parent_run_id="q", hops=3
    )
    assert problems("hop-count", log) == []
    unsteered = Log().run("q", 0, session=B)
    unsteered.add(
        "BusyDecided", "d", 2, decision="steered", steered_run_id="x", parent_run_id="q", hops=3
    )
    assert any("records hop 3" in p for p in problems("hop-count", unsteered))


def test_hops_count_agent_sends_only() -> None:
    log = Log().ran("a", 0, 1).ran("b", 1, 2, parent="a", hops=2, session=B)
    log.ran("r", 2, 3, step="reply_back", parent="b", hops=2)
    assert problems("hop-count", log) == []


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (Log().ran("a", 0, 1).ran("b", 1, 2, parent="a", hops=1), "it is hop 2"),
        (Log().ran("a", 0, 1).ran("r", 1, 2, step="reply_back", parent="a", hops=2), "it is hop 1"),
        (Log().ran("a", 0, 1, hops=2), "starts a chain"),
        (Log().ran("a", 0, 1, hops=7), "maxHops 6"),
    ],
)
def test_hops_see_a_wrong_count(log: Log, said: str) -> None:
    found = problems("hop-count", log)
    assert any(said in problem for problem in found), found


# plan-once ---------------------------------------------------------------------------


def test_a_plans_call_made_twice_across_dispatches_fails() -> None:
    call = 'sim:{"id": 7, "kind": "ok"}'
    once = Log().ran("p", 0, 5).ran("c1", 1, 2, parent="p", hops=2, session=B, message=call)
    assert problems("plan-once", once) == []
    once.ran("c2", 3, 4, parent="p", hops=2, session=B, message=call)
    assert any("plan 7's call 2 times" in p for p in problems("plan-once", once))


# fork-history ------------------------------------------------------------------------


def forked_log() -> Log:
    """Source A ("s") with two lines, forked into F at version 3, then a third line."""
    log = Log().add("SessionOpened", "s", 0, key=A)
    for version, seconds in ((2, 1), (3, 2)):
        message = {"role": "user", "timestamp": seconds * 1000}
        log.add("MessageAppended", "s", seconds, originator_version=version, message=message)
    log.add("SessionOpened", "f", 3, key="agent:main:fork")
    later = {"role": "user", "timestamp": 4000}
    return log.add("MessageAppended", "s", 4, originator_version=4, message=later)


def fork_world(*shown: tuple[str, int, str | None], at_version: int | None = None) -> World:
    read = ForkRead("agent:main:fork", A, at_version, shown)
    return World(config={}, fork_reads=(read,))


def test_a_fork_that_shows_what_its_source_held_passes() -> None:
    world = fork_world(("user", 1000, A), ("user", 2000, A), ("assistant", 5000, None))
    assert problems("fork-history", forked_log(), world) == []
    back = fork_world(("user", 1000, A), at_version=2)
    assert problems("fork-history", forked_log(), back) == []


@pytest.mark.parametrize(
    ("shown", "said"),
    [
        (
            (("user", 1000, A), ("user", 2000, A), ("user", 4000, A)),
            "shows 3 inherited line(s), the source held 2 then: 1 it recorded later",
        ),
        ((("user", 1000, A),), "shows 1 inherited line(s), the source held 2"),
        ((("user", 1000, A), ("user", 2000, A), ("user", 5000, None), ("user", 6, A)), "after"),
        ((("user", 1000, B), ("user", 2000, B)), "from another session"),
    ],
)
def test_a_fork_that_shows_other_lines_than_its_source_held_fails(
    shown: tuple[tuple[str, int, str | None], ...], said: str
) -> None:
    found = problems("fork-history", forked_log(), fork_world(*shown))
    assert any(said in problem for problem in found), found


def test_every_check_is_an_invariant_by_name() -> None:
    from sessionwire.adapters.testkit.simulator import INVARIANTS

    assert set(CHECKS) <= set(INVARIANTS)


# schedules-fire-once -----------------------------------------------------------------

T0_MS = int(T0.timestamp() * 1000)
SCHEDULE, CRON_SESSION = "s1", "agent:main:cron:tick"


def schedule_log(every: float = 60) -> Log:
    return Log().add(
        "ScheduleDefined",
        SCHEDULE,
        0,
        schedule_id="tick",
        every_seconds=every,
        session_key=CRON_SESSION,
    )


def fire(log: Log, seconds: float, due: float, first: float | None = None, **data: Any) -> Log:
    run = f"r{len(log.facts)}"
    log.add(
        "ScheduleFired",
        SCHEDULE,
        seconds,
        due_at=T0_MS + int(due * 1000),
        first_due_at=T0_MS + int((due if first is None else first) * 1000),
        run_id=run,
        late=data.pop("late", False),
        refused=data.pop("refused", None),
    )
    if not log.facts[-1].get("refused"):
        log.run(run, seconds, session=CRON_SESSION, step="scheduled", trace=run)
    return log


def test_each_due_time_fired_once_in_order_passes() -> None:
    log = fire(fire(fire(schedule_log(), 60, 60), 120, 120), 180, 180)
    assert problems("schedules-fire-once", log.add("Message", "x", 200)) == []


def test_a_gap_while_down_fired_once_late_passes() -> None:
    world = World(config={}, down=((at(70), at(400)),))
    log = fire(fire(schedule_log(), 60, 60), 400, 360, first=120, late=True)
    assert problems("schedules-fire-once", log, world) == []


def test_a_due_time_fired_twice_skipped_or_left_out_is_caught() -> None:
    twice = fire(fire(schedule_log(), 60, 60), 61, 60)
    assert any("again" in p for p in problems("schedules-fire-once", twice))
    skipped = fire(schedule_log(), 120, 120)
    assert any("skipping due times" in p for p in problems("schedules-fire-once", skipped))
    unfired = fire(schedule_log(), 60, 60).add("Message", "x", 500)
    assert any("unfired" in p for p in problems("schedules-fire-once", unfired))
    removed = schedule_log().add("ScheduleRemoved", SCHEDULE, 90)
    assert any("before its removal" in p for p in problems("schedules-fire-once", removed))


def test_a_gap_not_said_late_early_or_late_firings_are_caught() -> None:
    world = World(config={}, down=((at(70), at(400)),))
    quiet = fire(fire(schedule_log(), 60, 60), 400, 360, first=120)
    assert any("without saying late" in p for p in problems("schedules-fire-once", quiet, world))
    early = fire(schedule_log(), 59, 60)
    assert any("early" in p for p in problems("schedules-fire-once", early))
    # Up all along, yet fired an hour after its due time.
    slow = fire(schedule_log(3600), 7200, 3600, late=True)
    assert any("later than allowed" in p for p in problems("schedules-fire-once", slow))


def test_a_firings_run_must_start_with_it_unless_refused() -> None:
    log = schedule_log().add(
        "ScheduleFired",
        SCHEDULE,
        60,
        due_at=T0_MS + 60_000,
        first_due_at=T0_MS + 60_000,
        run_id="lost",
        late=False,
    )
    assert any("never started" in p for p in problems("schedules-fire-once", log))
    refused = fire(schedule_log(), 60, 60, refused="maxRuns 0 reached")
    assert problems("schedules-fire-once", refused) == []
    refused.run("r1", 60, session=CRON_SESSION, step="scheduled")
    assert any("was refused, yet" in p for p in problems("schedules-fire-once", refused))


def asked_log(timeout: float = 600) -> Log:
    """A run that asks in its first turn (waiting from 10 s on)."""
    log = Log().run("r1", 0, timeout=timeout).add("RunDispatched", "r1", 0, attempt=1)
    return log.add("RunInputRequested", "r1", 10, prompt="go on?", options=["yes", "no"])


def test_one_answer_one_turn_and_a_wait_that_times_out_pass() -> None:
    answered = asked_log().add("RunInputProvided", "r1", 20, text="yes")
    answered.add("RunDispatched", "r1", 20, attempt=2).add("RunCompleted", "r1", 21, reply="x")
    world = World(config={}, answers=(("r1", "yes", True), ("r1", "yes", False)))
    assert problems("input-waits", answered, world) == []
    timed_out = asked_log(timeout=60).add("RunTimedOut", "r1", 60)
    assert problems("input-waits", timed_out) == []
    # Answered, then a crash: its turn is handed to its agent again in the next process.
    crashed = asked_log().add("RunInputProvided", "r1", 20, text="no")
    crashed.add("RunDispatched", "r1", 20, attempt=2).add("RunDispatched", "r1", 30, attempt=3)
    crashed.add("RunCompleted", "r1", 31, reply="x")
    world = World(config={}, deaths=(5,), answers=(("r1", "no", True),))
    assert problems("input-waits", crashed, world) == []


@pytest.mark.parametrize(
    ("tail", "said"),
    [
        # Resumed without an answer.
        ([("RunDispatched", 30, {"attempt": 2})], "with no answer"),
        # A second answer taken; one that is none of the options.
        (
            [
                ("RunInputProvided", 20, {"text": "yes"}),
                ("RunDispatched", 20, {"attempt": 2}),
                ("RunCompleted", 21, {"reply": "x"}),
                ("RunInputProvided", 30, {"text": "yes"}),
            ],
            "after its outcome",
        ),
        ([("RunInputProvided", 20, {"text": "maybe"})], "none of its options"),
        # One answer, its turn handed to the agent twice in one process.
        (
            [
                ("RunInputProvided", 20, {"text": "yes"}),
                ("RunDispatched", 20, {"attempt": 2}),
                ("RunDispatched", 20, {"attempt": 3}),
                ("RunCompleted", 21, {"reply": "x"}),
            ],
            "2 times in one gateway process",
        ),
        # Answered after the deadline; ended ok with no turn for its answer.
        ([("RunInputProvided", 700, {"text": "yes"})], "at or after its deadline"),
        (
            [("RunInputProvided", 20, {"text": "yes"}), ("RunCompleted", 21, {"reply": "x"})],
            "no turn run for its answer",
        ),
        # Still waiting past its deadline, or ended otherwise than timed out.
        ([("RunSteered", 900, {})], "still waits for input past its deadline"),
        ([("RunFailed", 30, {"error": "x"})], "while it waited for input, unanswered"),
    ],
)
def test_input_waits_see_what_breaks_them(
    tail: list[tuple[str, float, dict[str, Any]]], said: str
) -> None:
    log = asked_log()
    for type_, seconds, data in tail:
        log.add(type_, "r1", seconds, **data)
    assert any(said in problem for problem in problems("input-waits", log)), said


def test_input_waits_compare_what_the_answers_were_told() -> None:
    log = asked_log()
    world = World(config={}, answers=(("r1", "yes", True),))
    found = problems("input-waits", log, world)
    assert any("1 answer(s) were told" in problem for problem in found)


def test_a_run_waiting_for_input_holds_no_lane_place() -> None:
    log = asked_log()
    log.ran("r2", 20, 25, session=B)  # maxConcurrent 1: r1 waits, r2 runs
    world = World(config={"agents": {"defaults": {"maxConcurrent": 1}}})
    assert problems("lane-limit", log, world) == []
    busy = Log().run("r1", 0).add("RunDispatched", "r1", 0, attempt=1)
    busy.ran("r2", 20, 25, session=B)
    assert problems("lane-limit", busy, world)


def test_lanes_a_lender_whose_wait_is_over_queues_for_its_place() -> None:
    # a lends its place to b; once b ends, a queues for a place again: c, dispatched
    # before a is seen at work, may have it. a's next own event shows it at work again.
    log = Log().run("a", 0).add("RunDispatched", "a", 0, attempt=1)
    log.ran("b", 1, 2, session=B, parent="a", hops=2)
    log.ran("c", 2, 3, session=C).add("RunCompleted", "a", 4, reply="x")
    assert problems("lane-limit", log, lane(1)) == []
    at_work = Log().run("a", 0).add("RunDispatched", "a", 0, attempt=1)
    at_work.ran("b", 1, 2, session=B, parent="a", hops=2).add("RunSteered", "a", 2)
    at_work.ran("c", 2, 3, session=C).add("RunCompleted", "a", 4, reply="x")
    assert problems("lane-limit", at_work, lane(1))
