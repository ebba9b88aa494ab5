"""A call back without its run token is still its run's call (issue 43 §1, ADR 0034).

The cycle of tests/integration/test_remote_run_calls.py, with agents that call back over
HTTP (``POST /v1/tools/*``) or MCP but leave out ``X-Sessionwire-Run`` /
``_meta["sessionwire/run"]``: each call is attributed to the calling session's run in
progress, so the cycle ends at the hop limit in one trace as it does with the token
(before, every call started a fresh trace and the cycle ran until the agents' own cap).
An A2A message from a caller bound to a session with a run in progress is that run's
next hop likewise. On every store, on a VirtualClock."""

from __future__ import annotations

import uuid
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
    Task,
    TaskState,
)
from mcp import Client
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.a2a.agent_cards import agent_card, served_agents
from sessionwire.adapters.a2a.server import GRANT, GatewayRequestHandler
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.http.tokens import Grant
from sessionwire.adapters.mcp.server import build_server
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import VirtualClock

OPERATOR_TOKEN = "operator-secret"
OPERATOR = "agent:main:main"
A = "agent:main:discord:group:a"
B = "agent:main:discord:group:b"
C = "agent:main:discord:group:c"
NEXT = {A: B, B: C, C: A}
# The agents stop after this many sends if nothing refuses them: the test fails, not hangs.
SAFETY_CAP = 8


class CallingBackWithoutToken(AgentRuntime):
    """Agents that forward each message round the cycle, naming no run."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.gateway: Gateway | None = None
        self.results: list[dict[str, Any]] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary" or len(self.results) >= SAFETY_CAP:
            return RunReply(text="REPLY_SKIP" if request.step == "reply_back" else "ok")
        params = {"sessionKey": NEXT[request.session_key], "message": request.message}
        params["timeoutSeconds"] = 0  # type: ignore[assignment]
        assert self.gateway is not None
        if self.transport == "http":
            app = create_app(self.gateway, OPERATOR_TOKEN)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://gateway"
            ) as client:
                response = await client.post(
                    "/v1/tools/sessions_send",
                    json=params,
                    headers={
                        "Authorization": f"Bearer {OPERATOR_TOKEN}",
                        "X-Sessionwire-Session": request.session_key,
                    },
                )
                result = response.json()
        else:
            async with Client(build_server(self.gateway, request.session_key)) as client:
                result = (await client.call_tool("sessions_send", params)).structured_content
        self.results.append(result)
        return RunReply(text="forwarded")


async def _opened(
    store_url: str, clock: VirtualClock, agents: AgentRuntime, **more: Any
) -> Gateway:
    config = {"session": {"agentToAgent": {"maxPingPongTurns": 0, **more}}}
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config)),
        store=store_url,
        clock=clock,
        runtime=agents,
    )
    for key in (OPERATOR, A, B, C):
        await gateway.record_message(key, role="user", content="(opened)")
    return gateway


@pytest.mark.parametrize("transport", ["http", "mcp"])
async def test_a_cycle_calling_back_without_its_token_ends_at_the_hop_limit(
    store_url: str, clock: VirtualClock, transport: str
) -> None:
    agents = CallingBackWithoutToken(transport)
    gateway = await _opened(store_url, clock, agents)
    agents.gateway = gateway
    try:
        params = {"sessionKey": A, "message": "pass it on", "timeoutSeconds": 0}
        first = await gateway.call_tool(OPERATOR, "sessions_send", params)
        await gateway.wait_idle()
        events = [event for _, event in store_of(gateway).events()]
    finally:
        await gateway.close()
    # maxHops 6 (the default): five sends accepted, the sixth refused, as with the token.
    assert [r["status"] for r in agents.results] == ["accepted"] * 5 + ["forbidden"]
    assert agents.results[-1]["error"] == "agent-to-agent hop limit reached (6 hops in this chain)"
    started = [event for event in events if type(event).__name__ == "RunStarted"]
    assert [e.hops for e in started if e.step == "primary"] == [1, 2, 3, 4, 5, 6]
    assert {event.trace_id for event in started} == {first["runId"]}


class AskingOverA2A(AgentRuntime):
    """A's primary turn sends an A2A message to the gateway's own agent as A (a token
    bound to A), naming no run."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None
        self.answers: list[Task] = []

    async def run(self, request: RunRequest) -> RunReply:
        if request.session_key != A or request.step != "primary":
            return RunReply(text="pong")
        assert self.gateway is not None
        service = internals(self.gateway)
        card = agent_card(
            "main",
            served_agents(service.config)["main"],
            base_url="http://test",
            push_notifications=False,
        )
        handler = GatewayRequestHandler(service, "main", card)
        message = SendMessageRequest(
            message=Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                context_id="c1",
                parts=[Part(text="hi")],
            ),
            configuration=SendMessageConfiguration(return_immediately=True),
        )
        answer = await handler.on_message_send(
            message, ServerCallContext(state={GRANT: Grant(A, f"session {A}#1")})
        )
        assert isinstance(answer, Task)
        self.answers.append(answer)
        return RunReply(text="asked")


@pytest.mark.parametrize("max_hops", [1, 6])
async def test_an_a2a_message_from_a_session_with_a_run_in_progress_is_its_next_hop(
    store_url: str, clock: VirtualClock, max_hops: int
) -> None:
    agents = AskingOverA2A()
    gateway = await _opened(store_url, clock, agents, maxHops=max_hops)
    agents.gateway = gateway
    try:
        params = {"sessionKey": A, "message": "go", "timeoutSeconds": 0}
        first = await gateway.call_tool(OPERATOR, "sessions_send", params)
        await gateway.wait_idle()
        tasks = [run for run in (await gateway.runs())["runs"] if ":a2a:" in run["sessionKey"]]
    finally:
        await gateway.close()
    (answer,) = agents.answers
    if max_hops == 1:
        assert answer.status.state == TaskState.TASK_STATE_REJECTED
        assert "hop limit reached (1 hops in this chain)" in answer.status.message.parts[0].text
        assert tasks == []
        return
    (task,) = tasks
    assert (task["traceId"], task["parentRunId"], task["hop"]) == (
        first["runId"],
        first["runId"],
        2,
    )
