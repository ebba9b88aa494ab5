"""``sessionwire mcp``: the session tools over MCP, driven by the SDK's own client.

The server runs as a subprocess started through the real CLI, exactly as an MCP host
would start it; the client is the official ``mcp`` package's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import httpx2
import pytest
from chat_server import ChatServer, completion
from egress_rig import LOOPBACK_EGRESS
from hang_bounds import HANG_SECONDS
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp_stdio import server_command, stdio_session
from sessionwire import Gateway, SyncGateway
from sessionwire.adapters.mcp.server import LISTENING
from sessionwire.application.tools.schemas import tool_schemas

SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "pong from {session}", "usage": {"input": 7, "output": 3}},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


@pytest.fixture
def store(tmp_path: Path) -> str:
    """An SQLite store holding a main session and a group chat to talk to."""
    url = f"sqlite:///{tmp_path}/mcp.db"
    with SyncGateway.open(store=url) as gateway:
        gateway.record_message("main", role="user", content="hello", channel="webchat")
        gateway.record_message(
            "discord:group:ops", role="user", content="deploy is green", channel="discord"
        )
    return url


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def payload(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON the tool answered, read from the text content (what every client sees)."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    data = json.loads(block.text)
    assert result.structured_content == data
    assert isinstance(data, dict)
    return data


async def test_lists_the_tools_with_the_gateways_schemas_then_runs_cancel(store: str) -> None:
    async with stdio_session(store, "--session", "main") as session:
        listed = await session.list_tools()
    served = [
        {"name": t.name, "description": t.description, "parameters": t.input_schema}
        for t in listed.tools
    ]
    # The session tools, then runs_cancel (tests/e2e/test_mcp_runs.py).
    assert served[:-1] == tool_schemas()
    assert [t.name for t in listed.tools] == [
        "sessions_list",
        "sessions_history",
        "sessions_search",
        "sessions_send",
        "sessions_spawn",
        "sessions_yield",
        "agents_list",
        "subagents",
        "session_status",
        "run_input",
        "runs_cancel",
    ]
    read_only = {t.name for t in listed.tools if t.annotations and t.annotations.read_only_hint}
    assert read_only == {
        "sessions_list",
        "sessions_history",
        "sessions_search",
        "agents_list",
        "session_status",
    }
    destructive = {t.name for t in listed.tools if t.annotations and t.annotations.destructive_hint}
    assert destructive == {"subagents", "runs_cancel"}


async def test_each_tool_answers_as_the_fixed_session(store: str, script: Path) -> None:
    async with stdio_session(store, "--session", "main", "--runtime", str(script)) as session:
        listed = payload(await session.call_tool("sessions_list", {"messageLimit": 1}))
        history = payload(await session.call_tool("sessions_history", {"sessionKey": "main"}))
        sent = await session.call_tool(
            "sessions_send",
            {"sessionKey": "discord:group:ops", "message": "ping", "timeoutSeconds": 30},
        )
        spawned = await session.call_tool("sessions_spawn", {"task": "summarise the deploy"})
        agents = payload(await session.call_tool("agents_list", {}))

    assert {row["key"] for row in listed["sessions"]} == {"main", "agent:main:discord:group:ops"}
    assert [m["content"][0]["text"] for m in history["messages"]] == ["hello"]
    assert not sent.is_error
    assert payload(sent)["status"] == "ok"
    assert payload(sent)["reply"] == "pong from agent:main:discord:group:ops"
    assert payload(sent)["delivery"] == {"status": "started", "mode": "announce"}
    assert not spawned.is_error
    spawn = payload(spawned)
    assert spawn["status"] == "accepted"
    assert spawn["childSessionKey"].startswith("agent:main:subagent:")
    assert agents["requester"] == "main"
    assert [agent["id"] for agent in agents["agents"]] == ["main"]


async def test_history_pages_and_list_filters_through_mcp(store: str) -> None:
    async with stdio_session(store, "--session", "main") as session:
        page = payload(
            await session.call_tool("sessions_history", {"sessionKey": "main", "offset": 0})
        )
        past = payload(
            await session.call_tool("sessions_history", {"sessionKey": "main", "offset": 9})
        )
        bad = await session.call_tool("sessions_history", {"sessionKey": "main", "offset": -2})
        found = payload(await session.call_tool("sessions_list", {"search": "OPS"}))
    assert [m["content"][0]["text"] for m in page["messages"]] == ["hello"]
    assert (page["offset"], page["totalMessages"], page["hasMore"]) == (0, 1, False)
    assert "nextOffset" not in page
    assert (past["messages"], past["hasMore"]) == ([], False)
    assert bad.is_error
    assert payload(bad)["error"] == "offset must be a non-negative integer"
    assert [row["key"] for row in found["sessions"]] == ["agent:main:discord:group:ops"]


async def test_a_refusal_is_an_error_result_that_carries_the_json(store: str) -> None:
    async with stdio_session(store, "--session", "main") as session:
        missing = await session.call_tool("sessions_history", {"sessionKey": "cron:nope"})
        bad = await session.call_tool("sessions_list", {"limit": "many"})
        unknown = await session.call_tool("sessions_delete", {})
    assert missing.is_error
    assert payload(missing) == {
        "status": "error",
        "tool": "sessions_history",
        "error": "Session not found: cron:nope",
    }
    assert bad.is_error
    assert payload(bad)["status"] == "error"
    assert "limit" in payload(bad)["error"]
    assert unknown.is_error
    assert payload(unknown)["error"].startswith("unknown tool 'sessions_delete'")


async def test_a_sub_agent_session_gets_the_sub_agent_refusals(store: str) -> None:
    async with stdio_session(store, "--session", "agent:main:subagent:abc") as session:
        refused = await session.call_tool("sessions_spawn", {"task": "recurse"})
    assert refused.is_error
    assert payload(refused)["status"] == "forbidden"


async def test_no_argument_can_name_another_requester(store: str, tmp_path: Path) -> None:
    """A server for the ops agent's session stays that session: no tool takes a
    requester, extra keys are refused, and main's history stays out of reach."""
    config = tmp_path / "gateway.json5"
    config.write_text("{agents: {list: [{id: 'main', default: true}, {id: 'ops'}]}}")
    gateway = await Gateway.open(store=store, config=str(config))
    await gateway.record_message("agent:ops:main", role="user", content="ops here")
    await gateway.close()
    async with stdio_session(store, "--session", "agent:ops:main", config=config) as session:
        listed = await session.list_tools()
        spoofed = await session.call_tool(
            "sessions_history", {"sessionKey": "agent:main:main", "requester": "main"}
        )
        other = await session.call_tool("sessions_history", {"sessionKey": "agent:main:main"})
        own = payload(await session.call_tool("sessions_history", {"sessionKey": "main"}))
        agents = payload(await session.call_tool("agents_list", {}))
    for tool in listed.tools:
        assert tool.input_schema["additionalProperties"] is False
        assert not any("requester" in name.lower() for name in tool.input_schema["properties"])
    assert spoofed.is_error
    assert "unknown parameter 'requester'" in payload(spoofed)["error"]
    assert other.is_error
    assert payload(other)["status"] == "forbidden"
    # "main" is the calling agent's own main session: ops's, never main's.
    assert [m["content"][0]["text"] for m in own["messages"]] == ["ops here"]
    assert agents["requester"] == "ops"


