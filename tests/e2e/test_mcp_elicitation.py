"""A run waiting for input asks the MCP client by elicitation (issue 39 item 4, decision
33): the official mcp 2.3 client against ``sessionwire mcp`` over stdio and ``--http``.

At the stateless revision the waited ``sessions_send`` answers an ``InputRequiredResult``
embedding the ``elicitation/create`` form and the client retries with its user's answer;
at a handshake revision over stdio the server sends ``elicitation/create`` during the
call. An accepted answer is the run's input through ``run_input``'s one check; a declined
one leaves the run waiting; without the capability the run is a resource with its prompt.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, types
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_stdio import payload, server_parameters
from sessionwire import Gateway
from sessionwire.testing import ScriptedRuntime
from test_mcp_server import authorized, http_server

OPS = "agent:main:ops"
PROMPT = "Deploy build 42 to prod?"
SCRIPT = {
    "rules": [
        {"match": "^deploy", "ask": {"prompt": PROMPT, "options": ["yes", "no"]}},
        {"match": "^note", "ask": {"prompt": "Which note?", "options": None}},
        {"match": "^yes$", "reply": "deployed"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"reply": "noted {message}"},
    ]
}
DEPLOY = {"sessionKey": OPS, "message": "deploy build 42", "timeoutSeconds": 30}


async def seeded(url: str) -> str:
    """``url``'s store holding main and the ops session it sends to."""
    gateway = await Gateway.open(store=url)
    try:
        await gateway.record_message("main", role="user", content="ship it")
        await gateway.record_message(OPS, role="user", content="ready")
    finally:
        await gateway.close()
    return url


@pytest.fixture
async def store(tmp_path: Path) -> str:
    return await seeded(f"sqlite:///{tmp_path}/sessions.db")


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(SCRIPT))
    return path


@asynccontextmanager
async def connected(
    transport: str, store: str, agents: Path, **options: Any
) -> AsyncIterator[Client]:
    """The SDK's ``Client`` (``options`` its settings) to ``sessionwire mcp`` as main,
    over stdio or ``--http``."""
    args = ("--session", "main", "--runtime", str(agents))
    if transport == "stdio":
        async with Client(server_parameters(store, *args), **options) as client:
            yield client
        return
    async with (
        http_server(store, *args) as endpoint,
        authorized() as http,
        Client(streamable_http_client(endpoint, http_client=http), **options) as client,
    ):
        yield client


def answering(answer: types.ElicitResult, asked: list[types.ElicitRequestParams]) -> ElicitationFnT:
    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return answer

    return elicit


def accept(text: str) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": text})


async def settled(store: str, run_id: str) -> tuple[str, list[str]]:
    """The run's end once a gateway has carried it on (the server is gone), and the
    session's transcript after its first line."""
    gateway = await Gateway.open(store=store, runtime=ScriptedRuntime.from_dict(SCRIPT))
    try:
        await gateway.wait_idle()
        run = await gateway.run(run_id)
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": OPS, "limit": 20}
        )
    finally:
        await gateway.close()
    assert run is not None
    lines = [message["content"][0]["text"] for message in history["messages"][1:]]
    return str(run["status"]), lines


async def resource_text(client: Client, uri: str) -> str:
    block = (await client.read_resource(uri)).contents[0]
    assert isinstance(block, types.TextResourceContents)
    return block.text


