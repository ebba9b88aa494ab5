"""What a run's runtime is handed (found by mutation testing, docs/testing.md "What
mutation testing left"): the gateway's own unit-level behaviour that the simulated
agents never look at, so no simulator invariant could see it break."""

from __future__ import annotations

from typing import Any

from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.testing import VirtualClock

MAIN = "agent:main:main"


class Reader(AgentRuntime):
    """A sub-agent's task reads its session's newest transcript lines."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] | None = None

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            self.seen = await request.transcript(10)
            return RunReply(text="done")
        return RunReply(text="ANNOUNCE_SKIP" if "announce" in request.step else "ok")


async def test_a_run_reads_its_own_sessions_transcript() -> None:
    clock = VirtualClock()
    agents = Reader()
    gw = await Gateway.open(
        config=GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 0}}}),
        store="memory",
        clock=clock,
        runtime=agents,
    )
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "dig the logs"})
        assert spawned["status"] == "accepted", spawned
        await clock.advance(1)
        await gw.wait_idle()
    finally:
        await gw.close()

    assert agents.seen is not None
    users = [line for line in agents.seen if line["role"] == "user"]
    assert [block["text"] for block in users[-1]["content"]] == ["dig the logs"]


def test_a_runs_token_carries_24_random_bytes() -> None:
    # Unguessable (RunRequest.run_token): 24 bytes, 32 URL-safe characters, never repeated.
    from sessionwire.application.orchestration.runs import RunTurn

    state: Any = None
    tokens = {RunTurn(state).token for _ in range(50)}
    assert len(tokens) == 50
    assert {len(token) for token in tokens} == {32}


async def test_a_runs_reply_line_is_stamped_with_the_gateway_time_in_milliseconds() -> None:
    clock = VirtualClock()
    gw = await Gateway.open(
        config=GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 0}}}),
        store="memory",
        clock=clock,
        runtime=Reader(),
    )
    try:
        await gw.record_message(MAIN, role="user", content="hi")
        start = int(clock.now().timestamp() * 1000)
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "dig the logs"})
        await clock.advance(1)
        await gw.wait_idle()
        history = await gw.call_tool(
            MAIN, "sessions_history", {"sessionKey": spawned["childSessionKey"]}
        )
    finally:
        await gw.close()

    # The runs answered at once: every line, the replies too, is stamped with that time.
    assert {line["timestamp"] for line in history["messages"]} == {start}
    assert {line["role"] for line in history["messages"]} == {"user", "assistant"}