def loopback_config(tmp_path: Path) -> Path:
    """A config naming 127.0.0.1, where the chat server is (decision 40)."""
    path = tmp_path / "loopback.json"
    path.write_text(json.dumps(LOOPBACK_EGRESS))
    return path


async def test_an_openai_compatible_runtime_answers_through_mcp(store: str, tmp_path: Path) -> None:
    runtime = tmp_path / "openai.yaml"
    with ChatServer().running() as chat:
        chat.answer(body=completion("the deploy is green", prompt_tokens=20, completion_tokens=5))
        runtime.write_text(f"openai:\n  baseUrl: {chat.base_url}\n  model: fake-1\n")
        async with stdio_session(
            store, "--session", "main", "--runtime", str(runtime), config=loopback_config(tmp_path)
        ) as session:
            sent = payload(
                await session.call_tool(
                    "sessions_send",
                    {"sessionKey": "discord:group:ops", "message": "status?", "timeoutSeconds": 60},
                )
            )
    assert sent["status"] == "ok"
    assert sent["reply"] == "the deploy is green"
    assert chat.received[0].body["messages"][-1] == {"role": "user", "content": "status?"}
    # The agent behind the runtime is offered its run's session tools (all but
    # run_input, which answers a run for a person: docs/input.md).
    offered = {tool["function"]["name"] for tool in chat.received[0].body["tools"]}
    assert offered == {t["name"] for t in tool_schemas()} - {"run_input"}


