"""The invariants the simulator checks outside the log fire on a planted bug (no
invariant that cannot fire): each test plays a script clean, plants one small bug in the
gateway, plays it again and sees its invariant break."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sessionwire.adapters.testkit.simulator.script import parse_steps
from sessionwire.application import context
from sessionwire.application.orchestration.outbox import DeliveryOutbox
from sessionwire.domain import policy
from sessionwire.domain.run import Run
from sessionwire.domain.session import Session
from sessionwire.domain.spawn import Spawn
from sessionwire.testing import (
    Simulation,
    SimulationScript,
    WorkloadOptions,
    fresh_stores,
    generate,
)

FINDINGS = Path(__file__).parent / "simulator_findings"


def _script(steps: list[dict[str, Any]]) -> SimulationScript:
    script = generate(0, WorkloadOptions(steps=0, crashes=False))
    defaults = dict(script.config["agents"]["defaults"], maxConcurrent=2, timeoutSeconds=30)
    agents = dict(script.config["agents"], defaults=defaults)
    # A send into a busy session waits its turn (the busy policy's default).
    session = {"agentToAgent": {**script.config["session"]["agentToAgent"], "busy": "enqueue"}}
    config = dict(script.config, agents=agents, session=session)
    return script.model_copy(update={"config": config, "steps": parse_steps(steps)})


def _send(plan: dict[str, Any], target: str = "agent:beta:main") -> dict[str, Any]:
    return {"op": "send", "source": "agent:main:main", "target": target, "wait": 0, "plan": plan}


async def _clean_then_broken(
    script: SimulationScript, plant: Any, monkeypatch: pytest.MonkeyPatch, stores: str = "memory"
) -> set[str]:
    assert (await Simulation(fresh_stores(stores)).run(script)).ok
    plant(monkeypatch)
    return set((await Simulation(fresh_stores(stores)).run(script)).counts)


async def test_a_run_handed_to_its_agent_at_its_deadline_breaks_deadlines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both runs start at once in one session, 30 s each; the first hangs to its 30 s
    timeout. A run is overdue at its deadline, not after: planted, the second is handed
    to its agent at exactly its deadline (the check said only 'after' until now)."""
    script = _script(
        [
            _send({"id": 1, "kind": "hang"}),
            _send({"id": 2, "kind": "ok"}),
            {"op": "advance", "seconds": 60},
        ]
    )

    def at_the_deadline(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(Run, "overdue", lambda self, now: self.state.seconds_left(now) < 0)

    assert "deadlines" in await _clean_then_broken(script, at_the_deadline, monkeypatch)


async def test_a_run_handed_to_its_agent_in_a_closed_session_breaks_closed_sessions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = SimulationScript.load(FINDINGS / "seed-101428-archived-child-dispatched.json")

    def never_closed(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(Session, "is_active", property(lambda self: True))

    broken = await _clean_then_broken(script, never_closed, monkeypatch, f"sqlite:///{tmp_path}")
    assert "closed-sessions" in broken


async def test_a_failed_delivery_never_retried_breaks_deliveries_settle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = _script(
        [
            {"op": "channel_down", "channel": "discord", "seconds": 60},
            _send({"id": 1, "kind": "ok", "ann": "say"}, target="agent:main:discord:group:ops"),
        ]
    )

    def never_retried(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(DeliveryOutbox, "start", lambda self, entry_id: None)

    assert "deliveries-settle" in await _clean_then_broken(script, never_retried, monkeypatch)


async def test_a_tool_that_fails_inside_breaks_tool_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = _script(
        [
            {
                "op": "spawn",
                "source": "agent:main:main",
                "plan": {"id": 1, "kind": "ok", "ann": "skip"},
            }
        ]
    )

    def spawn_raises(patch: pytest.MonkeyPatch) -> None:
        def broken(*args: Any, **kwargs: Any) -> Spawn:
            raise RuntimeError("planted")

        patch.setattr(Spawn, "spawn", broken)

    assert "tool-answers" in await _clean_then_broken(script, spawn_raises, monkeypatch)


async def test_a_hop_limit_one_short_of_the_configured_breaks_hop_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forwarding cycle runs until the hop limit; planted, the limit bites one hop early
    (a send maxHops deep refused): the limit is checked both ways, as configured."""
    cycle = ["agent:main:discord:group:ops", "agent:main:discord:group:dev"]
    plan = {"id": 1, "kind": "ok", "ann": "skip", "cycle": cycle, "at": 0, "wait": 0}
    script = _script(
        [{"op": "send", "source": cycle[1], "target": cycle[0], "wait": 0, "plan": plan}]
    )

    def one_short(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(context, "hop_limit_reached", lambda hops, max_hops: hops >= max_hops - 1)

    assert "hop-limit" in await _clean_then_broken(script, one_short, monkeypatch)


async def test_a_session_reached_outside_the_scope_breaks_visibility(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under ``tools.sessions.visibility: agent`` a group session of agent main sends
    into, and reads, agent beta's main: both refused, clean. Planted: the scope check
    lets everything through, and the answers reach a session outside the scope."""
    script = _script(
        [
            {**_send({"id": 1, "kind": "ok"}), "source": "agent:main:discord:group:ops"},
            {"op": "read", "source": "agent:main:discord:group:ops", "target": "agent:beta:main"},
            {"op": "read", "source": "agent:main:discord:group:ops"},
            {"op": "advance", "seconds": 60},
        ]
    )
    tools = dict(script.config["tools"], sessions={"visibility": "agent"})
    script = script.model_copy(update={"config": dict(script.config, tools=tools)})

    def plant(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(policy.AccessPolicy, "scope_refusal", lambda self, *a, **k: None)

    assert await _clean_then_broken(script, plant, monkeypatch) == {"visibility"}
