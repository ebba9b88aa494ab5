"""Tool calls an agent makes during its turn over HTTP or MCP join its run's chain.

An agent runtime that calls back through ``POST /v1/tools/*`` or the MCP server names its
run with the token its ``RunRequest`` carries (header ``X-Sessionwire-Run``, MCP
``_meta["sessionwire/run"]``), so a cycle of such agents ends at the hop limit (decision
17) just as in-process calls do. A token names only a run in flight of the session the
caller speaks as: unknown, ended or another session's runs are refused, so no client can
claim a shorter chain than its own.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import httpx
import pytest
from mcp import Client
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.mcp.server import RUN_META, build_server
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import CapturingDelivery, VirtualClock

OPERATOR_TOKEN = "operator-secret"
OPERATOR = "agent:main:main"
A = "agent:main:discord:group:a"
B = "agent:main:discord:group:b"
C = "agent:main:discord:group:c"
NEXT = {A: B, B: C, C: A}
# The agents stop after this many sends if nothing refuses them: the test fails, not hangs.
SAFETY_CAP = 8


class CallingBack(AgentRuntime):
    """Agents that forward each message round the cycle through a remote transport."""

    def __init__(self, transport: str, *, with_token: bool = True) -> None:
        self.transport = transport
        self.with_token = with_token
        self.gateway: Gateway | None = None
        self.results: list[dict[str, Any]] = []
        self.tokens: list[tuple[str, str]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary" or len(self.results) >= SAFETY_CAP:
            return RunReply(text="REPLY_SKIP" if request.step == "reply_back" else "ok")
        assert request.run_token is not None
        self.tokens.append((request.session_key, request.run_token))
        params = {"sessionKey": NEXT[request.session_key], "message": request.message}
        params["timeoutSeconds"] = 0  # type: ignore[assignment]
        if self.transport == "http":
            call = self.over_http(request.session_key, request.run_token, params)
        else:
            call = self.over_mcp(request.session_key, request.run_token, params)
        if self.with_token:
            result = await call
        else:
            # As from another process: in a context of its own, so the call cannot find
            # its turn the way an in-process tool call does (the runtime's task context).
            result = await asyncio.create_task(call, context=contextvars.Context())
        self.results.append(result)
        return RunReply(text="forwarded")

    async def over_http(self, session: str, token: str, params: dict[str, Any]) -> Any:
        headers = {"X-Sessionwire-Session": session}
        if self.with_token:
            headers["X-Sessionwire-Run"] = token
        async with http_client(self.gateway) as client:
            response = await client.post("/v1/tools/sessions_send", json=params, headers=headers)
            assert response.status_code == 200, response.text
            return response.json()

    async def over_mcp(self, session: str, token: str, params: dict[str, Any]) -> Any:
        assert self.gateway is not None
        server = build_server(self.gateway, session)
        meta = {RUN_META: token} if self.with_token else None
        async with Client(server) as client:
            answer = await client.call_tool("sessions_send", params, meta=meta)
            return answer.structured_content


def http_client(gateway: Gateway | None) -> httpx.AsyncClient:
    assert gateway is not None
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(gateway, OPERATOR_TOKEN)),
        base_url="http://gateway",
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
    )


async def open_cycle(clock: VirtualClock, agents: CallingBack, store: str = "memory") -> Gateway:
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)),
        store=store,
        clock=clock,
        runtime=agents,
        delivery=CapturingDelivery(),
    )
    agents.gateway = gateway
    for key in (OPERATOR, A, B, C):
        await gateway.record_message(key, role="user", content="(opened)")
    return gateway


def primary_hops(gateway: Gateway) -> list[int]:
    return [
        event.hops
        for _, event in store_of(gateway).events()
        if type(event).__name__ == "RunStarted" and event.step == "primary"
    ]


async def test_a_cycle_calling_back_over_http_ends_at_the_hop_limit(clock: VirtualClock) -> None:
    await _cycle_ends_at_the_hop_limit(clock, "http")


async def test_a_cycle_calling_back_over_mcp_ends_at_the_hop_limit(clock: VirtualClock) -> None:
    await _cycle_ends_at_the_hop_limit(clock, "mcp")


@pytest.mark.parametrize("transport", ["http", "mcp"])
async def test_a_cycle_calling_back_without_its_token_ends_at_the_hop_limit(
    store_url: str, clock: VirtualClock, transport: str
) -> None:
    """The same cycle, its calls naming no run (issue 43 §1, ADR 0034): each is attributed
    to the calling session's run in progress, so the cycle still ends at the hop limit in
    one trace (before, every call started a fresh trace and the cycle ran to the cap)."""
    await _cycle_ends_at_the_hop_limit(clock, transport, with_token=False, store=store_url)


async def _cycle_ends_at_the_hop_limit(
    clock: VirtualClock, transport: str, *, with_token: bool = True, store: str = "memory"
) -> None:
    agents = CallingBack(transport, with_token=with_token)
    gateway = await open_cycle(clock, agents, store)
    try:
        params = {"sessionKey": A, "message": "pass it on", "timeoutSeconds": 0}
        first = await gateway.call_tool(OPERATOR, "sessions_send", params)
        await gateway.wait_idle()
        assert [r["status"] for r in agents.results] == ["accepted"] * 5 + ["forbidden"]
        assert "hop limit" in agents.results[-1]["error"]
        assert primary_hops(gateway) == [1, 2, 3, 4, 5, 6]
        traces = {
            event.trace_id
            for _, event in store_of(gateway).events()
            if type(event).__name__ == "RunStarted"
        }
        assert traces == {first["runId"]}
    finally:
        await gateway.close()


async def test_a_run_token_is_refused_unless_its_run_is_in_flight_for_the_caller(
    clock: VirtualClock,
) -> None:
    agents = CallingBack("http")
    gateway = await open_cycle(clock, agents)
    try:
        params = {"sessionKey": A, "message": "pass it on", "timeoutSeconds": 0}
        await gateway.call_tool(OPERATOR, "sessions_send", params)
        await gateway.wait_idle()
        session, ended = agents.tokens[0]
        body = {"sessionKey": B, "message": "again", "timeoutSeconds": 0}
        async with http_client(gateway) as client:
            for speaking_as, token in ((session, ended), (session, "made-up"), (B, ended)):
                response = await client.post(
                    "/v1/tools/sessions_send",
                    json=body,
                    headers={"X-Sessionwire-Session": speaking_as, "X-Sessionwire-Run": token},
                )
                assert response.status_code == 403
                assert response.json()["error"]["code"] == "run_not_in_flight"
                assert "no run in flight" in response.json()["error"]["message"]
        # The Python API and MCP refuse the same way, as a forbidden tool result.
        result = await gateway.call_tool(session, "sessions_send", body, run_token=ended)
        assert result["status"] == "forbidden"
        assert "no run in flight" in result["error"]
        # Nothing was started by the refused calls.
        assert len(primary_hops(gateway)) == 6
    finally:
        await gateway.close()


class PosingAsAnother(AgentRuntime):
    """An agent that, during its turn, presents its live run token while speaking as
    another session (over HTTP and over MCP), and once as its own session (the control:
    the token is in flight, so only the session differs)."""

    def __init__(self, impostor_of: str) -> None:
        self.impostor_of = impostor_of
        self.gateway: Gateway | None = None
        self.http: list[httpx.Response] = []
        self.mcp: list[Any] = []
        self.own: list[int] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="REPLY_SKIP" if request.step == "reply_back" else "ok")
        token = request.run_token
        assert token is not None
        body = {"sessionKey": C, "message": "as someone else", "timeoutSeconds": 0}
        async with http_client(self.gateway) as client:
            self.http.append(
                await client.post(
                    "/v1/tools/sessions_send",
                    json=body,
                    headers={"X-Sessionwire-Session": self.impostor_of, "X-Sessionwire-Run": token},
                )
            )
            own = await client.post(
                "/v1/tools/sessions_list",
                json={},
                headers={"X-Sessionwire-Session": request.session_key, "X-Sessionwire-Run": token},
            )
            self.own.append(own.status_code)
        assert self.gateway is not None
        server = build_server(self.gateway, self.impostor_of)
        async with Client(server) as mcp:
            self.mcp.append(await mcp.call_tool("sessions_send", body, meta={RUN_META: token}))
        return RunReply(text="tried")


async def test_a_live_run_token_is_refused_when_speaking_as_another_session(
    clock: VirtualClock,
) -> None:
    agent = PosingAsAnother(impostor_of=B)
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)), store="memory", clock=clock, runtime=agent
    )
    agent.gateway = gateway
    try:
        for key in (OPERATOR, A, B, C):
            await gateway.record_message(key, role="user", content="(opened)")
        params = {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
        assert (await gateway.call_tool(OPERATOR, "sessions_send", params))["status"] == "accepted"
        await gateway.wait_idle()

        assert agent.own == [200]  # the token was in flight for its own session
        [response] = agent.http
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["code"] == "run_not_in_flight"
        assert "a run of another session" in error["message"]
        [answer] = agent.mcp
        assert answer.is_error
        assert answer.structured_content["status"] == "forbidden"
        assert "a run of another session" in answer.structured_content["error"]
        # Only the operator's send started a run: the refused calls started nothing.
        assert primary_hops(gateway) == [1]
    finally:
        await gateway.close()