async def resource(client: Client, run_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(await resource_text(client, f"sessionwire://runs/{run_id}"))
    return data


def assert_asked_with_the_options(asked: list[types.ElicitRequestParams]) -> None:
    (params,) = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == PROMPT
    field = params.requested_schema["properties"]["answer"]
    assert field["type"] == "string"
    assert field["enum"] == ["yes", "no"]
    assert params.requested_schema["required"] == ["answer"]


@pytest.mark.parametrize(
    ("transport", "kind"), [("stdio", "sqlite"), ("http", "sqlite"), ("stdio", "postgresql")]
)
async def test_the_stateless_revision_asks_and_an_accept_is_the_runs_input(
    store: str, agents: Path, transport: str, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "postgresql":
        store = await seeded(request.getfixturevalue("postgres_url"))
    asked: list[types.ElicitRequestParams] = []
    elicit = answering(accept("yes"), asked)
    async with connected(transport, store, agents, elicitation_callback=elicit) as client:
        version = client.protocol_version
        answered = payload(await client.call_tool("sessions_send", DEPLOY))
    assert version == "2026-07-28"
    assert_asked_with_the_options(asked)
    assert answered["status"] == "accepted"
    assert answered["sessionKey"] == OPS
    status, lines = await settled(store, answered["runId"])
    assert status == "ok"
    assert lines == ["deploy build 42", PROMPT, "yes", "deployed"]


async def test_a_free_text_ask_is_a_string_field(store: str, agents: Path) -> None:
    asked: list[types.ElicitRequestParams] = []
    async with connected(
        "stdio", store, agents, elicitation_callback=answering(accept("the blue one"), asked)
    ) as client:
        arguments = {"sessionKey": OPS, "message": "note it", "timeoutSeconds": 30}
        answered = payload(await client.call_tool("sessions_send", arguments))
    (params,) = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == "Which note?"
    assert "enum" not in params.requested_schema["properties"]["answer"]
    assert answered["status"] == "accepted"
    _, lines = await settled(store, answered["runId"])
    assert lines == ["note it", "Which note?", "the blue one", "noted the blue one"]


@pytest.mark.parametrize(("action", "transport"), [("decline", "stdio"), ("cancel", "http")])
async def test_a_declined_elicitation_leaves_the_run_waiting(
    store: str, agents: Path, action: str, transport: str
) -> None:
    asked: list[types.ElicitRequestParams] = []
    answer = types.ElicitResult(action=action)
    async with connected(
        transport, store, agents, elicitation_callback=answering(answer, asked)
    ) as client:
        result = await client.call_tool("sessions_send", DEPLOY)
        sent = payload(result)
        shown = await resource(client, sent["runId"])
    assert len(asked) == 1  # asked once, not again after the decline
    assert result.is_error is False
    assert sent["status"] == "input_required"
    assert sent["prompt"] == PROMPT
    assert shown["status"] == "input_required"
    assert shown["inputRequest"] == {"prompt": PROMPT, "options": ["yes", "no"]}
    status, lines = await settled(store, sent["runId"])
    assert status == "input_required"
    assert lines == ["deploy build 42", PROMPT]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_without_the_capability_the_run_is_a_resource_with_its_prompt(
    store: str, agents: Path, transport: str
) -> None:
    async with connected(transport, store, agents) as client:
        sent = payload(await client.call_tool("sessions_send", DEPLOY))
        shown = await resource(client, sent["runId"])
    assert sent["status"] == "input_required"
    assert sent["options"] == ["yes", "no"]
    assert shown["status"] == "input_required"
    assert shown["inputRequest"] == {"prompt": PROMPT, "options": ["yes", "no"]}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_accept_after_another_answer_is_refused_and_the_client_told(
    store: str, agents: Path, transport: str
) -> None:
    """Someone else answers while the client's user is asked: the retry's answer meets
    the first one's record, nothing more is written, and the call says why."""
    asked: list[types.ElicitRequestParams] = []
    holder: dict[str, Client] = {}
    waiting: list[str] = []

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        client = holder["client"]
        runs = json.loads(await resource_text(client, "sessionwire://runs"))["runs"]
        waiting.extend(run["runId"] for run in runs if run["status"] == "input_required")
        first = payload(await client.call_tool("run_input", {"runId": waiting[0], "text": "no"}))
        assert first["status"] == "accepted"
        return accept("yes")

    async with connected(transport, store, agents, elicitation_callback=elicit) as client:
        holder["client"] = client
        result = await client.call_tool("sessions_send", DEPLOY)
        refused = payload(result)
    assert len(asked) == 1
    assert result.is_error is True
    assert refused["status"] == "error"
    assert refused["tool"] == "run_input"
    (run_id,) = waiting
    assert refused["error"].startswith(f"run {run_id} is not waiting for input")
    status, lines = await settled(store, run_id)
    assert status == "ok"
    # Exactly one next turn: the first answer's.
    assert lines == ["deploy build 42", PROMPT, "no", "noted no"]


async def test_http_handshake_revision_has_no_channel_to_ask_on(store: str, agents: Path) -> None:
    """Stateless HTTP at a handshake revision cannot carry a server request: the call
    answers input_required as without the capability, and the run is a resource."""
    asked: list[types.ElicitRequestParams] = []
    elicit = answering(accept("yes"), asked)
    async with connected(
        "http", store, agents, mode="legacy", elicitation_callback=elicit
    ) as client:
        version = client.protocol_version
        sent = payload(await client.call_tool("sessions_send", DEPLOY))
        shown = await resource(client, sent["runId"])
    assert version != "2026-07-28"
    assert asked == []
    assert sent["status"] == "input_required"
    assert shown["inputRequest"] == {"prompt": PROMPT, "options": ["yes", "no"]}


async def test_stdio_handshake_revision_sends_elicitation_create_during_the_call(
    store: str, agents: Path
) -> None:
    asked: list[types.ElicitRequestParams] = []
    params = server_parameters(store, "--session", "main", "--runtime", str(agents))
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read, write, elicitation_callback=answering(accept("yes"), asked)
            ) as session,
        ):
            started = await session.initialize()
            answered = payload(await session.call_tool("sessions_send", DEPLOY))
    assert started.protocol_version != "2026-07-28"
    assert_asked_with_the_options(asked)
    assert answered["status"] == "accepted"
    status, lines = await settled(store, answered["runId"])
    assert status == "ok"
    assert lines == ["deploy build 42", PROMPT, "yes", "deployed"]


async def test_a_forged_request_state_answers_nothing_the_check_refuses(
    store: str, agents: Path
) -> None:
    """The requestState is the client's to echo, so it is checked like any answer: one
    that is not this server's JSON is refused, one naming a run nobody may answer meets
    run_input's refusal; neither sends anything."""
    accepted = {"runInput": accept("yes")}
    named = json.dumps({"status": "input_required", "runId": "run_nope", "prompt": "?"})
    async with connected("stdio", store, agents) as client:
        garbled = await client.call_tool(
            "sessions_send",
            DEPLOY,
            request_state="sessionwire-run-input:{",
            input_responses=dict(accepted),
        )
        unknown = await client.call_tool(
            "sessions_send",
            DEPLOY,
            request_state=f"sessionwire-run-input:{named}",
            input_responses=dict(accepted),
        )
        runs = json.loads(await resource_text(client, "sessionwire://runs"))["runs"]
    assert garbled.is_error is True
    assert payload(garbled)["error"] == "invalid requestState"
    assert unknown.is_error is True
    assert payload(unknown)["error"] == "run run_nope not found, or not visible to this session"
    assert runs == []  # no send was made
