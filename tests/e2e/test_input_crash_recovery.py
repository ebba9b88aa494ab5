"""A gateway killed with SIGKILL while a run waits for input, or just after an answer was
accepted, or while the answer's turn runs, resumes the run with exactly one next turn
(decision 33): the answer in the transcript once, one reply, one RunInputProvided."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of

ROOT = Path(__file__).resolve().parents[2]
TARGET = "agent:main:ops"


def child(store: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.processes.input_child", store, *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.parametrize("kill_at", ["waiting", "accepted", "turn"])
async def test_a_killed_gateway_resumes_the_answered_run_once(tmp_path: Path, kill_at: str) -> None:
    store = f"sqlite:///{tmp_path}/input.db"
    asked = child(store, "ask", *(["waiting"] if kill_at == "waiting" else []))
    expected = -signal.SIGKILL if kill_at == "waiting" else 0
    assert asked.returncode == expected, asked.stderr
    run_id, status = asked.stdout.split()
    assert status == "input_required"

    answered = child(store, "answer", run_id, *([kill_at] if kill_at != "waiting" else []))
    expected = 0 if kill_at == "waiting" else -signal.SIGKILL
    assert answered.returncode == expected, answered.stderr
    assert answered.stdout.split() == ["accepted"]
    # A second answer is refused, whatever the first one's process became.
    again = child(store, "answer", run_id)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == ["error"]

    resumed = child(store, "resume")
    assert resumed.returncode == 0, resumed.stderr

    gateway = await Gateway.open(config=GatewayConfig(), store=store)
    try:
        run = await gateway.run(run_id)
        history = await gateway.call_tool("main", "sessions_history", {"sessionKey": TARGET})
        names = [
            type(event).__name__
            for _, event in store_of(gateway).events()
            if str(event.originator_id) == run_id
        ]
    finally:
        await gateway.close()
    assert run is not None
    assert run["status"] == "ok"
    lines = [(m["role"], m["content"][0]["text"]) for m in history["messages"]]
    assert lines.count(("user", "yes")) == 1
    assert lines.count(("assistant", "deployed")) == 1
    assert names.count("RunInputRequested") == 1
    assert names.count("RunInputProvided") == 1
    assert names.count("RunCompleted") == 1
