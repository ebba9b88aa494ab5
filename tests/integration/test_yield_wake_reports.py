"""A yield's wake carries every report saved before it (decision 26, ADR 0060).

Found by the simulator (seed 100039 on SQLite, ``seed-100039-yield-wake-misses-a-
report``): a session spawned two sub-agents and yielded for ``any``; the first report
woke it, and the second was saved while the yield's driver was recording the wake, from
a read of the children taken before that report. The wake, after the report in the log,
listed that child as still ``reporting``. The driver now reads the children again inside
the wake's attempt, under a lock of the session that the reports of its children take
while they are saved: a report is saved before the wake's read (and is in it) or after
the wake.

The report is made to land in that window on purpose: the wake's save waits, before it
writes, for the slow child to end and try to report. Memory, SQLite and PostgreSQL,
virtual time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hang_bounds import HANG_SECONDS
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
SLOW_SECONDS = 5
RULES: list[dict[str, Any]] = [
    {
        "step": "primary",
        "session": MAIN,
        "tools": [
            {"tool": "sessions_spawn", "params": {"task": "fast one", "label": "fast"}},
            {"tool": "sessions_spawn", "params": {"task": "slow two", "label": "slow"}},
            {"tool": "sessions_yield", "params": {"waitFor": "any"}},
        ],
    },
    {"step": "subagent_task", "match": "^fast", "reply": "fast done"},
    {"step": "subagent_task", "match": "^slow", "reply": "slow done", "delaySeconds": SLOW_SECONDS},
    {"step": "subagent_announce", "reply": "Result: {session} reported"},
    {"step": "yield_wake", "reply": "woken and done"},
]
A2A = {"tools": {"agentToAgent": {"enabled": True, "allow": ["*"]}}}


class ReportDuringTheWake:
    """The first save of a wake first lets the slow child end (the clock moves on) and
    its report be saved, if it can be, before the wake is written."""

    def __init__(self, gateway: Gateway, clock: VirtualClock) -> None:
        self.fired = 0
        store = internals(gateway).store
        save = store.save

        async def save_after_the_report(*aggregates: Any) -> None:
            names = {type(e).__name__ for a in aggregates for e in a.pending_events}
            if not self.fired and "YieldWoken" in names:
                self.fired += 1
                await clock.advance(SLOW_SECONDS)
            await save(*aggregates)

        store.save = save_after_the_report  # type: ignore[method-assign]


async def test_a_report_saved_while_the_wake_is_recorded_is_in_it_or_after_it(
    store_url: str, clock: VirtualClock
) -> None:
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(A2A)),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": RULES}),
        delivery=CapturingDelivery(),
    )
    try:
        hook = ReportDuringTheWake(gw, clock)
        await gw.record_message(MAIN, role="user", content="hi")
        await gw.call_tool(
            "agent:other:main",
            "sessions_send",
            {"sessionKey": MAIN, "message": "go", "timeoutSeconds": 0},
        )
        for _ in range(3):
            await asyncio.wait_for(gw.wait_idle(), timeout=HANG_SECONDS)
            await clock.advance(SLOW_SECONDS)
        await asyncio.wait_for(gw.wait_idle(), timeout=HANG_SECONDS)

        events = list(store_of(gw).events())
        (wake_at,) = [at for at, e in events if type(e).__name__ == "YieldWoken"]
        wake = events[[at for at, _ in events].index(wake_at)][1]
        reported_before = {
            str(e.originator_id)
            for at, e in events
            if type(e).__name__ in ("SubagentAnnounced", "AnnounceSkipped") and at < wake_at
        }
        carried = {report.spawn_id for report in wake.reports}
        still_running = {child.spawn_id for child in wake.still_running}

        assert hook.fired == 1
        assert len(carried | still_running) == 2
        # Every report saved before the wake is in it; none it lists as running had one.
        assert reported_before <= carried, (reported_before, carried)
        assert not reported_before & still_running
        assert sum(1 for _, e in events if type(e).__name__ == "SubagentAnnounced") == 2
    finally:
        await gw.close()