async def test_an_openai_server_on_loopback_not_named_in_the_config_gets_nothing(
    store: str, tmp_path: Path
) -> None:
    runtime = tmp_path / "openai.yaml"
    with ChatServer().running() as chat:
        runtime.write_text(f"openai:\n  baseUrl: {chat.base_url}\n  model: fake-1\n")
        async with stdio_session(store, "--session", "main", "--runtime", str(runtime)) as session:
            sent = payload(
                await session.call_tool(
                    "sessions_send",
                    {"sessionKey": "discord:group:ops", "message": "status?", "timeoutSeconds": 60},
                )
            )
    assert sent["status"] == "error", sent
    assert "refused to send to 127.0.0.1: a loopback address" in sent["error"]
    assert chat.received == []


def test_an_invalid_session_is_a_usage_error(store: str) -> None:
    result = subprocess.run(
        [sys.executable, *server_command(store, "--session", "agent::x")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 2
    assert "--session" in result.stderr
    assert result.stdout == ""


def test_a_bad_runtime_file_is_a_usage_error(store: str, tmp_path: Path) -> None:
    runtime = tmp_path / "runtime.json"
    runtime.write_text(json.dumps({"openai": {"baseUrl": "http://127.0.0.1:1/v1"}}))
    result = subprocess.run(
        [sys.executable, *server_command(store, "--session", "main", "--runtime", str(runtime))],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 2
    assert "model" in result.stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


MCP_TOKEN = "mcp-operator-token-0123456789abcdefghijkl"


def authorized(token: str = MCP_TOKEN) -> httpx2.AsyncClient:
    """An HTTP client for the SDK's transport (it takes httpx2's) sending the token."""
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_SECONDS)


@asynccontextmanager
async def http_server(store: str, *args: str) -> AsyncIterator[str]:
    async with http_server_process(store, *args) as (url, _):
        yield url


@asynccontextmanager
async def http_server_process(
    store: str, *args: str
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """``sessionwire mcp --http`` on a free port, once it listens: its URL and process
    (stopped at the end, if the test has not; it must have exited 0, saying nothing on
    stdout)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *server_command(store, *args, "--http", "--port", str(port))],
        env=dict(os.environ) | {"SESSIONWIRE_TOKEN": MCP_TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        # The server says on stderr when its port is open: wait for that line.
        assert process.stderr is not None
        said = []
        while not said or not said[-1].startswith(LISTENING.encode()):
            line = await anyio.to_thread.run_sync(process.stderr.readline)
            if not line:
                process.wait()
                raise AssertionError(b"".join(said).decode())
            said.append(line)
        yield url, process
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert stdout == b""


async def test_streamable_http_serves_the_same_tools(store: str, script: Path) -> None:
    async with (
        http_server(store, "--session", "main", "--runtime", str(script)) as url,
        authorized() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        sent = await session.call_tool(
            "sessions_send", {"sessionKey": "discord:group:ops", "message": "ping"}
        )
        missing = await session.call_tool("sessions_history", {"sessionKey": "cron:nope"})
    assert [t.input_schema for t in listed.tools][:-1] == [s["parameters"] for s in tool_schemas()]
    assert listed.tools[-1].name == "runs_cancel"
    assert payload(sent)["reply"] == "pong from agent:main:discord:group:ops"
    assert payload(sent)["delivery"] == {"status": "started", "mode": "announce"}
    assert missing.is_error
    assert payload(missing)["error"].startswith("Session not found: cron:nope")


async def test_http_refuses_a_foreign_host_header(store: str) -> None:
    """DNS rebinding: a page on another origin must not reach the loopback server."""
    async with http_server(store, "--session", "main") as url, authorized() as client:
        response = await client.post(
            url,
            headers={"Host": "evil.example:80", "Accept": "application/json"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
    assert response.status_code == 421


async def test_http_needs_a_token_and_a_bound_one_must_be_the_servers_session(
    store: str, tmp_path: Path
) -> None:
    """MCP over HTTP takes the same tokens as `serve` (issue 16, finding 9)."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        "  - {token: main-bound-token-0123456789abcdefghij, session: main}\n"
        "  - {token: ops-bound-token-0123456789abcdefghijk, session: 'discord:group:ops'}\n"
    )
    tokens.chmod(0o600)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    async with http_server(store, "--session", "main", "--tokens", str(tokens)) as url:
        async with httpx.AsyncClient(timeout=HANG_SECONDS) as anonymous:
            missing = await anonymous.post(url, json=request, headers=accept)
        async with authorized("ops-bound-token-0123456789abcdefghijk") as other:
            foreign = await other.post(url, json=request, headers=accept)
        async with authorized("main-bound-token-0123456789abcdefghij") as own:
            allowed = await own.post(url, json=request, headers=accept)
    assert missing.status_code == 401
    assert foreign.status_code == 403
    assert allowed.status_code == 200


YIELD_SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "counted"},
        {"step": "subagent_announce", "reply": "Result: 42 sheep\nNotes: none"},
        {"step": "yield_wake", "reply": "thanks"},
    ]
}


