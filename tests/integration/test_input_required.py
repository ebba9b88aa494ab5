"""Runs that wait for a person (decision 33, issue 39 items 1-2, ADR 0045), on every store.

A turn answers ``RunReply(input_request=InputRequest(prompt, options))``: the run is
``input_required`` (``RunInputRequested``), holds no lane slot, shows its prompt in
``gw.run``, and a waited ``sessions_send`` answers ``input_required`` at once. An answer
(``gw.provide_input``) queues exactly one next turn, whose message it is; a second answer,
an answer to a run that does not wait, one not among the options, or one from a session
that may not send there is refused with nothing written. The deadline still holds: it
ends the waiting run ``timeout``. A gateway reopened (after a crash while the run waits,
or after the answer was recorded) resumes it exactly once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig, InputRequest, RunReply, RunRequest
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.tools.run_params import MAX_SEND_MESSAGE_CHARS
from sessionwire.testing import ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
APPROVAL = {
    "rules": [
        {
            "step": "primary",
            "match": "^deploy",
            "ask": {"prompt": "Deploy to prod?", "options": ["yes", "no"]},
        },
        {"step": "primary", "match": "^yes$", "reply": "deployed"},
        {"step": "primary", "match": "^no$", "reply": "NO_REPLY"},
        {"step": "primary", "match": "^free", "ask": {"prompt": "Which branch?"}},
        {"step": "primary", "match": "^quiet", "reply": ""},
        {"step": "primary", "match": "^skip", "reply": "  REPLY_SKIP \n"},
        {"step": "primary", "reply": "branch {message}"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
OPS = "agent:main:ops"


def names(gateway: Gateway, aggregate_id: Any) -> list[str]:
    return [
        type(event).__name__
        for _, event in store_of(gateway).events()
        if str(event.originator_id) == str(aggregate_id)
    ]


async def _open(
    store_url: str, clock: VirtualClock, runtime: Any = None, config: Any = None
) -> Gateway:
    return await Gateway.open(
        config=config or GatewayConfig(),
        store=store_url,
        clock=clock,
        runtime=runtime or ScriptedRuntime.from_dict(APPROVAL),
    )


async def _ask(gateway: Gateway, message: str = "deploy prod") -> dict[str, Any]:
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message(OPS, role="user", content="hi")
    return await gateway.call_tool(
        "main", "sessions_send", {"sessionKey": OPS, "message": message, "timeoutSeconds": 30}
    )


async def _waiting(gateway: Gateway) -> str:
    """The run of a waited send that asks, once the gateway has settled."""
    run_id = str((await _ask(gateway))["runId"])
    await gateway.wait_idle()
    return run_id


@dataclass
class Waiting:
    gateway: Gateway
    clock: VirtualClock
    run_id: str


@pytest.fixture
async def waiting(store_url: str) -> AsyncIterator[Waiting]:
    """A gateway on the store whose ops session's run waits for input, asked by main."""
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    try:
        yield Waiting(gateway, clock, await _waiting(gateway))
    finally:
        await gateway.close()


async def _history(gateway: Gateway, key: str = OPS) -> list[tuple[str, str]]:
    found = await gateway.call_tool("main", "sessions_history", {"sessionKey": key, "limit": 20})
    return [
        (message["role"], "".join(block.get("text", "") for block in message["content"]))
        for message in found["messages"]
    ]


async def test_a_waited_send_answers_input_required_and_an_answer_resumes_one_turn(
    store_url: str,
) -> None:
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    try:
        sent = await _ask(gateway)
        assert sent == {
            "runId": sent["runId"],
            "status": "input_required",
            "prompt": "Deploy to prod?",
            "options": ["yes", "no"],
            "sessionKey": OPS,
            "delivery": {"status": "started", "mode": "announce"},
        }
        run_id = sent["runId"]
        await gateway.wait_idle()
        waiting = await gateway.run(run_id)
        assert waiting is not None
        assert waiting["status"] == "input_required"
        assert waiting["inputRequest"] == {"prompt": "Deploy to prod?", "options": ["yes", "no"]}
        listed = await gateway.runs(status="input_required")
        assert [run["runId"] for run in listed["runs"]] == [run_id]
        assert listed["runs"][0]["inputRequest"]["prompt"] == "Deploy to prod?"
        # Waiting holds no lane slot: every slot is free.
        assert (
            internals(gateway).run_engine.free_slots()
            == internals(gateway).config.agents.defaults.maxConcurrent
        )

        answered = await gateway.provide_input(run_id, "yes", by="main")
        assert answered == {"status": "accepted", "runId": run_id, "sessionKey": OPS}
        await gateway.wait_idle()
        done = await gateway.run(run_id)
        assert done is not None
        assert done["status"] == "ok"
        assert "inputRequest" not in done
        assert names(gateway, run_id) == [
            "RunStarted",
            "RunDispatched",
            "RunInputRequested",
            "RunInputProvided",
            "RunDispatched",
            "RunCompleted",
        ]
        history = await _history(gateway)
        asked = history.index(("user", "deploy prod"))
        # The exchange's steps (the announce) follow; the run's own turns come first.
        assert history[asked : asked + 4] == [
            ("user", "deploy prod"),
            ("assistant", "Deploy to prod?"),
            ("user", "yes"),
            ("assistant", "deployed"),
        ]
        second = await gateway.provide_input(run_id, "no", by="main")
        assert second["status"] == "error"
        assert "not waiting for input (it is ok)" in second["error"]
    finally:
        await gateway.close()


