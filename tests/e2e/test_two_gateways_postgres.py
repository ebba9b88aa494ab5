"""Two gateway processes on one PostgreSQL database sending into one session."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from uuid import UUID

from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import ScriptedRuntime

ROOT = Path(__file__).resolve().parents[2]
PER_PROCESS = 10
SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "reply to {message}", "delaySeconds": 0.02},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
# cron:a sends into main, another session of its agent (written before scopes).
NO_PING_PONG = before_scopes({"session": {"agentToAgent": {"maxPingPongTurns": 0}}}, "agent")
# Far longer than the work takes: reaching it means a gateway would wait forever.
HANG_SECONDS = 60


async def test_two_processes_never_run_two_runs_in_one_session_at_once(postgres_url: str) -> None:
    gateway = await Gateway.open(store=postgres_url)
    try:
        await gateway.record_message("main", role="user", content="shared target")
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.processes.sender_child",
                    postgres_url,
                    name,
                    str(PER_PROCESS),
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("a", "b")
        ]
        for process in children:
            _, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr

        events = [event for _, event in store_of(gateway).events()]
        started = [e for e in events if type(e).__name__ == "RunStarted"]
        target_runs = {e.originator_id for e in started if e.session_key == "agent:main:main"}
        assert len(target_runs) == 2 * PER_PROCESS * 2  # a primary and an announce per send

        # Never two runs at once in the target session: [dispatched, ended] never overlap.
        spans = []
        for run_id in target_runs:
            run = await internals(gateway).run_engine.load(run_id)
            assert run is not None
            assert run.state.status == "ok", run.state
            assert run.state.started_at is not None
            assert run.state.ended_at is not None
            spans.append((run.state.started_at, run.state.ended_at))
        spans.sort()
        for (_, previous_end), (next_start, _) in itertools.pairwise(spans):
            assert next_start >= previous_end

        # No event lost or duplicated: every run dispatched and completed exactly once.
        per_run = Counter(
            (type(e).__name__, e.originator_id)
            for e in events
            if type(e).__name__ in {"RunDispatched", "RunCompleted"}
        )
        assert all(count == 1 for count in per_run.values()), per_run.most_common(3)
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "main", "limit": 1000}
        )
        texts = Counter(m["content"][0]["text"] for m in history["messages"])
        for name in "ab":
            for index in range(PER_PROCESS):
                assert texts[f"{name}-{index}"] == 1
                assert texts[f"reply to {name}-{index}"] == 1
        assert sum(1 for e in events if type(e).__name__ == "ExchangeClosed") == 2 * PER_PROCESS
    finally:
        await gateway.close()


async def test_a_gateway_resuming_another_gateways_exchange_hears_its_run_end(
    postgres_url: str,
) -> None:
    # Gateway B starts while gateway A sends: B's resume reads the pending runs before
    # A's send and the open exchanges after it, so B drives A's exchange without having
    # queued its run. B must still learn when that run ends (A runs it), or it waits
    # forever and never goes idle.
    async def open_gateway() -> Gateway:
        return await Gateway.open(
            config=GatewayConfig.load(NO_PING_PONG),
            store=postgres_url,
            runtime=ScriptedRuntime.from_dict(SCRIPT),
        )

    first = await open_gateway()
    second = await open_gateway()  # its resume finds no pending run yet
    try:
        await first.record_message("main", role="user", content="shared target")
        await first.record_message("cron:a", role="user", content="start")
        sent = await first.call_tool(
            "cron:a", "sessions_send", {"sessionKey": "main", "message": "hi", "timeoutSeconds": 0}
        )
        assert sent["status"] == "accepted", sent
        assert await internals(second).exchanges.resume() == 1  # the exchange A just opened

        await asyncio.wait_for(
            asyncio.gather(first.wait_idle(), second.wait_idle()), timeout=HANG_SECONDS
        )
        # Each gateway's wait_idle sees its own work only: the announce run may still be
        # passing its session's lease from one gateway to the other (1 run in 12). Its
        # end is waited for by the event that records it, never by time.
        await asyncio.wait_for(_exchange_closed(second), timeout=HANG_SECONDS)

        primary = await internals(second).run_engine.load(UUID(sent["runId"]))
        assert primary is not None
        assert primary.state.status == "ok"
        assert primary.state.reply == "reply to hi"
        closed = [e for _, e in store_of(second).events() if type(e).__name__ == "ExchangeClosed"]
        assert len(closed) == 1
    finally:
        await second.close()
        await first.close()


async def _exchange_closed(gateway: Gateway) -> None:
    async for event in gateway.subscribe():
        if event["type"] == "ExchangeClosed":
            return
