"""Seeded workloads: the same seed and options always give the same script.

The mix: users' messages, sends (waiting, fire-and-forget, short timeouts) with agents
that answer, are slow, fail, hang or return garbage, nested sends and spawns made from
inside turns, forwarding cycles, spawns, policy changes and ``/send`` commands, channels
that go down and recover, requesters whose route changes (a report still goes where its
spawn captured), clock jumps of seconds to weeks, and crashes with downtime;
with a smaller weight, cancellations (of runs in flight, ended runs and runs with
descendants), busy-policy overrides (and a config busy policy), and one subscriber that
joins at a random step (besides the one every run has from position 0).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sessionwire.adapters.testkit.simulator.script import (
    Advance,
    Answer,
    Busy,
    Cancel,
    ChannelDown,
    Command,
    Crash,
    DropConnection,
    Fork,
    Message,
    Policy,
    Read,
    Route,
    Send,
    SessionSeed,
    SimulationScript,
    Spawn,
    Stale,
    Steer,
    Step,
    StoreFault,
    Subscribe,
    plan_text,
)

WORLD: tuple[SessionSeed, ...] = (
    SessionSeed(key="agent:main:main", channel="whatsapp", to="+15550001", chat_type="direct"),
    SessionSeed(
        key="agent:main:discord:group:ops", channel="discord", to="channel:ops", chat_type="group"
    ),
    SessionSeed(
        key="agent:main:discord:group:dev", channel="discord", to="channel:dev", chat_type="group"
    ),
    SessionSeed(key="agent:beta:main", channel="telegram", to="@beta", chat_type="direct"),
    SessionSeed(
        key="agent:beta:telegram:group:fam",
        channel="telegram",
        to="group:fam",
        chat_type="group",
    ),
)
CHANNELS = ("whatsapp", "discord", "telegram")
AGENTS = ("main", "beta")
# A send into "@child:N" goes to the N-th child spawned so far (skipped if none).
CHILD_TARGETS = ("@child:0", "@child:1", "@child:-1")
MAX_PLAN_DEPTH = 3


@dataclass(frozen=True)
class WorkloadOptions:
    """How big a workload is and what it may contain."""

    steps: int = 16
    crashes: bool = True
    """Crash + reopen steps (only stores that can reopen: SQLite, PostgreSQL)."""
    cycles: bool = True
    """Agents forwarding each message round a cycle (ends only with a hop limit)."""
    nested: bool = True
    """Sends and spawns made by agents from inside their turns."""
    cancels: bool = True
    """``gw.cancel_run`` of runs in flight, ended runs and runs with descendants."""
    busy: bool = True
    """Busy policies: the config's and per-session overrides (ADR 0022)."""
    subscribers: bool = True
    """A subscriber that joins at a random step (the one from position 0 is always there)."""
    two_gateways: bool = False
    """Two gateways on the store (PostgreSQL; one elsewhere): a crash kills the active
    one, the other takes over; crashes may also hit the takeover itself; a gateway
    paused past its lease comes back as a stale owner (``Stale``)."""
    stale_owners: bool = True
    """With two gateways: one paused past its lease that comes back and writes."""
    dropped_connections: bool = False
    """Saves that lose their connection at COMMIT, committed or not (PostgreSQL)."""
    budgets: bool = True
    """A trace budget in the config (decision 31): runs, spawns, tokens, refuse or cancel."""
    steers: bool = True
    """``subagents`` steers into children, in flight or ended, and sends that come back
    to a session running their sender's ancestor (the busy policy's ``steer``)."""
    nested_spawns: bool = True
    """Spawned children whose tasks send and spawn (``maxSpawnDepth`` drawn 1-3), and
    trees cancelled through a run that has ended (``Cancel(pick="tree")``)."""
    yields: bool = True
    """Turns that spawn and then yield (sessions_yield, waitFor all or any)."""
    store_faults: bool = True
    """Saves of the gateway's own work that fail once with a transient store error."""
    scopes: bool = True
    """A visibility scope drawn per seed (self | tree | agent | all, decision 28) and
    ``sessions_list`` / ``sessions_history`` reads; off: every session sees every other."""
    schedules: bool = True
    """An interval schedule in the config (decision 36), defined at every open: the
    clock jumps, crashes and downtime fire its due times on time, or once late."""
    forks: bool = True
    """A fork of a session (at its latest version or a few before, decision 34) in place
    of a step, in some seeds: read at the end, it must never show later source lines."""
    inputs: bool = True
    """Turns that ask for input (decision 33) and answers to them: late, early (before
    the ask), twice, around a crash, after the deadline (in place of steps, some seeds)."""


