"""A store fault on the save of a run's outcome loses nothing and doubles nothing.

Found by the simulator (seed 58 on SQLite, ``seed-58-store-fault-loses-a-completion``):
the agent answered, the save of its ``RunCompleted`` failed once, and the run engine
treated that as a crashed run, dispatching it again and asking its agent a second time
(here the runtime answers twice; there the run ended timed out). The answer is in hand
once the agent gave it: the engine records that answer on its next attempt, and never
asks the agent twice.

The fault is injected where the gateway meets its store (its one awaited ``save``, as
the simulator does), in front of a real backend: memory, SQLite and PostgreSQL. Either
nothing was written (``refused``), or the save was committed and only its answer lost
(``answer-lost``, as when a connection drops after the server committed and the
store's own retries run out): the retry then reads the outcome back instead of
writing it again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hang_bounds import HANG_SECONDS
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [{"step": "primary", "reply": "pong"}, {"step": "announce", "reply": "ANNOUNCE_SKIP"}]
}


class CompletionFaults:
    """The next ``times`` saves of the first run's ``RunCompleted`` that the gateway
    records fail (the first run's only: not its announce's)."""

    def __init__(self, gateway: Gateway, *, times: int, committed: bool) -> None:
        self.left = times
        self.fired = 0
        self.run_id: Any = None
        store = internals(gateway).store
        save = store.save

        async def faulty_save(*aggregates: Any) -> None:
            completed = [
                e.originator_id
                for a in aggregates
                for e in a.pending_events
                if type(e).__name__ == "RunCompleted"
            ]
            if self.run_id is None and completed:
                self.run_id = completed[0]
            if self.left and self.run_id in completed:
                self.left -= 1
                self.fired += 1
                if committed:
                    await save(*aggregates)
                raise ConnectionError("the store failed the save")
            await save(*aggregates)

        store.save = faulty_save  # type: ignore[method-assign]


async def _open(store_url: str, runtime: ScriptedRuntime) -> Gateway:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_url, runtime=runtime
    )
    await gateway.record_message("main", role="user", content="target")
    await gateway.record_message("cron:a", role="user", content="start")
    return gateway


async def _send(gateway: Gateway) -> dict[str, Any]:
    return await asyncio.wait_for(
        gateway.call_tool(
            "cron:a",
            "sessions_send",
            {"sessionKey": "main", "message": "ping", "timeoutSeconds": 30},
        ),
        timeout=HANG_SECONDS,
    )


def _run_events(gateway: Gateway, run_id: str) -> list[str]:
    return [
        type(event).__name__
        for _, event in store_of(gateway).events()
        if str(event.originator_id) == run_id
    ]


def _assistant_lines(gateway: Gateway) -> list[str]:
    return [
        event.message.text()
        for _, event in store_of(gateway).events()
        if type(event).__name__ == "MessageAppended" and event.message.role == "assistant"
    ]


@pytest.mark.parametrize("committed", [False, True], ids=["refused", "answer-lost"])
@pytest.mark.parametrize("times", [1, 3], ids=["once", "every-retry"])
async def test_a_failed_completion_save_records_the_answer_once(
    store_url: str, committed: bool, times: int
) -> None:
    """Failing once, or on every retry of the run (MAX_RUN_CRASHES): the answer the
    agent gave is what the run ends with, recorded once, after one dispatch and one
    question to the agent; the caller hears it."""
    runtime = ScriptedRuntime.from_dict(SCRIPT)
    gateway = await _open(store_url, runtime)
    try:
        faults = CompletionFaults(gateway, times=times, committed=committed)
        sent = await _send(gateway)
        await asyncio.wait_for(gateway.wait_idle(), timeout=HANG_SECONDS)

        assert str(faults.run_id) == sent["runId"]
        assert faults.fired == (1 if committed else times)  # a committed one is read back
        assert sent["status"] == "ok", sent
        assert sent["reply"] == "pong"
        assert [call.message for call in runtime.calls if call.step == "primary"] == ["ping"]
        assert _run_events(gateway, sent["runId"]) == [
            "RunStarted",
            "RunDispatched",
            "RunCompleted",
        ]
        assert _assistant_lines(gateway).count("pong") == 1
    finally:
        await gateway.close()
