"""A gateway process killed with SIGKILL in the middle of a run: a live gateway on the
same PostgreSQL schema finishes the run, once, without waiting for the dead one's lease
(ADR 0049: the dead process's liveness lock is free the instant it dies).

The lease here is an hour: a takeover that waited for it would never come within the
test's bound. How fast the takeover is, is the benchmark's (benchmarks/bench_takeover.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter

from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import ScriptedRuntime
from store_holder import child_gateway

from tests.processes.failover_child import CONFIG, TARGET

SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "finished by the live gateway"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
# Only a bound on a broken test: far less than the lease, far more than a takeover takes.
HANG_SECONDS = 120


async def test_a_killed_gateways_run_is_finished_once_by_a_live_one_before_its_lease(
    postgres_url: str,
) -> None:
    store = f"{postgres_url}&lease_seconds=3600"
    # The live gateway, on the real clock: its takeover watch runs by itself.
    live = await Gateway.open(
        config=GatewayConfig.load(CONFIG), store=store, runtime=ScriptedRuntime.from_dict(SCRIPT)
    )
    dying = child_gateway("failover_child", store)
    try:
        assert dying.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(dying.stdout.readline), HANG_SECONDS)
        assert line.startswith("dispatched "), (line, dying.stderr and dying.stderr.read())
        run_id = line.split()[1]
        os.kill(dying.pid, signal.SIGKILL)
        assert await asyncio.to_thread(dying.wait) == -signal.SIGKILL

        seen = []
        async with asyncio.timeout(HANG_SECONDS):
            async for event in live.subscribe(after=0):
                if event["runId"] == run_id and event["kind"] == "run":
                    seen.append(event["type"])
                    if event["type"] in {"RunCompleted", "RunFailed", "RunTimedOut"}:
                        break
        # Started once, dispatched by the dead gateway then by the live one, ended once.
        assert seen == ["RunStarted", "RunDispatched", "RunDispatched", "RunCompleted"]
        await live.wait_idle()
        run = await live.run(run_id)
        assert run is not None
        assert run["status"] == "ok"
        history = await live.call_tool(TARGET, "sessions_history", {"sessionKey": TARGET})
        replies = [m["content"][0]["text"] for m in history["messages"] if m["role"] == "assistant"]
        # The run's reply once, then its announce step's (in the same session).
        assert replies == ["finished by the live gateway", "ANNOUNCE_SKIP"]
        events = [type(event).__name__ for _, event in store_of(live).events()]
        assert Counter(events)["RunCompleted"] == 2  # the run and its announce, once each
    finally:
        if dying.poll() is None:
            dying.kill()
            dying.wait()
        await live.close()
