"""A simulation script: the world (config, sessions), then a list of steps.

A script is plain JSON, so a failing seed's shrunk script can be saved, read, edited and
replayed. Every step stands on its own (it names sessions from the fixed world, never
something an earlier step made, except ``@child:N``, skipped when there is no such
child), so removing steps while shrinking always leaves a script that runs.

What an agent does in a run is written in the message that starts the run: a *plan*
(``sim:{...}`` JSON) that the simulated agents read (see ``agents.py``). So a run behaves
the same wherever and whenever it is dispatched, and a replay is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from sessionwire.adapters.testkit.simulator.oracle.facts import PLAN_MARK
from sessionwire.adapters.testkit.simulator.oracle.facts import read_plan as oracle_read_plan
from sessionwire.domain.errors import SessionwireError

SCRIPT_VERSION = 1

# Agent behaviour in a plan: how the run ends.
KINDS = ("ok", "slow", "fail", "hang", "garbage", "empty")


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Message(_Step):
    """A user's message in a session (no run starts)."""

    op: Literal["message"] = "message"
    session: str
    text: str


class Send(_Step):
    """``sessions_send`` from ``source`` (outside any run) into ``target``."""

    op: Literal["send"] = "send"
    source: str
    target: str
    wait: float = Field(ge=0, description="timeoutSeconds: 0 is fire-and-forget")
    plan: dict[str, Any]


class Spawn(_Step):
    """``sessions_spawn`` from ``source``; the child's task run follows ``plan``."""

    op: Literal["spawn"] = "spawn"
    source: str
    agent: str | None = None
    cleanup: Literal["keep", "delete"] = "keep"
    timeout: float | None = Field(default=None, ge=0)
    plan: dict[str, Any]


class Policy(_Step):
    """``sessions.patch {sendPolicy}`` on a session (``None`` clears it)."""

    op: Literal["policy"] = "policy"
    session: str
    send_policy: Literal["allow", "deny"] | None


class Command(_Step):
    """An owner's ``/send on|off|inherit`` in a session."""

    op: Literal["command"] = "command"
    session: str
    mode: Literal["on", "off", "inherit"]


class Route(_Step):
    """The session's user writes from another chat (``channel``, ``to``): the session's
    route changes, as when a requester moves after spawning a sub-agent (whose report
    still goes to the route captured at spawn, decision 14)."""

    op: Literal["route"] = "route"
    session: str
    channel: str
    to: str


class Advance(_Step):
    """Move the virtual clock (seconds to weeks), firing what falls due."""

    op: Literal["advance"] = "advance"
    seconds: float = Field(ge=0)


class ChannelDown(_Step):
    """A chat channel fails every delivery for ``seconds`` from now, then recovers."""

    op: Literal["channel_down"] = "channel_down"
    channel: str
    seconds: float = Field(ge=0)


class Crash(_Step):
    """The gateway process dies once ``after_events`` more events are recorded (at once
    if 0; at the end of the script if never), stays down ``down_seconds`` of clock time,
    and a new gateway reopens the store. Skipped on memory (it cannot reopen)."""

    op: Literal["crash"] = "crash"
    after_events: int = Field(ge=0)
    down_seconds: float = Field(ge=0)
    at: Literal["save", "takeover", "delivery", "reply", "cancel"] = "save"
    """Where the process dies. ``save``: at an event boundary (``after_events``).
    ``delivery``: right after the next post a channel accepts, before it is recorded;
    ``reply``: right after the next agent's answer, before it is recorded (the windows
    where a side effect happened and its record did not); ``cancel``: right after the
    next ``RunCancelled`` commits, before its cascade. With two gateways
    (``SimulationScript.gateways``): ``takeover`` also kills the gateway that takes the
    dead one over, right after its takeover statement committed and before it resumed
    anything; the next gateway takes over both."""


class DropConnection(_Step):
    """PostgreSQL only (skipped elsewhere): the next save loses its database connection
    at its COMMIT, after the server committed it (``committed``: only the answer is
    lost) or before; eventsourcing retries it, and the save must be recorded once."""

    op: Literal["drop_connection"] = "drop_connection"
    committed: bool


class Stale(_Step):
    """PostgreSQL with two gateways only (skipped elsewhere): the active gateway pauses
    past its lease (it renews nothing; its heartbeat and leases expire), the standby
    takes it over and resumes its work, then the paused one goes on where it was (a
    stale owner): what it then writes for the runs it lost must be refused (decision 24),
    nothing done twice."""

    op: Literal["stale"] = "stale"
    source: str
    target: str
    plan: dict[str, Any]
    """A send (not waiting) from ``source`` into ``target`` is made first, so that the
    gateway that pauses has its run in flight (a slow plan, maybe with a send of its own
    after its delay): both the stale owner and the taker go on with it."""


class Cancel(_Step):
    """``gw.cancel_run`` of a run the script can name without knowing its id: the
    ``index``-th run started so far (``pick="nth"``, negative from the newest, ended
    runs included), the newest run not ended in ``session`` (``pick="in_flight"``), or
    the oldest run not ended with a run still pending below a run that has ended
    (``pick="tree"``: a cascade through an ended middle). Skipped when there is none."""

    op: Literal["cancel"] = "cancel"
    pick: Literal["nth", "in_flight", "tree"]
    index: int = 0
    session: str | None = None
    reason: str = ""
    copies: int = Field(default=1, ge=1, le=3)
    """Cancels of the run made at once (concurrent cancels: one records it)."""