async def test_refusals_write_nothing(waiting: Waiting) -> None:
    gateway, run_id = waiting.gateway, waiting.run_id
    before = names(gateway, run_id)
    not_an_option = await gateway.provide_input(run_id, "maybe", by="main")
    assert not_an_option["status"] == "error"
    assert not_an_option["error"] == (
        "the answer must be one of the options the run asked with: 'yes', 'no'"
    )
    unknown = await gateway.provide_input("4b1e3c52-7c0e-4a4e-9d55-0c8a2e7d3b10", "yes")
    assert unknown == {
        "status": "error",
        "tool": "run_input",
        "error": "run 4b1e3c52-7c0e-4a4e-9d55-0c8a2e7d3b10 not found, or not visible "
        "to this session",
    }
    empty = await gateway.provide_input(run_id, "   ", by="main")
    assert empty["status"] == "error"
    assert empty["error"] == "text required"
    # The message bound of a send applies: the answer becomes the run's next message.
    huge = await gateway.provide_input(run_id, "y" * (MAX_SEND_MESSAGE_CHARS + 1), by="main")
    assert huge["status"] == "error"
    assert huge["error"].startswith("text is too long")
    assert names(gateway, run_id) == before
    assert (await gateway.run(run_id) or {})["status"] == "input_required"


async def test_who_may_answer_is_who_may_send(waiting: Waiting) -> None:
    """Another agent's session may not send into ops (agent-to-agent off): its answer
    reads as a run it cannot see, and nothing is written."""
    gateway, run_id = waiting.gateway, waiting.run_id
    await gateway.record_message("agent:other:main", role="user", content="hi")
    refused = await gateway.provide_input(run_id, "yes", by="agent:other:main")
    assert refused["status"] == "error"
    assert refused["error"] == f"run {run_id} not found, or not visible to this session"
    assert (await gateway.run(run_id) or {})["status"] == "input_required"
    # The operator answers any run.
    assert (await gateway.provide_input(run_id, "yes"))["status"] == "accepted"
    await gateway.wait_idle()
    assert (await gateway.run(run_id) or {})["status"] == "ok"


async def test_the_deadline_ends_a_waiting_run_timeout(waiting: Waiting) -> None:
    gateway, clock, run_id = waiting.gateway, waiting.clock, waiting.run_id
    timeout = internals(gateway).services.run_timeout_seconds
    await clock.advance(timeout - 1)
    assert (await gateway.run(run_id) or {})["status"] == "input_required"
    await clock.advance(2)
    ended = await gateway.run(run_id)
    assert ended is not None
    assert ended["status"] == "timeout"
    late = await gateway.provide_input(run_id, "yes", by="main")
    assert late["status"] == "error"
    assert names(gateway, run_id)[-1] == "RunTimedOut"