def generate(seed: int, options: WorkloadOptions | None = None) -> SimulationScript:
    """The script of ``seed``."""
    return _Generator(seed, options or WorkloadOptions()).script()


class _Generator:
    def __init__(self, seed: int, options: WorkloadOptions) -> None:
        self.seed = seed
        self.options = options
        self.rng = random.Random(seed)
        self.plans = 0
        self.keys = [session.key for session in WORLD]
        self.spawners: list[str] = []
        """Sessions that spawned so far: the requesters a route change matters to."""
        self.side = random.Random(f"features:{seed}")
        """Draws for the features added after the first workloads (nested spawns, trees,
        bounces): a seed's other steps stay what they were."""
        self.follow_up: Step | None = None
        """A step that goes right after the one just made (a tree's cancel)."""

    def script(self) -> SimulationScript:
        rng = self.rng
        config: dict[str, Any] = {
            "session": {"agentToAgent": {"maxPingPongTurns": rng.choice([0, 1, 2, 5])}},
            # Every agent pair may talk; what a session sees is the seed's scope.
            "tools": {
                "agentToAgent": {"enabled": True, "allow": ["*"]},
                "sessions": {"visibility": self.visibility()},
            },
            "agents": {
                "defaults": {
                    "maxConcurrent": rng.choice([1, 2, 4]),
                    "timeoutSeconds": rng.choice([30, 120, 600]),
                    "subagents": {"archiveAfterMinutes": rng.choice([1, 60])},
                },
                "list": [
                    {"id": "main", "default": True, "subagents": {"allowAgents": ["*"]}},
                    {"id": "beta", "subagents": {"allowAgents": ["*"]}},
                ],
            },
        }
        if self.options.busy:
            config["session"]["agentToAgent"]["busy"] = rng.choices(
                ["enqueue", "reject", "interrupt", "steer"], [45, 15, 20, 20]
            )[0]
        if self.options.budgets and random.Random(f"budgeted:{self.seed}").random() < 0.6:
            config["session"]["agentToAgent"]["budget"] = self.budget()
        if self.options.nested_spawns:
            depth = random.Random(f"spawn-depth:{self.seed}").choice([1, 2, 2, 3])
            config["agents"]["defaults"]["subagents"]["maxSpawnDepth"] = depth
        steps: list[Step] = []
        while len(steps) < self.options.steps:
            steps.append(self.step())
            if self.follow_up is not None:
                steps.append(self.follow_up)
                self.follow_up = None
        del steps[self.options.steps :]
        if self.options.subscribers and steps:
            # In place of a step: a workload keeps the length asked for.
            steps[rng.randrange(len(steps))] = Subscribe()
        forks = random.Random(f"forks:{self.seed}")
        if self.options.forks and steps and forks.random() < 0.5:
            # From a generator of its own, in place of a step: the other draws stay.
            steps[forks.randrange(len(steps))] = Fork(
                session=forks.choice(self.keys), back=forks.choice([0, 0, 1, 2])
            )
        if self.options.schedules:
            config["schedules"] = self.schedules(steps)
        if self.options.inputs:
            # After the schedule's interval is cut: the config stays that without inputs.
            self.inputs(steps, float(config["agents"]["defaults"]["timeoutSeconds"]))
        return SimulationScript(
            seed=self.seed,
            config=config,
            sessions=list(WORLD),
            steps=steps,
            gateways=2 if self.options.two_gateways else 1,
        )

    def step(self) -> Step:
        extra = self.extra_step()
        if extra is not None:
            return extra
        rng = self.rng
        choices: list[tuple[str, int]] = [
            ("send", 30),
            ("message", 6),
            ("spawn", 12),
            ("advance", 22),
            ("policy", 5),
            ("command", 4),
            ("channel", 7),
            ("route", 5),
        ]
        if self.options.crashes:
            choices.append(("crash", 6))
        if self.options.cycles:
            choices.append(("cycle", 3))
        if self.options.cancels:
            choices.append(("cancel", 6))
        if self.options.busy:
            choices.append(("busy", 5))
        if self.options.store_faults:
            choices.append(("store_fault", 4))
        if self.options.dropped_connections:
            choices.append(("drop", 5))
        if self.options.two_gateways and self.options.stale_owners:
            choices.append(("stale", 4))
        if self.options.steers:
            choices.append(("steer", 6))
        if self.options.scopes:
            choices.append(("read", 4))
        names, weights = zip(*choices, strict=True)
        kind = rng.choices(names, weights)[0]
        if kind == "send":
            target = rng.choice(self.keys) if rng.random() > 0.08 else rng.choice(CHILD_TARGETS)
            return Send(
                source=rng.choice(self.keys),
                target=target,
                wait=self.wait(),
                plan=self.plan(depth=1),
            )
        if kind == "message":
            return Message(session=rng.choice(self.keys), text=f"note {rng.randrange(1000)}")
        if kind == "spawn":
            source = rng.choice(self.keys)
            self.spawners.append(source)
            return Spawn(
                source=source,
                agent=rng.choice([None, *AGENTS]),
                cleanup=rng.choice(["keep", "keep", "delete"]),
                timeout=rng.choice([None, None, 0, 20, 300]),
                plan=self.child_calls(self.plan(depth=1, calls=False)),
            )
        if kind == "advance":
            return Advance(seconds=self.jump())
        if kind == "policy":
            return Policy(
                session=rng.choice(self.keys), send_policy=rng.choice(["allow", "deny", None])
            )
        if kind == "command":
            return Command(session=rng.choice(self.keys), mode=rng.choice(["on", "off", "inherit"]))
        if kind == "channel":
            return ChannelDown(
                channel=rng.choice(CHANNELS), seconds=rng.choice([5, 60, 600, 3600, 6 * 3600])
            )
        if kind == "crash":
            crash = Crash(
                after_events=rng.choice([0, 1, 2, 3, 5, 8, 13, 30]),
                down_seconds=self.jump() if rng.random() < 0.7 else 0,
            )
            if self.options.two_gateways and rng.random() < 0.25:
                return crash.model_copy(update={"at": "takeover"})
            # Biased to just after side effects: the post or the answer happened, its
            # record did not (the window where exactly-once bugs hide).
            # And just after a cancel commits, before its cascade (a durable cascade).
            at = rng.choices(["save", "delivery", "reply", "cancel"], [35, 30, 20, 15])[0]
            return crash.model_copy(update={"at": at})
        if kind == "store_fault":
            return StoreFault()
        if kind == "route":
            channel = rng.choice(CHANNELS)
            # Mostly a requester that spawned: its report is still on its way, maybe.
            spawners = self.spawners[-3:]
            session = rng.choice(spawners if spawners and rng.random() < 0.7 else self.keys)
            return Route(session=session, channel=channel, to=f"{channel}:{rng.randrange(5)}")
        if kind == "drop":
            return DropConnection(committed=rng.random() < 0.6)
        if kind == "stale":
            return self.stale()
        if kind == "cancel":
            return self.cancel()
        if kind == "read":
            history = rng.random() < 0.6
            target = rng.choice(self.keys) if rng.random() > 0.2 else rng.choice(CHILD_TARGETS)
            return Read(source=rng.choice(self.keys), target=target if history else None)
        if kind == "steer":
            return Steer(
                source="@parent" if rng.random() < 0.8 else rng.choice(self.keys),
                target=rng.choice(CHILD_TARGETS),
                text=f"steer {rng.randrange(1000)}",
            )
        if kind == "busy":
            return Busy(
                session=rng.choice(self.keys),
                busy=rng.choice(["enqueue", "reject", "interrupt", "steer", None]),
            )
        return self.cycle()

    def extra_step(self) -> Step | None:
        """Now and then (from the side draws) a step the first workloads never made: a
        tree of sends to cancel through its ended middle, or a send that comes back to
        the session running its sender's ancestor (with a steer policy there)."""
        side = self.side
        roll = side.random()
        if self.options.nested_spawns and self.options.cancels and roll < 0.06:
            return self.tree()
        if self.options.steers and self.options.busy and roll < 0.10:
            return self.bounce()
        if roll < 0.14:
            return self.family()
        return None

    def family(self) -> Send:
        """A send whose run spawns two children (one quick, one slow) and yields for
        all or any of them (when yields are played): the wake's time and reports are
        what the oracle checks."""
        side = self.side
        children = []
        for kind in ("ok", "slow"):
            self.plans += 1
            child = {"id": self.plans, "kind": kind, "depth": 2, "pp": 0, "ann": "say"}
            if kind == "slow":
                child["delay"] = side.choice([5, 60])
            children.append({"tool": "spawn", "agent": None, "cleanup": "keep", "plan": child})
        self.plans += 1
        plan = {"id": self.plans, "kind": "ok", "depth": 1, "pp": 0, "ann": "skip"}
        mode = side.choice(["all", "any"])  # drawn either way: the rest stays the same
        plan |= {"calls": children, "yield": mode} if self.options.yields else {"calls": children}
        return Send(source=side.choice(self.keys), target=side.choice(self.keys), wait=0, plan=plan)

    def child_calls(self, plan: dict[str, Any]) -> dict[str, Any]:
        """A spawned child's task that sends and spawns itself (half the time, from the
        side draws; a spawn deeper than maxSpawnDepth is refused, which is played too)."""
        if not self.options.nested_spawns or plan["depth"] >= MAX_PLAN_DEPTH:
            return plan
        side = self.side
        if side.random() >= 0.6:
            return plan
        depth = plan["depth"]
        calls: list[dict[str, Any]] = []
        for _ in range(side.choice([1, 1, 2])):
            self.plans += 1
            kind = side.choice(["ok", "ok", "slow", "hang"])
            child = {"id": self.plans, "kind": kind, "depth": depth + 1, "pp": side.choice([0, 1])}
            child |= {"ann": "say", "delay": 5} if kind == "slow" else {"ann": "say"}
            if side.random() < 0.5:
                calls.append(
                    {
                        "tool": "send",
                        "target": side.choice(self.keys),
                        "wait": side.choice([0, 0, 5]),
                        "plan": child,
                    }
                )
            else:
                calls.append(
                    {
                        "tool": "spawn",
                        "agent": None,
                        "cleanup": side.choice(["keep", "delete"]),
                        "plan": child,
                    }
                )
        return {**plan, "calls": calls}

    def chain(self, links: list[tuple[str, str | None, float]]) -> dict[str, Any]:
        """The plans of a chain of sends made from inside turns: link N is (its run's
        kind, the session it sends into, how long it waits); the last sends nothing."""
        self.plans += len(links)
        first = self.plans - len(links) + 1
        plan: dict[str, Any] | None = None
        for depth in range(len(links), 0, -1):
            kind, target, wait = links[depth - 1]
            link: dict[str, Any] = {"id": first + depth - 1, "kind": kind, "depth": depth}
            link |= {"pp": 0, "ann": "skip"}
            if plan is not None:
                link["calls"] = [{"tool": "send", "target": target, "wait": wait, "plan": plan}]
            plan = link
        assert plan is not None
        return plan

    def tree(self) -> Send:
        """A run that outlives what it set going: it sends (not waiting) into a session
        whose quick run sends on to a run that hangs, and works on (hangs) itself; the
        cancel that follows picks the tree, whose middle has ended by then."""
        side = self.side
        top, middle, leaf = side.sample(self.keys, 3)
        # An agent makes its calls before it hangs (a slow one would sleep first).
        root = self.chain([("hang", middle, 0), ("ok", leaf, 0), ("hang", None, 0)])
        self.follow_up = Cancel(pick="tree", reason="tree")
        return Send(source=side.choice(self.keys), target=top, wait=0, plan=root)

    def bounce(self) -> Step:
        """A send into A whose run sends (waiting) to B, whose run sends back into A,
        busy with the first run (its sender's ancestor): the busy policy must not steer
        into its own chain."""
        side = self.side
        home, away = side.sample(self.keys, 2)
        root = self.chain([("ok", away, 5), ("ok", home, 0), ("ok", None, 0)])
        send = Send(source=side.choice(self.keys), target=home, wait=0, plan=root)
        if side.random() < 0.5:
            self.follow_up = send
            return Busy(session=home, busy="steer")
        return send

    def stale(self) -> Stale:
        """A slow run in flight when its gateway pauses past its lease; half the time it
        sends on after its delay (a write the stale owner must not make)."""
        side = self.side
        source, target = side.sample(self.keys, 2)
        self.plans += 2
        plan: dict[str, Any] = {
            "id": self.plans - 1,
            "kind": "slow",
            "delay": side.choice([5, 30]),
            "depth": 1,
            "pp": side.choice([0, 1]),
            "ann": "say",
        }
        if side.random() < 0.5:
            onward = {"id": self.plans, "kind": "ok", "depth": 2, "pp": 0, "ann": "skip"}
            plan["calls"] = [{"tool": "send", "target": source, "wait": 0, "plan": onward}]
        return Stale(source=source, target=target, plan=plan)

    def visibility(self) -> str:
        """The seed's ``tools.sessions.visibility``, from an rng of its own: the rest of
        the workload draws what it drew before scopes were drawn."""
        if not self.options.scopes:
            return "all"
        drawn = random.Random(f"visibility-{self.seed}")
        return drawn.choices(["self", "tree", "agent", "all"], [15, 25, 20, 40])[0]

    def inputs(self, steps: list[Step], timeout: float) -> None:
        """Sends whose first turn asks (``ask`` in the plan: the agent answers with an
        input request) and the answers to them, each in place of a later step. From a
        generator of its own: a seed's other steps stay what they were. Each ask's
        answers play one way: late (a few steps on), early (its turn is still slow,
        the answer refused) then late, twice at once, accepted right before a crash, a
        crash while it waits, or after its deadline (refused: the run timed out)."""
        rng = random.Random(f"inputs:{self.seed}")
        cases = ["late", "early", "twice", "twice-after"]
        if self.options.crashes:
            cases += ["answered-crash", "waiting-crash"]
        cases.append("deadline")
        taken: set[int] = set()
        for _ in range(rng.choice([0, 1, 1, 2])):
            free = [
                index
                for index, step in enumerate(steps[:-3])
                if isinstance(step, Send)
                and index not in taken
                and not ({"cycle", "yield"} & set(step.plan))
                and not step.target.startswith("@")
            ]
            if not free:
                return
            at = rng.choice(free)
            case = rng.choice(cases)
            send = steps[at]
            assert isinstance(send, Send)
            plan = dict(send.plan)
            plan["kind"] = "slow" if case == "early" else "ok"
            plan["delay"] = rng.choice([5, 30]) if case == "early" else 0
            self.plans += 1
            resumed = {
                "id": self.plans,
                "kind": rng.choice(["ok", "ok", "ok", "fail", "empty"]),
                "depth": plan["depth"],
                "pp": 0,
                "ann": plan.get("ann", "say"),
            }
            answer = plan_text(resumed)
            options = [answer, "no"] if rng.random() < 0.4 else None
            plan["ask"] = {"prompt": f"go on with plan {plan['id']}?", "options": options}
            steps[at] = send.model_copy(update={"plan": plan})
            taken.add(at)
            later: list[Step] = []
            if case == "early":
                later.append(Answer(plan=plan["id"], text=answer))
            if case == "deadline":
                later.append(Advance(seconds=timeout + rng.choice([1, 60, 3600])))
            if case == "waiting-crash":
                later.append(Crash(after_events=0, down_seconds=rng.choice([0, 5, 60])))
            if options is not None and rng.random() < 0.5:
                later.append(Answer(plan=plan["id"], text="maybe"))  # not an option: refused
            if case == "answered-crash":
                # Armed before the answer: the process dies once the answer is recorded
                # (1), or its next turn was dispatched (2) or ended (3).
                later.append(Crash(after_events=rng.choice([1, 2, 3]), down_seconds=5))
            copies = 2 if case == "twice" else 1
            later.append(Answer(plan=plan["id"], text=answer, copies=copies))
            if case == "twice-after":
                later.append(Answer(plan=plan["id"], text=answer))
            first = at + 1 if case in ("early", "waiting-crash") else at + rng.choice([1, 2, 3])
            place = first
            for step in later:
                # Never in place of the seed's one subscriber or its fork: the features
                # each seed plays stay played.
                while place < len(steps) and isinstance(steps[place], (Subscribe, Fork)):
                    place += 1
                if place >= len(steps):
                    break
                steps[place] = step
                taken.add(place)
                place += 1

    def schedules(self, steps: list[Step]) -> list[dict[str, Any]]:
        """From a generator of its own (the steps stay those of the seed without). The
        interval is cut to the time the script moves the clock (its jumps and downtime):
        a few to a few dozen due times a seed, never thousands."""
        rng = random.Random(f"schedules:{self.seed}")
        moved = sum(step.seconds for step in steps if isinstance(step, Advance))
        moved += sum(step.down_seconds for step in steps if isinstance(step, Crash))
        slots = rng.choice([1, 3, 8])
        every = min(86_400, max(60, round(moved / slots))) if moved else 600
        return [{"id": "sim-tick", "everySeconds": every, "message": "scheduled tick"}]

    def budget(self) -> dict[str, Any]:
        """Drawn from a generator of its own: the steps stay those of the seed without."""
        rng = random.Random(f"budget:{self.seed}")
        budget: dict[str, Any] = {"onExceeded": rng.choice(["refuse", "cancel"])}
        for name, values in (
            ("maxRuns", [None, 0, 1, 3, 8, 20]),
            ("maxSpawns", [None, None, 0, 1, 3]),
            ("maxTokens", [None, None, 15, 60, 300]),
        ):
            value = rng.choice(values)
            if value is not None:
                budget[name] = value
        return budget

    def cancel(self) -> Cancel:
        """Mostly the newest run in flight in a session; else a run by its place in the
        order runs started (early ones have usually ended, or have descendants)."""
        rng = self.rng
        reason = rng.choice(["", "user pressed stop", "superseded"])
        copies = rng.choice([1, 1, 2, 3])  # concurrent cancels of one run
        if rng.random() < 0.6:
            session = rng.choice(self.keys)
            return Cancel(pick="in_flight", session=session, reason=reason, copies=copies)
        index = rng.choice([0, 1, 2, 5, -1, -2, -3])
        return Cancel(pick="nth", index=index, reason=reason, copies=copies)

    def wait(self) -> float:
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            return 0  # fire and forget
        if roll < 0.75:
            return rng.choice([1, 5, 10, 30])
        return rng.choice([60, 300, 600])

    def jump(self) -> float:
        """Seconds to weeks, mostly short."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.6:
            return rng.choice([1, 2, 5, 10, 30, 60, 120])
        if roll < 0.85:
            return rng.choice([600, 1800, 3600, 3 * 3600, 12 * 3600])
        return rng.choice([86_400, 3 * 86_400, 7 * 86_400, 14 * 86_400, 30 * 86_400])

    def plan(self, *, depth: int, calls: bool = True) -> dict[str, Any]:
        rng = self.rng
        self.plans += 1
        kind = rng.choices(
            ["ok", "slow", "fail", "hang", "garbage", "empty"], [55, 17, 8, 7, 7, 6]
        )[0]
        plan: dict[str, Any] = {"id": self.plans, "kind": kind, "depth": depth}
        if kind == "slow":
            plan["delay"] = rng.choice([1, 5, 30, 120, 900, 3600])
        plan["pp"] = rng.choice([0, 0, 1, 2, 5])
        plan["ann"] = rng.choices(["say", "skip", "fail", "hang"], [60, 28, 7, 5])[0]
        if calls and depth < MAX_PLAN_DEPTH and rng.random() < 0.3 and self.options.nested:
            plan["calls"] = [self.nested_call(depth) for _ in range(rng.choice([1, 1, 2]))]
            self.maybe_yield(plan)
        return plan

    def maybe_yield(self, plan: dict[str, Any]) -> None:
        """A turn that spawned yields half the time. Drawn from a generator of its own,
        so a seed's script is what it was before yields existed, plus the yields."""
        if not self.options.yields or not any(c["tool"] == "spawn" for c in plan["calls"]):
            return
        side = random.Random(f"{self.seed}/yield/{plan['id']}")
        if side.random() < 0.5:
            plan["yield"] = side.choice(["all", "any"])

    def nested_call(self, depth: int) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.7:
            return {
                "tool": "send",
                "target": rng.choice(self.keys),
                "wait": self.wait(),
                "plan": self.plan(depth=depth + 1),
            }
        return {
            "tool": "spawn",
            "agent": rng.choice([None, *AGENTS]),
            "cleanup": rng.choice(["keep", "delete"]),
            "plan": self.child_calls(self.plan(depth=depth + 1, calls=False)),
        }

    def cycle(self) -> Send:
        """Agents that forward every message to the next one round a cycle."""
        rng = self.rng
        members = rng.sample(self.keys, rng.choice([2, 3]))
        self.plans += 1
        plan = {
            "id": self.plans,
            "kind": "ok",
            "depth": 1,
            "pp": 0,
            "ann": "skip",
            "cycle": members,
            "at": 0,
            "wait": rng.choice([0, 0, 5, 60]),
        }
        return Send(source=members[-1], target=members[0], wait=self.wait(), plan=plan)


__all__ = ["WORLD", "WorkloadOptions", "generate"]