async def test_sessions_yield_over_mcp_and_the_wake_after_the_server_is_gone(
    store: str, tmp_path: Path
) -> None:
    """The yield is recorded over MCP; the server then exits with it waiting. A gateway
    opened later on the store resumes the child and the yield, and wakes main once.

    The server's agents are a chat server the test holds: the child's turn is in flight
    from the spawn until the server is gone, by order, not by a delay."""
    runtime_file = tmp_path / "openai.yaml"
    held = threading.Event()
    with ChatServer().running() as chat:
        chat.answer(body=completion("counted"), gate=held)
        runtime_file.write_text(f"openai:\n  baseUrl: {chat.base_url}\n  model: fake-1\n")
        try:
            async with stdio_session(
                store,
                "--session",
                "main",
                "--runtime",
                str(runtime_file),
                config=loopback_config(tmp_path),
            ) as session:
                spawned = payload(await session.call_tool("sessions_spawn", {"task": "count"}))
                yielded = await session.call_tool("sessions_yield", {"waitFor": "any"})
                lonely = await session.call_tool("sessions_yield", {"waitFor": "most"})
        finally:
            held.set()  # the server is gone: let the chat server's thread end
    assert not yielded.is_error
    answer = payload(yielded)
    assert answer["status"] == "yielded"
    assert answer["waitFor"] == "any"
    assert [child["runId"] for child in answer["children"]] == [spawned["runId"]]
    assert lonely.is_error
    assert 'waitFor must be "all" or "any"' in payload(lonely)["error"]

    from sessionwire.testing import ScriptedRuntime

    runtime = ScriptedRuntime.from_dict(YIELD_SCRIPT)
    gateway = await Gateway.open(store=store, runtime=runtime)
    try:
        await gateway.wait_idle()
        runs = (await gateway.runs(session_key="main", limit=10))["runs"]
    finally:
        await gateway.close()
    # The child's turn was never answered in the server: this gateway ran it again.
    assert [call.step for call in runtime.calls if call.step == "subagent_task"] == [
        "subagent_task"
    ]
    (wake,) = [call for call in runtime.calls if call.step == "yield_wake"]
    assert "42 sheep" in wake.message
    assert [run["status"] for run in runs if run["step"] == "yield_wake"] == ["ok"]
