"""A run waiting for input, answered over every transport (decision 33, issue 39 item 1):
HTTP ``POST /v1/runs/{id}/input`` with its token scopes, the ``run_input`` tool over MCP,
the CLI's ``runs input``, and A2A (a waiting run's task is ``input-required``, a message on
that task is its answer, a stream shows the change both ways), on every store."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError
from command_line import run_in_process
from sessionwire import Gateway
from sessionwire.adapters.a2a.agent_cards import agent_card, served_agents
from sessionwire.adapters.a2a.server import GRANT, GatewayRequestHandler
from sessionwire.adapters.access.tokens import Grant, TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.mcp.server import tool_definitions
from sessionwire.testing import ScriptedRuntime, VirtualClock

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SCRIPT = {
    "rules": [
        {"match": "^deploy", "ask": {"prompt": "Deploy to prod?", "options": ["yes", "no"]}},
        {"match": "^yes$", "reply": "deployed"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"reply": "said {message}"},
    ]
}
OPS = "agent:main:ops"
CONFIG = {"agents": {"list": [{"id": "main", "default": True}, {"id": "other"}]}}


async def _open(store_url: str, clock: VirtualClock) -> Gateway:
    return await Gateway.open(
        config=CONFIG, store=store_url, clock=clock, runtime=ScriptedRuntime.from_dict(SCRIPT)
    )


async def _waiting(gateway: Gateway) -> str:
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message(OPS, role="user", content="hi")
    sent = await gateway.call_tool(
        "main", "sessions_send", {"sessionKey": OPS, "message": "deploy", "timeoutSeconds": 30}
    )
    assert sent["status"] == "input_required"
    await gateway.wait_idle()
    return str(sent["runId"])


# HTTP -------------------------------------------------------------------------------------


async def test_http_answers_with_the_token_scopes_of_a_send(store_url: str) -> None:
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    tokens = TokenSet.from_data(
        {
            "tokens": [
                {"token": "op-token-0123456789abcdef", "role": "operator"},
                {"token": "other-token-0123456789abcdef", "session": "agent:other:main"},
            ]
        }
    )
    try:
        run_id = await _waiting(gateway)
        await gateway.record_message("agent:other:main", role="user", content="hi")
        app = create_app(gateway, tokens, console=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            shown = await http.get(
                f"/v1/runs/{run_id}", headers={"Authorization": "Bearer op-token-0123456789abcdef"}
            )
            assert shown.json()["inputRequest"] == {
                "prompt": "Deploy to prod?",
                "options": ["yes", "no"],
            }
            # A session-bound token of another agent may not send into ops: 404, as a
            # run it cannot see.
            hidden = await http.post(
                f"/v1/runs/{run_id}/input",
                json={"text": "yes"},
                headers={"Authorization": "Bearer other-token-0123456789abcdef"},
            )
            assert hidden.status_code == 404
            wrong = await http.post(
                f"/v1/runs/{run_id}/input",
                json={"text": "maybe"},
                headers={
                    "Authorization": "Bearer op-token-0123456789abcdef",
                    "X-Sessionwire-Session": "main",
                },
            )
            assert wrong.status_code == 200
            assert wrong.json()["status"] == "error"
            assert "one of the options" in wrong.json()["error"]
            taken = await http.post(
                f"/v1/runs/{run_id}/input",
                json={"text": "yes"},
                headers={
                    "Authorization": "Bearer op-token-0123456789abcdef",
                    "X-Sessionwire-Session": "main",
                },
            )
            assert taken.json() == {"status": "accepted", "runId": run_id, "sessionKey": OPS}
            await gateway.wait_idle()
            again = await http.post(
                f"/v1/runs/{run_id}/input",
                json={"text": "yes"},
                headers={"Authorization": "Bearer op-token-0123456789abcdef"},
            )
            assert again.json()["status"] == "error"
            done = await http.get(
                f"/v1/runs/{run_id}", headers={"Authorization": "Bearer op-token-0123456789abcdef"}
            )
        assert done.json()["status"] == "ok"
    finally:
        await gateway.close()


async def test_the_console_and_the_timeline_show_what_a_waiting_run_asks(store_url: str) -> None:
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    try:
        run_id = await _waiting(gateway)
        app = create_app(gateway, "op-token-0123456789abcdef")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            page = await http.get(
                "/console/runs?status=input_required",
                headers={"Authorization": "Bearer op-token-0123456789abcdef"},
            )
        assert page.status_code == 200
        assert "waits for input" in page.text
        assert "Deploy to prod? (yes / no)" in page.text
        await gateway.provide_input(run_id, "yes", by="main")
        await gateway.wait_idle()
        timeline = await gateway.timeline(OPS)
        said = [entry.summary for entry in timeline.entries if entry.aggregate_id == run_id]
        assert "run waits for input: 'Deploy to prod?' (options: yes, no)" in said
        assert "input provided by agent:main:main: 'yes'" in said
    finally:
        await gateway.close()


# MCP --------------------------------------------------------------------------------------


async def test_mcp_lists_run_input_and_it_answers(store_url: str) -> None:
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    try:
        run_id = await _waiting(gateway)
        listed = {tool.name: tool for tool in tool_definitions(gateway)}
        assert listed["run_input"].input_schema["required"] == ["runId", "text"]
        # MCP's tools/call is call_tool as the session the MCP server serves.
        answer = await gateway.call_tool("main", "run_input", {"runId": run_id, "text": "yes"})
        assert answer["status"] == "accepted"
        await gateway.wait_idle()
        assert (await gateway.run(run_id) or {})["status"] == "ok"
    finally:
        await gateway.close()


# A2A --------------------------------------------------------------------------------------

OPERATOR = Grant(None, "operator#1")


def _message(text: str, *, context_id: str = "", task_id: str = "") -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        context_id=context_id,
        task_id=task_id,
        parts=[Part(text=text)],
    )


def _handler(gateway: Gateway) -> GatewayRequestHandler:
    config = gateway.served.config
    card = agent_card(
        "main", served_agents(config)["main"], base_url="http://t", push_notifications=False
    )
    return GatewayRequestHandler(gateway, "main", card)


async def test_a2a_task_is_input_required_and_a_message_on_it_answers(store_url: str) -> None:
    clock = VirtualClock(start=START)
    gateway = await _open(store_url, clock)
    operator = ServerCallContext(state={GRANT: OPERATOR})
    try:
        handler = _handler(gateway)
        asked = await handler.on_message_send(
            SendMessageRequest(
                message=_message("deploy", context_id="c1"),
                configuration=SendMessageConfiguration(),
            ),
            operator,
        )
        assert isinstance(asked, Task)
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert asked.status.message.parts[0].text == ("Deploy to prod?\n(answer one of: yes, no)")
        stream = handler.on_subscribe_to_task(SubscribeToTaskRequest(id=asked.id), operator)
        first = await anext(stream)
        assert isinstance(first, Task)
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        with pytest.raises(InvalidParamsError, match="one of the options"):
            await handler.on_message_send(
                SendMessageRequest(message=_message("maybe", context_id="c1", task_id=asked.id)),
                operator,
            )
        answered = await handler.on_message_send(
            SendMessageRequest(message=_message("yes", context_id="c1", task_id=asked.id)),
            operator,
        )
        assert isinstance(answered, Task)
        assert answered.status.state == TaskState.TASK_STATE_COMPLETED
        assert answered.artifacts[0].parts[0].text == "deployed"
        # The stream showed the task leave input-required, and end.
        states = []
        async for event in stream:
            if isinstance(event, TaskStatusUpdateEvent):
                states.append(event.status.state)
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
        assert TaskState.TASK_STATE_INPUT_REQUIRED not in states
    finally:
        await gateway.close()


# CLI --------------------------------------------------------------------------------------


@pytest.fixture
def reopenable(store_url: str) -> str:
    if store_url == "memory":
        pytest.skip("the command line opens the store in its own gateway")
    return store_url


async def _waiting_in(store_url: str) -> str:
    # Asked now: the command line's gateway runs on the real clock, within the deadline.
    gateway = await _open(store_url, VirtualClock(start=datetime.now(UTC)))
    try:
        return await _waiting(gateway)
    finally:
        await gateway.close()


def test_the_cli_answers_and_runs_the_next_turn(reopenable: str, tmp_path: Path) -> None:
    run_id = asyncio.run(_waiting_in(reopenable))
    script = tmp_path / "agents.json"
    script.write_text(__import__("json").dumps(SCRIPT), encoding="utf-8")
    base = ["--store", reopenable]
    refused = run_in_process(*base, "runs", "input", run_id, "maybe", "--runtime", str(script))
    assert refused.returncode == 1, refused
    assert "one of the options" in refused.stdout
    taken = run_in_process(
        *base, "--json", "runs", "input", run_id, "yes", "--runtime", str(script)
    )
    assert taken.returncode == 0, taken
    shown = run_in_process(*base, "--json", "runs", "show", run_id)
    assert '"status": "ok"' in shown.stdout
    without: Any = run_in_process(*base, "runs", "input", run_id, "yes")
    assert without.returncode == 2
    assert "runs input starts an agent run" in without.stderr
