"""The OpenAI-compatible runtime against a small chat-completions server on loopback."""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from chat_server import ChatServer, completion
from egress_rig import LOOPBACK_EGRESS
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime, OpenAIRuntimeConfig
from sessionwire.application.ports.runtime import RunRequest
from sessionwire.application.ports.store import Clock
from sessionwire.testing import VirtualClock

# The chat server is on loopback: named, as decision 40 asks (docs/openai-runtime.md).
LOOPBACK = GatewayConfig.load(LOOPBACK_EGRESS).http.egress


async def no_transcript(limit: int) -> list[dict[str, Any]]:
    return []


def recorded_tail(
    recorded: list[dict[str, Any]],
) -> Callable[[int], Awaitable[list[dict[str, Any]]]]:
    async def tail(limit: int) -> list[dict[str, Any]]:
        return recorded[-limit:]

    return tail


class RecordingClock(Clock):
    """A clock whose sleeps return at once and are remembered: the backoff, as waited."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def now(self) -> datetime:
        return datetime(2026, 5, 1, tzinfo=UTC)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer().running() as running:
        yield running


def runtime(server: ChatServer, **settings: Any) -> OpenAIRuntime:
    return OpenAIRuntime(
        {"baseUrl": server.base_url, "model": "fake-1", **settings}, egress=LOOPBACK
    )


def request(
    clock: Clock,
    message: str = "ping",
    context: str | None = None,
    transcript: list[dict[str, Any]] | None = None,
) -> RunRequest:
    recorded = transcript or []
    return RunRequest(
        run_id="run-1",
        session_key="agent:main:discord:group:ops",
        agent_id="main",
        step="primary",
        message=message,
        context=context,
        clock=clock,
        transcript=recorded_tail(recorded),
    )


def text(role: str, value: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": value}], "timestamp": 1}


async def test_a_run_is_one_chat_completion(server: ChatServer) -> None:
    server.answer(body=completion("pong", prompt_tokens=42, completion_tokens=2, model="m-2"))
    agent = runtime(server, systemPrompt="You are terse.", temperature=0.2, maxTokens=100)
    history = [
        text("user", "earlier question"),
        text("assistant", "earlier answer"),
        {"role": "toolResult", "content": [{"type": "text", "text": "tool noise"}], "timestamp": 1},
        text("user", "ping"),  # the run's own message, recorded before the run starts
    ]

    reply = await agent.run(
        request(RecordingClock(), context="Agent-to-agent message context", transcript=history)
    )

    assert reply.text == "pong"
    assert reply.usage == {"input": 42, "output": 2, "totalTokens": 44}
    assert reply.model == "m-2"
    [sent] = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "fake-1",
        "temperature": 0.2,
        "max_tokens": 100,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "system", "content": "Agent-to-agent message context"},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "user", "content": "ping"},
        ],
    }
    assert "authorization" not in sent.headers


async def test_history_limit_keeps_the_latest_messages(server: ChatServer) -> None:
    history = [text("user", f"m{n}") for n in range(10)]
    await runtime(server, historyLimit=2).run(request(RecordingClock(), transcript=history))
    messages = server.received[0].body["messages"]
    assert [m["content"] for m in messages] == ["m8", "m9", "ping"]


async def test_the_api_key_comes_from_the_named_environment_variable(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_CHAT_KEY", "sk-test-123")
    await runtime(server, apiKeyEnv="TEST_CHAT_KEY").run(request(RecordingClock()))
    assert server.received[0].headers["authorization"] == "Bearer sk-test-123"


def test_a_missing_api_key_variable_is_an_error_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_CHAT_KEY", raising=False)
    with pytest.raises(ValueError, match="TEST_CHAT_KEY"):
        OpenAIRuntime(
            {"baseUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKeyEnv": "TEST_CHAT_KEY"}
        )


def test_a_bad_config_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"invalid openai config: timeoutSeconds"):
        OpenAIRuntimeConfig.load({"baseUrl": "http://x/v1", "model": "m", "timeoutSeconds": 0})
    with pytest.raises(ValueError, match=r"model: Field required"):
        OpenAIRuntimeConfig.load({"baseUrl": "http://x/v1"})
    with pytest.raises(ValueError, match=r"apiKey: Extra inputs"):
        OpenAIRuntimeConfig.load({"baseUrl": "http://x/v1", "model": "m", "apiKey": "sk-..."})


async def test_server_errors_are_retried_with_exponential_backoff(server: ChatServer) -> None:
    server.answer(status=500, body={"error": {"message": "overloaded"}})
    server.answer(status=503)
    server.answer(body=completion("third time lucky"))
    clock = RecordingClock()

    reply = await runtime(server, maxRetries=2, backoffSeconds=0.5).run(request(clock))

    assert reply.text == "third time lucky"
    assert len(server.received) == 3
    assert clock.slept == [0.5, 1.0]


async def test_a_rate_limit_waits_what_the_server_asks(server: ChatServer) -> None:
    server.answer(
        status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "7"}
    )
    clock = RecordingClock()
    reply = await runtime(server, backoffSeconds=1).run(request(clock))
    assert reply.text == "echo: ping"
    assert clock.slept == [7.0]


async def test_waits_never_exceed_the_maximum_backoff(server: ChatServer) -> None:
    for _ in range(4):
        server.answer(status=502)
    clock = RecordingClock()
    settings = {"maxRetries": 4, "backoffSeconds": 2, "maxBackoffSeconds": 5}
    await runtime(server, **settings).run(request(clock))
    assert clock.slept == [2.0, 4.0, 5.0, 5.0]


async def test_exhausted_retries_fail_the_run_with_the_last_problem(server: ChatServer) -> None:
    for _ in range(3):
        server.answer(status=500, body={"error": {"message": "model crashed"}})
    with pytest.raises(RuntimeError) as failure:
        await runtime(server, maxRetries=2).run(request(RecordingClock()))
    assert (
        str(failure.value) == "chat completion failed after 3 attempt(s): HTTP 500: model crashed"
    )
    assert len(server.received) == 3


async def test_a_client_error_is_not_retried(server: ChatServer) -> None:
    server.answer(status=401, body={"error": {"message": "Incorrect API key provided"}})
    clock = RecordingClock()
    with pytest.raises(RuntimeError, match=r"refused: HTTP 401: Incorrect API key provided"):
        await runtime(server, maxRetries=3).run(request(clock))
    assert len(server.received) == 1
    assert clock.slept == []


async def test_a_slow_server_times_out_and_is_retried(server: ChatServer) -> None:
    server.answer(body=completion("too late"), delay_seconds=2)
    clock = RecordingClock()
    reply = await runtime(server, timeoutSeconds=0.2, maxRetries=1, backoffSeconds=0).run(
        request(clock)
    )
    assert reply.text == "echo: ping"
    assert len(server.received) == 2


async def test_a_slow_server_with_no_retries_left_fails_the_run(server: ChatServer) -> None:
    server.answer(body=completion("too late"), delay_seconds=2)
    with pytest.raises(RuntimeError, match=r"after 1 attempt\(s\): no answer within 0.2s"):
        await runtime(server, timeoutSeconds=0.2, maxRetries=0).run(request(RecordingClock()))


async def test_a_refused_connection_is_retried_then_reported() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    clock = RecordingClock()
    agent = OpenAIRuntime(
        {"baseUrl": f"http://127.0.0.1:{port}/v1", "model": "m", "maxRetries": 1}, egress=LOOPBACK
    )
    with pytest.raises(
        RuntimeError, match=rf"after 2 attempt\(s\): cannot reach http://127.0.0.1:{port}"
    ):
        await agent.run(request(clock))
    assert clock.slept == [1.0]


async def test_an_answer_without_choices_fails_the_run(server: ChatServer) -> None:
    server.answer(body={"object": "chat.completion", "choices": []})
    with pytest.raises(RuntimeError, match="no choices"):
        await runtime(server).run(request(RecordingClock()))


# Through the gateway ---------------------------------------------------------------------


async def test_sessions_send_gets_the_servers_reply_into_the_transcript(
    server: ChatServer, store_url: str, clock: VirtualClock
) -> None:
    server.answer(body=completion("deploy 42 is green", prompt_tokens=30, completion_tokens=6))
    server.answer(body=completion("REPLY_SKIP"))
    server.answer(body=completion("ANNOUNCE_SKIP"))
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()),
        store=store_url,
        clock=clock,
        runtime=runtime(server),
    )
    try:
        await gateway.record_message("main", role="user", content="status?", channel="webchat")
        await gateway.record_message(
            "discord:group:ops", role="user", content="deploying 42", channel="discord"
        )
        result = await gateway.call_tool(
            "main", "sessions_send", {"sessionKey": "discord:group:ops", "message": "is 42 out?"}
        )
        await gateway.wait_idle()
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "discord:group:ops"}
        )
    finally:
        await gateway.close()

    assert result["status"] == "ok"
    assert result["reply"] == "deploy 42 is green"
    # After the two users' messages: the reply, then the announce step and its (silent) answer.
    messages = history["messages"]
    assert [m["content"][0]["text"] for m in messages] == [
        "deploying 42",
        "is 42 out?",
        "deploy 42 is green",
        "Agent-to-agent announce step.",
        "ANNOUNCE_SKIP",
    ]
    reply = messages[2]
    assert reply["role"] == "assistant"
    assert reply["usage"] == {"input": 30, "output": 6, "totalTokens": 36}
    assert reply["model"] == "fake-1"
    primary = server.received[0].body["messages"]
    assert primary[0]["role"] == "system"  # the gateway's agent-to-agent context
    assert primary[1:] == [
        {"role": "user", "content": "deploying 42"},
        {"role": "user", "content": "is 42 out?"},
    ]


async def test_a_run_that_exhausts_its_retries_records_the_error(
    server: ChatServer, store_url: str, clock: VirtualClock
) -> None:
    for _ in range(2):
        server.answer(status=503, body={"error": {"message": "no capacity"}})
    agent = runtime(server, maxRetries=1, backoffSeconds=0)
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_url, clock=clock, runtime=agent
    )
    try:
        await gateway.record_message("discord:group:ops", role="user", content="hi")
        result = await gateway.call_tool(
            "main", "sessions_send", {"sessionKey": "discord:group:ops", "message": "ping"}
        )
        await gateway.wait_idle()
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "discord:group:ops"}
        )
    finally:
        await gateway.close()

    assert result["status"] == "error"
    assert result["error"] == "chat completion failed after 2 attempt(s): HTTP 503: no capacity"
    # The message was delivered to the session; no assistant reply was made up.
    assert [m["role"] for m in history["messages"]] == ["user", "user"]


# Tools -----------------------------------------------------------------------------------


def tool_call(name: str, arguments: str, call_id: str = "call-1") -> dict[str, Any]:
    answer = completion(None, prompt_tokens=10, completion_tokens=3)
    answer["choices"][0]["message"]["tool_calls"] = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    ]
    answer["choices"][0]["finish_reason"] = "tool_calls"
    return answer


class ToolLog:
    """A tool caller standing in for a gateway: answers from a dict, remembers calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def __call__(self, requester: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((requester, name, params))
        return {"count": 0, "sessions": []}


def tool_request(tools: tuple[str, ...]) -> RunRequest:
    return RunRequest(
        run_id="run-1",
        session_key="agent:main:main",
        agent_id="main",
        step="primary",
        message="who is around?",
        context=None,
        clock=RecordingClock(),
        transcript=no_transcript,
        tools=tools,
    )


async def test_the_model_calls_a_session_tool_as_the_runs_session(server: ChatServer) -> None:
    server.answer(body=tool_call("sessions_list", '{"limit": 5}'))
    server.answer(body=completion("nobody", prompt_tokens=40, completion_tokens=2))
    tools = ToolLog()
    agent = runtime(server)
    agent.use_tools(tools)

    reply = await agent.run(tool_request(("read", "sessions_list", "sessions_send")))

    assert reply.text == "nobody"
    assert reply.usage == {"input": 50, "output": 5, "totalTokens": 55}
    assert tools.calls == [("agent:main:main", "sessions_list", {"limit": 5})]
    first, second = (r.body for r in server.received)
    assert [t["function"]["name"] for t in first["tools"]] == ["sessions_list", "sessions_send"]
    assert first["tools"][0]["function"]["parameters"]["properties"]["limit"]["type"] == "number"
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call-1"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call-1",
        "content": '{"count": 0, "sessions": []}',
    }