class StoreFault(_Step):
    """The next save the gateway's own work makes (a run's actor, an exchange or spawn
    driver, the outbox, a timer; not a tool call, whose caller hears the error) fails
    once with a transient store error before it commits: nothing is recorded. Every
    store; every save path passes the point where it is injected. (A commit whose answer
    is lost is ``drop_connection``, PostgreSQL's: a local store's commit cannot be.)"""

    op: Literal["store_fault"] = "store_fault"


class Busy(_Step):
    """``sessions.patch {busy}`` on a session: what a send into it does while it has a
    run in flight (``None`` clears the override: the config decides, ADR 0022)."""

    op: Literal["busy"] = "busy"
    session: str
    busy: Literal["enqueue", "reject", "interrupt", "steer"] | None


class Steer(_Step):
    """``subagents`` steer into a child by place (``@child:N``, as a send names one)
    from ``source`` (``@parent``: the session that spawned it): answered ok, and
    recorded, only while the child's run is in flight; skipped when there is no child."""

    op: Literal["steer"] = "steer"
    source: str
    target: str
    text: str


class Read(_Step):
    """``sessions_list`` (``target`` None) or ``sessions_history`` of ``target`` from
    ``source``: what the visibility scope lets it see (decision 28)."""

    op: Literal["read"] = "read"
    source: str
    target: str | None = None


class Subscribe(_Step):
    """A subscriber from the log's current position P (each script also has one from
    position 0): it reads what is recorded after each step, and resumes from its last
    position on the new gateway after a crash."""

    op: Literal["subscribe"] = "subscribe"


class Fork(_Step):
    """``gw.fork_session`` of ``session`` at its latest version, or ``back`` versions
    before it (decision 34); the fork is read at the end of the play, and a message is
    recorded into the source right after, which the fork must never show."""

    op: Literal["fork"] = "fork"
    session: str
    back: int = 0


class Answer(_Step):
    """``gw.provide_input`` (as the operator) of the run whose plan is ``plan`` (its
    first turn's plan id; skipped when no such run started), ``copies`` times at once:
    the run may wait for it (``ask`` in its plan), not have asked yet, have been answered
    already or have timed out: one answer at most is accepted (decision 33)."""

    op: Literal["answer"] = "answer"
    plan: int
    text: str
    copies: int = Field(default=1, ge=1)


Step = Annotated[
    Message
    | Send
    | Spawn
    | Policy
    | Command
    | Advance
    | ChannelDown
    | Crash
    | Cancel
    | Busy
    | Subscribe
    | DropConnection
    | Steer
    | Route
    | StoreFault
    | Stale
    | Answer
    | Read
    | Fork,
    Field(discriminator="op"),
]
_STEPS: TypeAdapter[list[Step]] = TypeAdapter(list[Step])


class SessionSeed(BaseModel):
    """A session of the world: opened by one user message before the first step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    channel: str | None = None
    to: str | None = None
    chat_type: Literal["direct", "group", "channel"] | None = None


class SimulationScriptError(SessionwireError, ValueError):
    """A script file that is not a simulation script; the message says what is wrong."""


class SimulationScript(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = SCRIPT_VERSION
    seed: int
    config: dict[str, Any]
    sessions: list[SessionSeed]
    steps: list[Step]
    gateways: int = Field(default=1, ge=1, le=2)
    """2: two gateways on the store (PostgreSQL only; one elsewhere): steps go to the
    active one; at a crash it dies (leases and heartbeat left, expired by SQL) and the
    other takes its work over, and a new one opens beside it."""

    def with_steps(self, steps: list[Step]) -> SimulationScript:
        return self.model_copy(update={"steps": list(steps)})

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def from_json(cls, text: str) -> SimulationScript:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise SimulationScriptError(f"not JSON: {error}") from None
        if not isinstance(raw, dict):
            raise SimulationScriptError(
                "a script is a JSON object with seed, config, sessions, steps"
            )
        if raw.get("version", SCRIPT_VERSION) != SCRIPT_VERSION:
            raise SimulationScriptError(
                f"script version {raw.get('version')!r} is not {SCRIPT_VERSION}"
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
                for problem in error.errors()[:5]
            )
            raise SimulationScriptError(f"invalid script: {problems}") from None

    @classmethod
    def load(cls, path: str | Path) -> SimulationScript:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise SimulationScriptError(f"cannot read {path}: {error.strerror}") from None
        return cls.from_json(text)


def parse_steps(raw: list[dict[str, Any]]) -> list[Step]:
    return _STEPS.validate_python(raw)


def plan_text(plan: dict[str, Any]) -> str:
    """The message text that carries ``plan`` to the agent that runs it."""
    return PLAN_MARK + json.dumps(plan, sort_keys=True, separators=(",", ":"))


def read_plan(*texts: str | None) -> dict[str, Any] | None:
    """The first plan written in any of ``texts`` (a message, a reply, a context)."""
    return oracle_read_plan(*texts)


__all__ = [
    "Advance",
    "Answer",
    "Busy",
    "Cancel",
    "ChannelDown",
    "Command",
    "Crash",
    "DropConnection",
    "Fork",
    "Message",
    "Policy",
    "Read",
    "Route",
    "Send",
    "SessionSeed",
    "SimulationScript",
    "SimulationScriptError",
    "Spawn",
    "Step",
    "StoreFault",
    "Subscribe",
    "parse_steps",
    "plan_text",
    "read_plan",
]
