"""Runs over MCP (ADR 0026), driven by the SDK's own client against ``sessionwire mcp``
started through the real CLI: the runs resources, following a run by
``resources/subscribe``, and the ``runs_cancel`` tool.

main may see the runs of its own agent's sessions; the run of the work agent's session
made before the server starts is one it may not see (agent-to-agent access is off).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import anyio
import pytest
from chat_server import ChatServer, completion
from egress_rig import LOOPBACK_EGRESS
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_stdio import stdio_session
from sessionwire import Gateway, SyncGateway
from sessionwire.adapters.mcp.runs import RESOURCE_NOT_FOUND
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import ScriptedRuntime
from test_mcp_server import authorized, http_server

# These clients speak a handshake revision on purpose (most hosts today do), where
# resources/subscribe is how a run is followed; the SDK warns it is gone at 2026-07-28
# (tests/e2e/test_mcp_stateless_revision.py follows runs there with subscriptions/listen).
pytestmark = pytest.mark.filterwarnings(
    "ignore:resources/subscribe is removed:mcp.MCPDeprecationWarning"
)

SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "pong from {session}"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
# Generous: a real process on a shared machine; each wait ends as soon as its event comes.
WAIT_SECONDS = 60
# A send's exchange under SCRIPT: the primary run, one reply-back turn, the announce.
EXCHANGE_RUNS = 3


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(SCRIPT))
    return path


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, str]:
    return seeded_store(tmp_path)


def seeded_store(tmp_path: Path) -> tuple[str, str]:
    """An SQLite store, and the id of a finished run main may not see."""
    url = f"sqlite:///{tmp_path}/mcp-runs.db"
    with SyncGateway.open(store=url, runtime=ScriptedRuntime.from_dict(SCRIPT)) as gateway:
        gateway.record_message("main", role="user", content="hello")
        gateway.record_message("discord:group:ops", role="user", content="deploy is green")
        gateway.record_message("agent:work:main", role="user", content="work")
        gateway.record_message("agent:work:discord:group:build", role="user", content="build")
        hidden = gateway.call_tool(
            "agent:work:main",
            "sessions_send",
            {"sessionKey": "discord:group:build", "message": "ping", "timeoutSeconds": 30},
        )
        gateway.wait_idle()
    assert hidden["status"] == "ok", hidden
    return url, str(hidden["runId"])


class Updates:
    """The ``notifications/resources/updated`` a client received, by URI."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._changed = anyio.Event()

    async def handle(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self._changed.set()
            self._changed = anyio.Event()

    async def next_for(self, uri: str, seen: int) -> None:
        """Until more than ``seen`` updates of ``uri`` have come."""
        with anyio.fail_after(WAIT_SECONDS):
            while self.uris.count(uri) <= seen:
                await self._changed.wait()


@contextmanager
def held_agents(tmp_path: Path, reply: str) -> Iterator[tuple[Path, threading.Event]]:
    """A runtime file whose agents are a chat server the test holds, and its gate: a
    send's primary turn answers ``reply`` once the test sets the gate (in flight until
    then, by order, not by a delay), its reply-back and announce turns skip."""
    gate = threading.Event()
    with ChatServer().running() as chat:
        chat.answer(body=completion(reply), gate=gate)
        chat.answer(body=completion("REPLY_SKIP"))
        chat.answer(body=completion("ANNOUNCE_SKIP"))
        path = tmp_path / "openai.yaml"
        path.write_text(f"openai:\n  baseUrl: {chat.base_url}\n  model: fake-1\n")
        try:
            yield path, gate
        finally:
            gate.set()  # whatever the test reached: the chat server's thread ends


def main_session(
    store: str, script: Path, updates: Updates
) -> AbstractAsyncContextManager[ClientSession]:
    """main's session with a server whose agents follow ``script``, heard by ``updates``."""
    # The held agents' chat server is on loopback: named (decision 40).
    config = script.parent / "loopback.json"
    config.write_text(json.dumps(LOOPBACK_EGRESS))
    return stdio_session(
        store,
        "--session",
        "main",
        "--runtime",
        str(script),
        config=config,
        message_handler=updates.handle,
    )


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def read_json(session: ClientSession, uri: str) -> Any:
    contents = (await session.read_resource(uri)).contents
    assert len(contents) == 1
    block = contents[0]
    assert isinstance(block, types.TextResourceContents)
    assert block.mime_type == "application/json"
    return json.loads(block.text)


async def send(session: ClientSession, message: str, wait: int) -> str:
    sent = structured(
        await session.call_tool(
            "sessions_send",
            {"sessionKey": "discord:group:ops", "message": message, "timeoutSeconds": wait},
        )
    )
    assert sent["status"] in {"ok", "accepted"}, sent
    return str(sent["runId"])


async def exchange_over(session: ClientSession, updates: Updates, trace_id: str) -> None:
    """Until the send's exchange is over: the send answers once its primary run ended,
    and the exchange goes on with the reply-back turn, then the announce."""
    with anyio.fail_after(WAIT_SECONDS):
        while True:
            runs = (await read_json(session, f"sessionwire://runs?trace={trace_id}"))["runs"]
            going = [run["runId"] for run in runs if run["status"] in {"queued", "running"}]
            if len(runs) == EXCHANGE_RUNS and not going:
                return
            for run_id in going:  # each wait ends at the run's next change of status
                uri = f"sessionwire://runs/{run_id}"
                seen = updates.uris.count(uri)
                await session.subscribe_resource(uri)
                if (await read_json(session, uri))["status"] in {"queued", "running"}:
                    await updates.next_for(uri, seen)


async def test_runs_are_resources_the_session_may_see(store: tuple[str, str], script: Path) -> None:
    url, hidden = store
    updates = Updates()
    async with main_session(url, script, updates) as session:
        hello = session.initialize_result
        assert hello is not None
        assert hello.capabilities.resources is not None
        assert hello.capabilities.resources.subscribe is True
        listed = await session.list_resources()
        templates = await session.list_resource_templates()
        run_id = await send(session, "ping", 30)
        run = await read_json(session, f"sessionwire://runs/{run_id}")
        await exchange_over(session, updates, run["traceId"])
        every = await read_json(session, "sessionwire://runs")
        ok = await read_json(session, "sessionwire://runs?status=ok&limit=1")
        running = await read_json(session, "sessionwire://runs?status=running")
        refusals = {}
        for uri in (
            f"sessionwire://runs/{hidden}",
            "sessionwire://runs/00000000-0000-4000-8000-000000000000",
            "sessionwire://runs/not-a-run",
            "sessionwire://sessions",
            "sessionwire://runs?status=done",
            "sessionwire://runs?limit=0",
            "sessionwire://runs?owner=me",
        ):
            with pytest.raises(MCPError) as refused:
                await session.read_resource(uri)
            refusals[uri] = refused.value.error
    assert [str(r.uri) for r in listed.resources] == ["sessionwire://runs"]
    assert [t.uri_template for t in templates.resource_templates] == ["sessionwire://runs/{runId}"]
    assert run["runId"] == run_id
    assert run["status"] == "ok"
    assert run["sessionKey"] == "agent:main:discord:group:ops"
    ids = [found["runId"] for found in every["runs"]]
    assert run_id in ids
    assert hidden not in ids  # another agent's run: not listed, not readable
    assert [found["runId"] for found in ok["runs"]] == [ids[0]]
    assert running == {"runs": []}
    # A hidden run is exactly as missing as an unknown one.
    not_found = [uri for uri, error in refusals.items() if error.code == RESOURCE_NOT_FOUND]
    assert not_found == list(refusals)[:4]
    assert refusals[f"sessionwire://runs/{hidden}"] == refusals[
        "sessionwire://runs/00000000-0000-4000-8000-000000000000"
    ].model_copy(update={"data": {"uri": f"sessionwire://runs/{hidden}"}})
    assert "status" in refusals["sessionwire://runs?status=done"].message
    assert "limit" in refusals["sessionwire://runs?limit=0"].message
    assert "owner" in refusals["sessionwire://runs?owner=me"].message


async def test_a_subscriber_hears_when_a_run_ends(store: tuple[str, str], tmp_path: Path) -> None:
    url, _ = store
    updates = Updates()
    with held_agents(tmp_path, "soon") as (agents, gate):
        async with main_session(url, agents, updates) as session:
            run_id = await send(session, "brief job", 0)
            uri = f"sessionwire://runs/{run_id}"
            await session.subscribe_resource(uri)
            # Each update is a change of status; the last one is its end. Counted before
            # each read: an update that comes while the read is answered is not missed.
            seen = updates.uris.count(uri)
            status = (await read_json(session, uri))["status"]
            assert status in {"queued", "running"}
            gate.set()  # subscribed: the run may end now
            while status in {"queued", "running"}:
                await updates.next_for(uri, seen)
                seen = updates.uris.count(uri)
                status = (await read_json(session, uri))["status"]
    assert status == "ok"
    assert updates.uris.count(uri) >= 1
    assert set(updates.uris) == {uri}


async def test_runs_cancel_stops_a_running_run_and_the_subscriber_hears_it(
    store: tuple[str, str], tmp_path: Path
) -> None:
    url, hidden = store
    updates = Updates()
    # The primary turn is held in flight until it is cancelled (the gate is never set).
    with held_agents(tmp_path, "late") as (agents, _):
        async with main_session(url, agents, updates) as session:
            run_id = await send(session, "slow job", 0)
            uri = f"sessionwire://runs/{run_id}"
            await session.subscribe_resource(uri)
            if (await read_json(session, uri))["status"] == "queued":
                await updates.next_for(uri, 0)  # it started
            assert (await read_json(session, uri))["status"] == "running"
            seen = updates.uris.count(uri)
            cancelled = await session.call_tool(
                "runs_cancel", {"runId": run_id, "reason": "not needed"}
            )
            await updates.next_for(uri, seen)
            after = await read_json(session, uri)
            again = await session.call_tool("runs_cancel", {"runId": run_id})
            hidden_cancel = await session.call_tool("runs_cancel", {"runId": hidden})
            unknown = await session.call_tool("runs_cancel", {"runId": "not-a-run"})
            bad = await session.call_tool("runs_cancel", {"runId": run_id, "why": "x"})
            with pytest.raises(MCPError) as refused:
                await session.subscribe_resource(f"sessionwire://runs/{hidden}")
    assert not cancelled.is_error
    answer = structured(cancelled)
    assert answer["status"] == "ok"
    assert answer["run"]["cancelled"] is True
    assert answer["run"]["status"] == "cancelled"
    assert after["status"] == "cancelled"
    assert not again.is_error
    assert structured(again)["run"]["cancelled"] is False
    assert "already ended" in structured(again)["run"]["reason"]
    assert hidden_cancel.is_error
    assert structured(hidden_cancel)["error"] == f"Run not found: {hidden}"
    assert unknown.is_error
    assert bad.is_error
    assert "unknown parameter 'why'" in structured(bad)["error"]
    assert refused.value.error.code == RESOURCE_NOT_FOUND
    gateway = await Gateway.open(store=url, resume=False)
    try:
        assert await gateway.run(hidden) is not None
        assert (await gateway.run(hidden))["status"] == "ok"  # type: ignore[index]
    finally:
        await gateway.close()


async def test_streamable_http_reads_runs_but_offers_no_subscription(
    store: tuple[str, str], script: Path
) -> None:
    url, _ = store
    async with (
        http_server(url, "--session", "main", "--runtime", str(script)) as endpoint,
        authorized() as http,
        streamable_http_client(endpoint, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        hello = await session.initialize()
        run_id = await send(session, "ping", 30)
        run = await read_json(session, f"sessionwire://runs/{run_id}")
        with pytest.raises(MCPError):
            await session.subscribe_resource(f"sessionwire://runs/{run_id}")
    assert hello.capabilities.resources is not None
    # Stateless HTTP has no stream to notify on: it says so rather than stay silent.
    assert hello.capabilities.resources.subscribe is False
    assert run["status"] == "ok"


async def test_on_postgresql_runs_of_another_process_are_followed_and_cancelled(
    postgres_url: str, script: Path
) -> None:
    """The server follows and cancels runs another gateway process executes: the
    subscription reads the shared read model; the owner stops a run cancelled elsewhere."""
    owner = await Gateway.open(store=postgres_url, runtime=HeldPrimaries())
    try:
        await owner.record_message("main", role="user", content="hello")
        await owner.record_message("discord:group:ops", role="user", content="ops")
        await owner.record_message("discord:group:dev", role="user", content="dev")
        first = await owner_run(owner, "discord:group:ops")
        second = await owner_run(owner, "discord:group:dev")
        updates = Updates()
        async with stdio_session(
            postgres_url, "--session", "main", message_handler=updates.handle
        ) as session:
            uri = f"sessionwire://runs/{first}"
            await session.subscribe_resource(uri)
            assert (await read_json(session, uri))["status"] == "running"
            await owner.cancel_run(first, "from the owner")
            await updates.next_for(uri, 0)
            followed = await read_json(session, uri)
            cancelled = structured(await session.call_tool("runs_cancel", {"runId": second}))
        assert followed["status"] == "cancelled"
        assert cancelled["run"]["cancelled"] is True
        # The owner's runtime call stops, and whoever waits for the run hears it.
        ended = await internals(owner).run_engine.wait(UUID(second), timeout=WAIT_SECONDS)
        assert ended is not None
        assert ended.status == "cancelled"
    finally:
        await owner.close()


class HeldPrimaries(AgentRuntime):
    """The owner's agents: a send's primary turn is in flight until its run is cancelled
    (by order, not by a delay); every other turn is SCRIPT's."""

    def __init__(self) -> None:
        self.scripted = ScriptedRuntime.from_dict(SCRIPT)

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "primary":
            await asyncio.get_running_loop().create_future()  # only the run's cancel ends it
        return await self.scripted.run(request)


async def owner_run(owner: Gateway, target: str) -> str:
    sent = await owner.call_tool(
        "main", "sessions_send", {"sessionKey": target, "message": "slow", "timeoutSeconds": 0}
    )
    run_id = str(sent["runId"])
    with anyio.fail_after(WAIT_SECONDS):
        while (await owner.run(run_id) or {}).get("status") != "running":
            await asyncio.sleep(0)  # one loop turn: the owner's actor takes the run
    return run_id
