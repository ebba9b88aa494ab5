"""A post whose record's save fails is not posted again by the same gateway process.

Found by the simulator (seed 100087 on SQLite, ``seed-100087-report-posted-twice-after-a-
store-error``): a sub-agent's report was posted to its requester's channel, the save of
``SubagentAnnounced`` then failed once with a transient store error, and the spawn
driver, trying the step again after its back-off, posted the report a second time. The
agent-to-agent announce (``AnnounceDelivered``) had the same gap. The outbox already
remembered an attempt until its outcome was recorded (memory seed 18); every driver that
posts now does: across a crash the repeat is left to the channel's idempotency key, within
one process it is never made.

The fault is injected where the gateway meets its store (its one awaited ``save``),
before anything is written, on memory, SQLite and PostgreSQL, with virtual time (the
retry's back-off is on the gateway clock).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from hang_bounds import HANG_SECONDS
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

REQ_KEY = "agent:main:discord:group:req"
TARGET_KEY = "agent:main:discord:group:target"
A2A = {
    "tools": {"agentToAgent": {"enabled": True, "allow": ["*"]}},
    "session": {"agentToAgent": {"maxPingPongTurns": 0}},
}


class SaveFaults:
    """The first save holding an event named ``event`` fails once, before it writes."""

    def __init__(self, gateway: Gateway, event: str) -> None:
        self.fired = 0
        store = internals(gateway).store
        save = store.save

        async def faulty_save(*aggregates: Any) -> None:
            names = {type(e).__name__ for a in aggregates for e in a.pending_events}
            if not self.fired and event in names:
                self.fired += 1
                raise ConnectionError("the store failed the save")
            await save(*aggregates)

        store.save = faulty_save  # type: ignore[method-assign]


@asynccontextmanager
async def gateway(
    store_url: str, clock: VirtualClock, rules: list[dict[str, Any]]
) -> AsyncIterator[tuple[Gateway, CapturingDelivery]]:
    delivery = CapturingDelivery()
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(A2A)),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": rules}),
        delivery=delivery,
    )
    try:
        for key in (REQ_KEY, TARGET_KEY):
            await gw.record_message(
                key, role="user", content="hello", channel="discord", chat_type="group"
            )
        yield gw, delivery
    finally:
        await gw.close()


async def settle(gw: Gateway, clock: VirtualClock) -> None:
    """Until idle, then past the driver's back-off (seconds on the gateway clock)."""
    for _ in range(5):
        await asyncio.wait_for(gw.wait_idle(), timeout=HANG_SECONDS)
        await clock.advance(10)
    await asyncio.wait_for(gw.wait_idle(), timeout=HANG_SECONDS)


def recorded(gw: Gateway, name: str) -> int:
    return sum(1 for _, event in store_of(gw).events() if type(event).__name__ == name)


async def test_a_report_whose_record_failed_to_save_is_posted_once(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "subagent_task", "reply": "child done"},
        {"step": "subagent_announce", "reply": "Result: child reported"},
    ]
    async with gateway(store_url, clock, rules) as (gw, delivery):
        faults = SaveFaults(gw, "SubagentAnnounced")
        spawned = await gw.call_tool(REQ_KEY, "sessions_spawn", {"task": "do it"})
        assert spawned["status"] == "accepted", spawned
        await settle(gw, clock)

        assert faults.fired == 1
        assert recorded(gw, "SubagentAnnounced") == 1
        reports = [sent for sent in delivery.sent if "child reported" in sent["message"]]
        assert len(reports) == 1, delivery.sent
        assert reports[0]["sessionKey"] == REQ_KEY


async def test_an_announce_whose_record_failed_to_save_is_posted_once(
    store_url: str, clock: VirtualClock
) -> None:
    rules = [
        {"step": "primary", "reply": "pong"},
        {"step": "announce", "reply": "announce now"},
    ]
    async with gateway(store_url, clock, rules) as (gw, delivery):
        faults = SaveFaults(gw, "AnnounceDelivered")
        sent = await gw.call_tool(
            REQ_KEY, "sessions_send", {"sessionKey": TARGET_KEY, "message": "ping"}
        )
        assert sent["status"] == "ok", sent
        await settle(gw, clock)

        assert faults.fired == 1
        assert recorded(gw, "AnnounceDelivered") == 1
        announces = [item for item in delivery.sent if item["message"] == "announce now"]
        assert len(announces) == 1, delivery.sent
        assert announces[0]["sessionKey"] == TARGET_KEY
