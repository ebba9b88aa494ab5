"""An A2A message from a caller bound to a session with a run in progress is that run's
call (issue 43 §1, ADR 0034): the task is the run's next hop, in its trace, and the hop
limit applies (before, every such message started a fresh trace). The same for HTTP and
MCP tool calls without the run token: tests/integration/test_remote_run_calls.py. On
every store, on a VirtualClock."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import Task, TaskState
from a2a_calls import a2a_message, called_by, handler_for
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.tokens import Grant
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import VirtualClock

OPERATOR = "agent:main:main"
A = "agent:main:discord:group:a"


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
    for key in (OPERATOR, A):
        await gateway.record_message(key, role="user", content="(opened)")
    return gateway


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
        answer = await handler_for(self.gateway).on_message_send(
            a2a_message("hi", wait=False), called_by(Grant(A, f"session {A}#1"))
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
