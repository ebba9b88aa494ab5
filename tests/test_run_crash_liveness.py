"""A run whose execution breaks (a database error, say) must not leave its waiters
waiting forever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sessionwire import Gateway
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [{"step": "primary", "reply": "pong"}, {"step": "announce", "reply": "ANNOUNCE_SKIP"}]
}
# Far longer than the work takes: reaching it means the gateway would wait forever.
HANG_SECONDS = 10


@pytest.mark.xfail(
    strict=True,
    raises=TimeoutError,
    reason=(
        "application/runs.py _work: an exception in _execute is logged ('run crashed') "
        "and the run's future is never settled, nor the run retried: the exchange driver "
        "awaiting it, and wait_idle(), wait forever (found chasing the two-process hang)"
    ),
)
async def test_a_run_that_crashes_once_does_not_hang_the_gateway() -> None:
    gateway = await Gateway.open(runtime=ScriptedRuntime.from_dict(SCRIPT))
    try:
        await gateway.record_message("main", role="user", content="target")
        await gateway.record_message("cron:a", role="user", content="start")
        lookup = gateway.store.session_for_update
        broken = [True]

        def flaky_lookup(key: str) -> Any:
            if broken and key == "agent:main:main":
                broken.clear()
                raise RuntimeError("connection lost")  # once, as a database hiccup
            return lookup(key)

        gateway.store.session_for_update = flaky_lookup  # type: ignore[method-assign]
        sent = await gateway.call_tool(
            "cron:a",
            "sessions_send",
            {"sessionKey": "main", "message": "ping", "timeoutSeconds": 0},
        )
        assert sent["status"] == "accepted", sent
        await asyncio.wait_for(gateway.wait_idle(), timeout=HANG_SECONDS)
    finally:
        await gateway.close()
