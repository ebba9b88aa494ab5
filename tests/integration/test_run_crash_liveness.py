"""A run whose execution breaks (a database error, say) must not leave its waiters
waiting forever."""

from __future__ import annotations

import asyncio
from typing import Any

from hang_bounds import HANG_SECONDS
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [{"step": "primary", "reply": "pong"}, {"step": "announce", "reply": "ANNOUNCE_SKIP"}]
}


async def test_a_run_that_crashes_once_does_not_hang_the_gateway() -> None:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), runtime=ScriptedRuntime.from_dict(SCRIPT)
    )
    try:
        await gateway.record_message("main", role="user", content="target")
        await gateway.record_message("cron:a", role="user", content="start")
        # The gateway's awaited store: where its runs look up the session to change.
        lookup = internals(gateway).store.session_for_update
        broken = [True]

        async def flaky_lookup(key: str) -> Any:
            if broken and key == "agent:main:main":
                broken.clear()
                raise RuntimeError("connection lost")  # once, as a database hiccup
            return await lookup(key)

        internals(gateway).store.session_for_update = flaky_lookup  # type: ignore[method-assign]
        sent = await gateway.call_tool(
            "cron:a",
            "sessions_send",
            {"sessionKey": "main", "message": "ping", "timeoutSeconds": 0},
        )
        assert sent["status"] == "accepted", sent
        await asyncio.wait_for(gateway.wait_idle(), timeout=HANG_SECONDS)
        assert not broken  # the run did meet the hiccup
    finally:
        await gateway.close()


async def test_a_run_that_keeps_crashing_is_recorded_as_failed() -> None:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), runtime=ScriptedRuntime.from_dict(SCRIPT)
    )
    try:
        await gateway.record_message("main", role="user", content="target")
        await gateway.record_message("cron:a", role="user", content="start")
        # The gateway's awaited store: where its runs look up the session to change.
        lookup = internals(gateway).store.session_for_update

        async def broken_lookup(key: str) -> Any:
            if key == "agent:main:main":
                raise RuntimeError("connection lost")  # every time
            return await lookup(key)

        internals(gateway).store.session_for_update = broken_lookup  # type: ignore[method-assign]
        sent = await asyncio.wait_for(
            gateway.call_tool(
                "cron:a",
                "sessions_send",
                {"sessionKey": "main", "message": "ping", "timeoutSeconds": 30},
            ),
            timeout=HANG_SECONDS,
        )
        assert sent["status"] == "error", sent
        assert sent["error"] == "the run crashed 3 times in the gateway"
        await asyncio.wait_for(gateway.wait_idle(), timeout=HANG_SECONDS)
        names = [type(event).__name__ for _, event in store_of(gateway).events()]
        assert names.count("RunFailed") == 1
    finally:
        await gateway.close()