async def test_a_failed_save_of_the_timeout_is_made_again(
    waiting: Waiting, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the simulator (seed 200145 on memory): the deadline's timer died with
    # its failed save, and the run waited past its deadline until a restart.
    gateway, clock, run_id = waiting.gateway, waiting.clock, waiting.run_id
    store = internals(gateway).store
    save = store.save
    failed: list[str] = []

    async def failing_once(*aggregates: Any) -> None:
        pending = [type(e).__name__ for a in aggregates for e in getattr(a, "pending_events", ())]
        if "RunTimedOut" in pending and not failed:
            failed.append(run_id)
            raise ConnectionError("the store failed the save (a transient error)")
        await save(*aggregates)

    monkeypatch.setattr(store, "save", failing_once)
    await clock.advance(internals(gateway).services.run_timeout_seconds + 1)
    assert failed == [run_id]
    ended = await gateway.run(run_id)
    assert ended is not None
    assert ended["status"] == "timeout"
    assert (await gateway.provide_input(run_id, "yes", by="main"))["status"] == "error"


async def test_cancel_ends_a_waiting_run(waiting: Waiting) -> None:
    gateway, run_id = waiting.gateway, waiting.run_id
    cancelled = await gateway.cancel_run(run_id, "not needed")
    assert cancelled is not None
    assert cancelled["cancelled"] is True
    assert cancelled["status"] == "cancelled"
    assert (await gateway.provide_input(run_id, "yes", by="main"))["status"] == "error"


@pytest.fixture
def reopenable(store_url: str) -> str:
    if store_url == "memory":
        pytest.skip("a memory store cannot be reopened")
    return store_url


async def test_reopened_while_waiting_then_answered_runs_one_turn(reopenable: str) -> None:
    clock = VirtualClock(start=START)
    first = await _open(reopenable, clock)
    try:
        run_id = await _waiting(first)
    finally:
        await first.close()
    second = await _open(reopenable, clock)
    try:
        assert (await second.run(run_id) or {})["inputRequest"]["options"] == ["yes", "no"]
        assert (await second.provide_input(run_id, "yes", by="main"))["status"] == "accepted"
        await second.wait_idle()
        assert (await second.run(run_id) or {})["status"] == "ok"
        assert names(second, run_id).count("RunDispatched") == 2
    finally:
        await second.close()


async def test_reopened_waiting_run_still_times_out_at_its_deadline(reopenable: str) -> None:
    clock = VirtualClock(start=START)
    first = await _open(reopenable, clock)
    try:
        run_id = await _waiting(first)
    finally:
        await first.close()
    second = await _open(reopenable, clock)
    try:
        await clock.advance(internals(second).services.run_timeout_seconds + 1)
        assert (await second.run(run_id) or {})["status"] == "timeout"
        assert names(second, run_id).count("RunTimedOut") == 1
    finally:
        await second.close()


class _StopsAfterAnswer:
    """A runtime that records the answer's turn and never ends it (the gateway is killed
    while it runs): the reopened gateway must run that turn once more, not twice."""

    def __init__(self) -> None:
        self.turns: list[str] = []

    async def run(self, request: RunRequest) -> RunReply:
        self.turns.append(request.message)
        if request.message == "deploy prod":
            return RunReply(input_request=InputRequest(prompt="Deploy?", options=["yes"]))
        await request.clock.sleep(10_000)
        return RunReply(text="late")


async def test_killed_after_the_answer_was_accepted_resumes_exactly_one_turn(
    reopenable: str,
) -> None:
    clock = VirtualClock(start=START)
    runtime = _StopsAfterAnswer()
    first = await _open(reopenable, clock, runtime)
    try:
        run_id = await _waiting(first)
        assert (await first.provide_input(run_id, "yes", by="main"))["status"] == "accepted"
        await first.wait_idle()
        assert runtime.turns == ["deploy prod", "yes"]
    finally:
        await first.close()
    second = await _open(reopenable, clock, ScriptedRuntime.from_dict(APPROVAL))
    try:
        await second.wait_idle()
        assert (await second.run(run_id) or {})["status"] == "ok"
        # The answer appears once in the transcript, however many dispatches it took.
        assert [line for line in await _history(second) if line == ("user", "yes")] == [
            ("user", "yes")
        ]
        assert names(second, run_id).count("RunInputProvided") == 1
    finally:
        await second.close()


async def test_free_text_answers_and_usage_of_both_turns(store_url: str) -> None:
    clock = VirtualClock(start=START)
    runtime = ScriptedRuntime.from_dict(APPROVAL)
    gateway = await _open(store_url, clock, runtime)
    try:
        sent = await _ask(gateway, "free text please")
        assert sent["status"] == "input_required"
        assert "options" not in sent
        assert (await gateway.run(sent["runId"]) or {})["inputRequest"] == {
            "prompt": "Which branch?",
            "options": None,
        }
        await gateway.provide_input(sent["runId"], "main-2", by="main")
        await gateway.wait_idle()
        assert (await gateway.run(sent["runId"]) or {})["status"] == "ok"
        assert ("assistant", "branch main-2") in await _history(gateway)
    finally:
        await gateway.close()


@pytest.mark.parametrize("message", ["quiet", "skip now", "no"])
async def test_a_waited_send_whose_turn_says_nothing_answers_no_reply(
    store_url: str, message: str
) -> None:
    """Decision 37: no text, REPLY_SKIP or NO_REPLY is OpenClaw's ``no_reply``."""
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    try:
        if message == "no":
            run_id = await _waiting(gateway)
            await gateway.provide_input(run_id, "no", by="main")
            await gateway.wait_idle()
            assert (await gateway.run(run_id) or {})["status"] == "ok"
            sent = await gateway.call_tool(
                "main", "sessions_send", {"sessionKey": OPS, "message": "no", "timeoutSeconds": 5}
            )
        else:
            sent = await _ask(gateway, message)
        assert sent == {
            "runId": sent["runId"],
            "status": "no_reply",
            "sessionKey": OPS,
            "delivery": {"status": "started", "mode": "announce"},
        }
    finally:
        await gateway.close()


def test_the_sync_facade_answers_too() -> None:
    from sessionwire import SyncGateway

    with SyncGateway.open(
        store="memory",
        clock=VirtualClock(start=START),
        runtime=ScriptedRuntime.from_dict(APPROVAL),
    ) as gateway:
        gateway.record_message("main", role="user", content="hi")
        gateway.record_message(OPS, role="user", content="hi")
        sent = gateway.call_tool(
            "main", "sessions_send", {"sessionKey": OPS, "message": "deploy", "timeoutSeconds": 5}
        )
        assert sent["status"] == "input_required"
        assert gateway.provide_input(sent["runId"], "yes", by="main")["status"] == "accepted"
        gateway.wait_idle()
        assert (gateway.run(sent["runId"]) or {})["status"] == "ok"