@pytest.mark.parametrize(
    ("name", "arguments", "status", "error"),
    [
        ("sessions_spawn", '{"task": "x"}', "forbidden", "not a tool of this run"),
        ("sessions_list", "[1, 2]", "error", "arguments must be a JSON object"),
        ("sessions_list", "{oops", "error", "arguments must be a JSON object"),
    ],
)
async def test_a_tool_call_the_run_cannot_make_is_answered_with_a_refusal(
    server: ChatServer, name: str, arguments: str, status: str, error: str
) -> None:
    server.answer(body=tool_call(name, arguments))
    server.answer(body=completion("ok then"))
    tools = ToolLog()
    agent = runtime(server)
    agent.use_tools(tools)

    reply = await agent.run(tool_request(("sessions_list",)))

    assert reply.text == "ok then"
    assert tools.calls == []
    answered = json.loads(server.received[1].body["messages"][-1]["content"])
    assert answered == {"status": status, "tool": name, "error": error}


async def test_a_yield_ends_the_turn_without_asking_the_model_again(server: ChatServer) -> None:
    answer = tool_call("sessions_yield", '{"waitFor": "any"}')
    answer["choices"][0]["message"]["content"] = "waiting for the builds"
    server.answer(body=answer)
    calls: list[tuple[str, dict[str, Any]]] = []

    async def yielding(requester: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        calls.append((name, params))
        return {"status": "yielded", "yieldId": "y", "waitFor": "any", "children": []}

    agent = runtime(server)
    agent.use_tools(yielding)
    reply = await agent.run(tool_request(("sessions_yield",)))

    assert reply.text == "waiting for the builds"
    assert calls == [("sessions_yield", {"waitFor": "any"})]
    assert len(server.received) == 1


async def test_a_yield_that_is_refused_lets_the_model_go_on(server: ChatServer) -> None:
    server.answer(body=tool_call("sessions_yield", "{}"))
    server.answer(body=completion("no children, so here is my answer"))

    async def refusing(requester: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"status": "error", "tool": name, "error": "no sub-agent in flight"}

    agent = runtime(server)
    agent.use_tools(refusing)
    reply = await agent.run(tool_request(("sessions_yield",)))

    assert reply.text == "no children, so here is my answer"
    assert len(server.received) == 2


async def test_a_model_that_never_stops_calling_tools_fails_the_run(server: ChatServer) -> None:
    for _ in range(3):
        server.answer(body=tool_call("sessions_list", "{}"))
    agent = runtime(server, maxToolRounds=2)
    agent.use_tools(ToolLog())
    with pytest.raises(RuntimeError, match=r"still called tools after 2 round\(s\)"):
        await agent.run(tool_request(("sessions_list",)))
    assert len(server.received) == 3


async def test_an_agent_reads_another_session_through_the_gateway(
    server: ChatServer, store_url: str, clock: VirtualClock
) -> None:
    server.answer(body=tool_call("sessions_history", '{"sessionKey": "main"}'))
    server.answer(body=completion("main asked about the deploy"))
    server.answer(body=completion("REPLY_SKIP"))
    server.answer(body=completion("ANNOUNCE_SKIP"))
    agent = runtime(server)
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_url, clock=clock, runtime=agent
    )
    agent.use_tools(gateway.call_tool)
    try:
        await gateway.record_message("main", role="user", content="how is the deploy?")
        await gateway.record_message("discord:group:ops", role="user", content="deploying")
        result = await gateway.call_tool(
            "main", "sessions_send", {"sessionKey": "discord:group:ops", "message": "catch up"}
        )
        await gateway.wait_idle()
    finally:
        await gateway.close()

    assert result["reply"] == "main asked about the deploy"
    history = json.loads(server.received[1].body["messages"][-1]["content"])
    assert history["sessionKey"] == "main"
    assert "how is the deploy?" in [m["content"][0]["text"] for m in history["messages"]]


