"""A gateway killed with SIGKILL mid-exchange resumes it exactly once after a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of

ROOT = Path(__file__).resolve().parents[2]
KILL_POINTS = [
    "before-turn-2-starts",
    "while-turn-2-runs",
    "after-turn-2-completed",
    "turn-3-queued",
    "before-announce-delivery",
]


def child(store: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.processes.exchange_child", store, *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


async def texts(gateway: Gateway, key: str) -> list[tuple[str, str]]:
    history = await gateway.call_tool(key, "sessions_history", {"sessionKey": key})
    return [(m["role"], m["content"][0]["text"]) for m in history["messages"]]


@pytest.mark.parametrize("kill_at", KILL_POINTS)
async def test_a_killed_gateway_finishes_the_exchange_once(tmp_path: Path, kill_at: str) -> None:
    store = f"sqlite:///{tmp_path}/crash.db"

    killed = child(store, "start", kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    resumed = child(store, "resume")
    assert resumed.returncode == 0, resumed.stderr

    gateway = await Gateway.open(config=GatewayConfig.load(before_scopes()), store=store)
    try:
        assert await texts(gateway, "discord:group:target") == [
            ("user", "hi"),
            ("user", "ping"),
            ("assistant", "initial"),
            ("user", "req-1"),
            ("assistant", "tgt-2"),
            ("user", "req-3"),
            ("assistant", "tgt-4"),
            ("user", "Agent-to-agent announce step."),
            ("assistant", "announce now"),
        ]
        assert await texts(gateway, "discord:group:req") == [
            ("user", "hi"),
            ("user", "initial"),
            ("assistant", "req-1"),
            ("user", "tgt-2"),
            ("assistant", "req-3"),
        ]
        events = [event for _, event in store_of(gateway).events()]
        names = Counter(type(event).__name__ for event in events)
        assert names["PingPongTurn"] == 4
        assert names["AnnounceDelivered"] == 1
        assert names["ExchangeClosed"] == 1
        assert names["RunStarted"] == 6  # primary, four turns, announce
        assert names["RunCompleted"] == 6
        turns = [event.turn for event in events if type(event).__name__ == "PingPongTurn"]
        assert turns == [1, 2, 3, 4]
        delivered = next(e for e in events if type(e).__name__ == "AnnounceDelivered")
        assert (delivered.channel, delivered.to, delivered.message) == (
            "discord",
            "channel:target",
            "announce now",
        )
    finally:
        await gateway.close()
