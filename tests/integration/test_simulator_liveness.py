"""A hang is a failure (issue 28 item 3): a gateway that stops making progress is stopped
by the simulator's watchdog and reported as a ``liveness`` violation with its script and
where its work waits; the CLI has a per-seed budget and never hangs.

The watchdog's budget is real time by nature (a stuck loop moves nothing else); these
tests give it a fraction of a second.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from command_line import run_process
from sessionwire import ChannelDelivery, Delivery
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.testkit.simulator.agents import SimulatedAgents
from sessionwire.adapters.testkit.simulator.script import parse_steps
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import (
    Simulation,
    SimulationScript,
    WorkloadOptions,
    fresh_stores,
    generate,
)

STALL = 0.4


class StuckOnAFuture(AgentRuntime):
    """A planted hang: a run whose plan says ``stuck`` awaits a future nobody sets and
    that is no clock wait (the gateway counts its runtime call runnable for ever)."""

    def __init__(self, inner: AgentRuntime) -> None:
        self.inner = inner

    async def run(self, request: RunRequest) -> RunReply:
        if "stuck" in request.message:
            await asyncio.get_running_loop().create_future()
        return await self.inner.run(request)


def _script(steps: list[dict[str, Any]]) -> SimulationScript:
    return generate(0, WorkloadOptions(steps=0, crashes=False)).with_steps(parse_steps(steps))


STUCK_SEND = {
    "op": "send",
    "source": "agent:main:main",
    "target": "agent:beta:main",
    "wait": 0,
    "plan": {"id": 1, "kind": "ok", "stuck": True},
}


async def test_a_gateway_that_stops_making_progress_is_a_liveness_failure_not_a_hang() -> None:
    simulation = Simulation(
        fresh_stores("memory"), wrap_runtime=StuckOnAFuture, stall_seconds=STALL
    )
    script = _script([STUCK_SEND, {"op": "advance", "seconds": 5}])
    result = await simulation.run(script)
    assert result.stuck is not None
    assert result.first_invariant == "liveness", result.violations
    stuck = result.violations[0]
    assert stuck.step == 0
    assert "no progress" in stuck.detail
    # Where the stuck work waits: the run's runtime call, inside the planted agent.
    assert "runtime:" in stuck.detail
    assert "test_simulator_liveness.py" in stuck.detail
    # The same script stops the same way again (the report is a reproduction).
    again = await simulation.run(script)
    assert again.violations == result.violations
    assert again.fingerprint == result.fingerprint
    # Without the planted hang, the same script is clean.
    assert (await Simulation(fresh_stores("memory"), stall_seconds=STALL).run(script)).ok


class BackingOffForMonths(ChannelDelivery):
    """A planted never-ending wait: the channel adapter backs off for 100 days of
    gateway time before each post (a unit mistaken, say)."""

    def __init__(self, inner: ChannelDelivery) -> None:
        self.inner = inner

    async def deliver(self, delivery: Delivery) -> None:
        clock = self.inner.channels.clock  # type: ignore[attr-defined]
        await clock.sleep(100 * 86_400)
        await self.inner.deliver(delivery)


async def test_work_still_waiting_on_the_clock_long_after_the_last_step_is_a_failure() -> None:
    send = {**STUCK_SEND, "target": "agent:main:discord:group:ops"}
    send["plan"] = {"id": 1, "kind": "ok", "ann": "say"}
    script = _script([send])
    planted = Simulation(fresh_stores("memory"), wrap_delivery=BackingOffForMonths)
    result = await planted.run(script)
    assert result.counts.get("liveness") == 1, result.violations
    assert "still waits on the clock 100 days" in result.violations[0].detail
    assert (await Simulation(fresh_stores("memory")).run(script)).ok


def test_the_cli_reports_a_hung_seed_with_its_script(
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_run = SimulatedAgents.run

    async def stuck(self: SimulatedAgents, request: RunRequest) -> RunReply:
        if request.step == "primary":
            await asyncio.get_running_loop().create_future()
        return await real_run(self, request)

    monkeypatch.setattr(SimulatedAgents, "run", stuck)
    code = main(
        ["simulate", "--seeds", "1", "--stall-seconds", str(STALL), "--save", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "seed 0: FAILED (liveness)" in out
    assert "no progress" in out
    assert f"seed 0 hung; not shrunk, its whole script: {tmp_path}/seed-0.json" in out
    # The default store (SQLite) plays crashes: the seed's script with them.
    assert SimulationScript.load(tmp_path / "seed-0.json") == generate(0)


def test_a_seed_over_its_real_time_budget_fails_the_run_and_never_hangs(tmp_path: Any) -> None:
    """The last resort, for a loop blocked where the watchdog cannot run: the seed's
    wall budget ends the process with a failure and the seed's script."""
    ran = run_process(
        "simulate", "--seeds", "1", "--seed-budget", "0.001", "--save", str(tmp_path), timeout=120
    )
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "seed 0: FAILED (liveness): still playing after 0.001s of real time" in ran.stdout
    assert f"its script: {tmp_path}/seed-0.json" in ran.stdout
