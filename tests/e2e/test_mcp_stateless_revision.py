"""``sessionwire mcp`` at the MCP stateless revision (2026-07-28), driven by the SDK's
high-level ``Client``: it probes ``server/discover`` and takes the newest revision both
sides speak, so these tests prove the server serves it over stdio and over ``--http``.
(tests/e2e/test_mcp_server.py and test_mcp_runs.py drive the handshake revisions.)

A run is followed with ``subscriptions/listen`` (``Client.listen``) over stdio and over
stateless HTTP alike: there the listen's own response is the stream.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from egress_rig import LOOPBACK_EGRESS
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.subscriptions import ResourceUpdated
from mcp_stdio import server_parameters
from sessionwire.adapters.mcp.runs import RESOURCE_NOT_FOUND
from sessionwire.application.tools.schemas import tool_schemas
from test_mcp_runs import WAIT_SECONDS, held_agents, read_json, seeded_store, send
from test_mcp_server import authorized, http_server, http_server_process

STATELESS_REVISION = "2026-07-28"


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, str]:
    """An SQLite store, and the id of a finished run main may not see."""
    return seeded_store(tmp_path)


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def loopback_config(tmp_path: Path) -> Path:
    """A config naming loopback for outbound calls: the held agents' chat server is
    there (decision 40)."""
    config = tmp_path / "loopback.json"
    config.write_text(json.dumps(LOOPBACK_EGRESS))
    return config


async def follow_to_its_end(
    client: Client, run_id: str, gate: threading.Event
) -> tuple[list[str], list[Any], str]:
    """A listen on the held run, opened before the run may end: what it honoured, the
    events it carried (each a change of status; the run's end the last), the end."""
    uri = f"sessionwire://runs/{run_id}"
    events: list[Any] = []
    async with client.listen(resource_subscriptions=[uri]) as followed:
        honored = list(followed.honored.resource_subscriptions or [])
        status = (await read_json(client.session, uri))["status"]
        assert status in {"queued", "running"}
        gate.set()  # followed: the run may end now
        with anyio.fail_after(WAIT_SECONDS):
            while status in {"queued", "running"}:
                events.append(await followed.__anext__())
                status = (await read_json(client.session, uri))["status"]
    return honored, events, status


async def listen_refusal(client: Client, run_id: str) -> int:
    """The error code of a listen naming a run: it must be refused."""
    with pytest.raises(MCPError) as refused:
        async with client.listen(resource_subscriptions=[f"sessionwire://runs/{run_id}"]):
            pass
    return refused.value.code


async def test_stdio_speaks_the_stateless_revision_and_a_listen_follows_a_run(
    store: tuple[str, str], tmp_path: Path
) -> None:
    url, hidden = store
    config = loopback_config(tmp_path)
    with held_agents(tmp_path, "soon") as (agents, gate):
        async with Client(
            server_parameters(url, "--session", "main", "--runtime", str(agents), config=config)
        ) as client:
            version = client.protocol_version
            capabilities = client.server_capabilities
            listed = await client.list_tools()
            run_id = await send(client.session, "brief job", 0)
            uri = f"sessionwire://runs/{run_id}"
            honored, events, status = await follow_to_its_end(client, run_id, gate)
            refused = await listen_refusal(client, hidden)
            cancelled = structured(await client.call_tool("runs_cancel", {"runId": run_id}))
    assert version == STATELESS_REVISION
    assert capabilities.resources is not None
    assert capabilities.resources.subscribe is True  # served by subscriptions/listen
    assert [t.input_schema for t in listed.tools][:-1] == [s["parameters"] for s in tool_schemas()]
    assert honored == [uri]
    assert status == "ok"
    assert events
    assert set(events) == {ResourceUpdated(uri=uri)}
    # A hidden run refuses the listen exactly as a read of it is refused.
    assert refused == RESOURCE_NOT_FOUND
    assert cancelled["run"]["cancelled"] is False  # it had already ended


async def test_stateless_http_serves_the_revision_and_a_listen_follows_a_run(
    store: tuple[str, str], tmp_path: Path
) -> None:
    """Over ``--http`` the listen's response is an event stream of its own (the SDK's
    transport streams that one method even with JSON answers): a run is followed there
    as over stdio, and a hidden run refuses the listen as a read of it is refused."""
    url, hidden = store
    config = loopback_config(tmp_path)
    with held_agents(tmp_path, "soon") as (agents, gate):
        async with (
            http_server(
                url, "--session", "main", "--runtime", str(agents), "--config", str(config)
            ) as endpoint,
            authorized() as http,
            Client(streamable_http_client(endpoint, http_client=http)) as client,
        ):
            version = client.protocol_version
            capabilities = client.server_capabilities
            run_id = await send(client.session, "brief job", 0)
            uri = f"sessionwire://runs/{run_id}"
            honored, events, status = await follow_to_its_end(client, run_id, gate)
            with pytest.raises(MCPError) as missing:
                await client.read_resource(f"sessionwire://runs/{hidden}")
            refused = await listen_refusal(client, hidden)
    assert version == STATELESS_REVISION
    assert capabilities.resources is not None
    assert capabilities.resources.subscribe is True  # served by subscriptions/listen
    assert honored == [uri]
    assert set(events) == {ResourceUpdated(uri=uri)}
    assert status == "ok"
    assert missing.value.code == refused == RESOURCE_NOT_FOUND


async def test_a_listen_open_over_http_does_not_hold_the_server_from_stopping(
    store: tuple[str, str], tmp_path: Path
) -> None:
    """SIGTERM with a listen open: the listen ends (its stream closes) and the server
    exits 0, instead of uvicorn waiting on a response that only the client would end."""
    url, _ = store
    config = loopback_config(tmp_path)
    with held_agents(tmp_path, "late") as (agents, _gate):
        async with (
            http_server_process(
                url, "--session", "main", "--runtime", str(agents), "--config", str(config)
            ) as (endpoint, process),
            authorized() as http,
            Client(streamable_http_client(endpoint, http_client=http)) as client,
        ):
            run_id = await send(client.session, "held job", 0)
            uri = f"sessionwire://runs/{run_id}"
            with anyio.fail_after(WAIT_SECONDS):
                async with client.listen(resource_subscriptions=[uri]) as followed:
                    process.terminate()
                    # The stream ends: the server closed it on its way out.
                    async for _ in followed:
                        pass
                exited = await anyio.to_thread.run_sync(process.wait)
    assert exited == 0
