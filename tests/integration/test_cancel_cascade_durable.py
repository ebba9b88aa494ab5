"""The cancel cascade survives a crash (issue 28 item 6): a process that dies right after
the root run's ``RunCancelled`` commits leaves the runs it caused pending; the next
gateway cancels them as it opens (never hands them to their agents again), and a cancel
of the root asked again cascades again. On the stores that reopen."""

from __future__ import annotations

from pathlib import Path

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.application.orchestration.cancellation import RunCancellation
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import CapturingDelivery, VirtualClock

MAIN = "agent:main:main"
A = "agent:main:work:a"
B = "agent:main:work:b"
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}


class Forwarding(AgentRuntime):
    """A's primary run sends on to B, then both work a minute of gateway time."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None
        self.asked: list[str] = []

    async def run(self, request: RunRequest) -> RunReply:
        self.asked.append(request.run_id)
        if request.step == "primary" and request.session_key == A:
            assert self.gateway is not None
            params = {"sessionKey": B, "message": "on", "timeoutSeconds": 0}
            await self.gateway.call_tool(A, "sessions_send", params)
        if request.step == "primary":
            await request.clock.sleep(60)
        return RunReply(text="done")


async def _open(store: str, clock: VirtualClock, agents: Forwarding) -> Gateway:
    gw = await Gateway.open(
        # A's run sends to its sibling B: its agent's sessions (a scope of decision 28).
        config=GatewayConfig.load(before_scopes(QUIET, "agent")),
        store=store,
        clock=clock,
        runtime=agents,
        delivery=CapturingDelivery(),
    )
    agents.gateway = gw
    return gw


async def _chain(gw: Gateway) -> tuple[str, str]:
    """A's run (the root) and the run it caused in B, both running."""
    for key in (MAIN, A, B):
        await gw.record_message(key, role="user", content="(opened)")
    sent = await gw.call_tool(
        MAIN, "sessions_send", {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
    )
    root = str(sent["runId"])
    await gw.wait_idle()
    (child,) = [run for run in (await gw.runs(trace_id=root))["runs"] if run["sessionKey"] == B]
    assert child["status"] == "running"
    return root, str(child["runId"])


def dies_before_its_cascade(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process dies right after the root's RunCancelled commits: no cascade."""

    async def none(self: RunCancellation, root: str) -> list[str]:
        return []

    monkeypatch.setattr(RunCancellation, "_cascade", none)


@pytest.fixture(params=["sqlite", "postgres"])
def reopenable(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"
    return str(request.getfixturevalue("postgres_url"))


async def test_a_cascade_cut_short_by_a_crash_is_finished_as_the_gateway_opens(
    reopenable: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = Forwarding()
    gw = await _open(reopenable, clock, agents)
    try:
        root, child = await _chain(gw)
        with monkeypatch.context() as patched:
            dies_before_its_cascade(patched)
            answer = await gw.cancel_run(root, "stop")
        assert answer is not None
        assert answer["cancelled"] is True
        assert answer["cascaded"] == []
        assert (await gw.run(child))["status"] == "running"  # type: ignore[index]
    finally:
        await gw.close()  # the process is gone; the child's run is left running
    asked = len(agents.asked)
    gw = await _open(reopenable, clock, agents)
    try:
        await gw.wait_idle()
        found = await gw.run(child)
        assert found is not None
        assert found["status"] == "cancelled"
        assert found["error"] == f"run cancelled: caused by cancelled run {root}"
        assert agents.asked[asked:] == []  # never handed to its agent again
    finally:
        await gw.close()


async def test_a_cancel_asked_again_cascades_again(
    tmp_path: Path, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = Forwarding()
    gw = await _open(f"sqlite:///{tmp_path}/store.db", clock, agents)
    try:
        root, child = await _chain(gw)
        with monkeypatch.context() as patched:
            dies_before_its_cascade(patched)
            first = await gw.cancel_run(root, "stop")
        assert first is not None
        assert first["cascaded"] == []
        again = await gw.cancel_run(root, "stop")
        assert again is not None
        assert again["cancelled"] is False
        assert again["cascaded"] == [child]
        assert (await gw.run(child))["status"] == "cancelled"  # type: ignore[index]
        # Once all is cancelled, asking again is the plain no-op it always was.
        third = await gw.cancel_run(root, "stop")
        assert third is not None
        assert "cascaded" not in third
        assert third["reason"] == "the run had already ended (cancelled)"
    finally:
        await gw.close()


async def test_the_simulator_crashes_right_after_a_cancel_commits_and_the_cascade_finishes(
    tmp_path: Path,
) -> None:
    from sessionwire.adapters.testkit.simulator.script import parse_steps
    from sessionwire.testing import Simulation, WorkloadOptions, fresh_stores, generate

    chain = {
        "op": "send",
        "source": "agent:main:main",
        "target": "agent:main:discord:group:ops",
        "wait": 0,
        "plan": {
            "id": 1,
            "kind": "hang",
            "ann": "skip",
            "calls": [
                {
                    "tool": "send",
                    "target": "agent:beta:main",
                    "wait": 0,
                    "plan": {"id": 2, "kind": "slow", "delay": 60, "ann": "skip", "depth": 2},
                }
            ],
        },
    }
    steps = [
        {"op": "crash", "after_events": 0, "down_seconds": 1, "at": "cancel"},
        chain,
        {"op": "cancel", "pick": "nth", "index": 0},
        {"op": "advance", "seconds": 120},
    ]
    script = generate(0, WorkloadOptions(steps=0)).with_steps(parse_steps(steps))
    stores = fresh_stores(f"sqlite:///{tmp_path}")
    try:
        result = await Simulation(stores).run(script)
    finally:
        stores.close()
    assert result.crashes == 1
    assert result.ok, result.violations
