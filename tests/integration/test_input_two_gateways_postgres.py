"""Two PostgreSQL gateways answering one waiting run (decision 33, issue 39 item 1): the
run asked on one gateway, answers race in from both, exactly one is accepted and one next
turn runs; the other answer is refused with nothing written. And a wait's deadline,
watched by both gateways, ends it once."""

from __future__ import annotations

import asyncio
from typing import Any

from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import ScriptedRuntime, VirtualClock

OPS = "agent:main:ops"
SCRIPT = {
    "rules": [
        {"match": "^deploy", "ask": {"prompt": "Deploy?", "options": ["yes", "no"]}},
        {"match": "^(yes|no)$", "reply": "answered {message}"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
# Only a bound on a broken test: work that never settles fails instead of hanging.
HANG_SECONDS = 60


def names(gateway: Gateway, run_id: str) -> list[str]:
    return [
        type(event).__name__
        for _, event in store_of(gateway).events()
        if str(event.originator_id) == run_id
    ]


async def _two(postgres_url: str, clock: VirtualClock) -> tuple[Gateway, Gateway]:
    opened = [
        await Gateway.open(
            config=GatewayConfig(),
            store=postgres_url,
            clock=clock,
            runtime=ScriptedRuntime.from_dict(SCRIPT),
        )
        for _ in range(2)
    ]
    return opened[0], opened[1]


async def _asked(gateway: Gateway) -> str:
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message(OPS, role="user", content="hi")
    sent = await gateway.call_tool(
        "main", "sessions_send", {"sessionKey": OPS, "message": "deploy", "timeoutSeconds": 30}
    )
    assert sent["status"] == "input_required"
    await asyncio.wait_for(gateway.wait_idle(), HANG_SECONDS)
    return str(sent["runId"])


async def test_answers_racing_from_two_gateways_resume_one_turn(
    postgres_url: str, clock: VirtualClock
) -> None:
    first, second = await _two(postgres_url, clock)
    try:
        run_id = await _asked(first)
        seen: Any = await second.run(run_id)
        assert seen["inputRequest"] == {"prompt": "Deploy?", "options": ["yes", "no"]}
        answers = await asyncio.wait_for(
            asyncio.gather(
                first.provide_input(run_id, "yes", by="main"),
                second.provide_input(run_id, "no", by="main"),
            ),
            HANG_SECONDS,
        )
        assert sorted(answer["status"] for answer in answers) == ["accepted", "error"]
        refused = next(answer for answer in answers if answer["status"] == "error")
        assert "is not waiting for input" in refused["error"]
        await asyncio.wait_for(asyncio.gather(first.wait_idle(), second.wait_idle()), HANG_SECONDS)
        done: Any = await first.run(run_id)
        assert done["status"] == "ok"
        recorded = names(first, run_id)
        assert recorded.count("RunInputProvided") == 1
        assert recorded.count("RunDispatched") == 2
        assert recorded[-1] == "RunCompleted"
    finally:
        await first.close()
        await second.close()


async def test_both_gateways_watch_the_deadline_and_it_ends_the_wait_once(
    postgres_url: str, clock: VirtualClock
) -> None:
    first = await Gateway.open(
        config=GatewayConfig(),
        store=postgres_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    second = None
    try:
        run_id = await _asked(first)
        # Opened after the ask: its resume arms its own timer for the waiting run.
        second = await Gateway.open(
            config=GatewayConfig(),
            store=postgres_url,
            clock=clock,
            runtime=ScriptedRuntime.from_dict(SCRIPT),
        )
        await clock.advance(internals(first).services.run_timeout_seconds + 1)
        await asyncio.wait_for(asyncio.gather(first.wait_idle(), second.wait_idle()), HANG_SECONDS)
        assert (await second.run(run_id) or {})["status"] == "timeout"
        assert names(first, run_id).count("RunTimedOut") == 1
    finally:
        await first.close()
        if second is not None:
            await second.close()