# Asking a person (decision 33) -------------------------------------------------------------


async def test_the_model_asks_a_person_through_request_input(server: ChatServer) -> None:
    server.answer(body=tool_call("request_input", '{"prompt": "Deploy?", "options": ["yes"]}'))
    agent = runtime(server, askTool=True)

    reply = await agent.run(tool_request(()))

    assert reply.input_request is not None
    assert (reply.input_request.prompt, reply.input_request.options) == ("Deploy?", ["yes"])
    assert reply.usage == {"input": 10, "output": 3, "totalTokens": 13}
    (sent,) = (r.body for r in server.received)
    assert [t["function"]["name"] for t in sent["tools"]] == ["request_input"]


async def test_a_request_input_without_a_prompt_is_answered_and_the_model_goes_on(
    server: ChatServer,
) -> None:
    server.answer(body=tool_call("request_input", '{"options": ["yes"]}'))
    server.answer(body=completion("fine, I will not ask"))
    agent = runtime(server, askTool=True)

    reply = await agent.run(tool_request(()))

    assert reply.text == "fine, I will not ask"
    assert reply.input_request is None
    answered = json.loads(server.received[1].body["messages"][-1]["content"])
    assert answered["status"] == "error"
    assert answered["error"].startswith("request_input needs {prompt, options?}")


async def test_without_ask_tool_the_model_is_not_offered_request_input(server: ChatServer) -> None:
    server.answer(body=completion("hello"))
    await runtime(server).run(tool_request(()))
    assert "tools" not in server.received[0].body
