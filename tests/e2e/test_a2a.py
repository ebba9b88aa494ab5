"""The A2A server and client (ADR 0035), driven by the official SDK's own client: send,
stream, resubscribe, cancel (on JSON-RPC and on HTTP+JSON, ADR 0046), push to a
receiver that fails twice, the caller scopes, and two gateways talking A2A to each
other. Each gateway is uvicorn on a loopback port in a
thread of its own (as tests/live_http.py); runs that must stay in flight wait on a gate
the test opens, never on time."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from egress_rig import LOOPBACK_EGRESS
from hang_bounds import HANG_SECONDS
from live_http import free_port
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.a2a.push import TOKEN_HEADER, A2APushDelivery
from sessionwire.adapters.access.auth import FailedAttempts
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.runtimes.a2a_remote import A2ARemoteRuntime
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.runtime import (
    AgentRuntime,
    RecordedDelivery,
    RunReply,
    RunRequest,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

OPERATOR = "operator-token-0123456789abcdef"
MAIN = "main-session-token-0123456789abcd"
OTHER = "other-session-token-0123456789abc"
OPS = "ops-agent-token-0123456789abcdefg"
TOKENS = TokenSet.from_data(
    {
        "tokens": [
            {"token": OPERATOR, "role": "operator"},
            {"token": MAIN, "session": "main"},
            {"token": OTHER, "session": "agent:main:other"},
            {"token": OPS, "session": "agent:ops:main"},
        ]
    }
)
CONFIG = {
    "agents": {
        "list": [
            {
                "id": "main",
                "default": True,
                "a2a": {
                    "description": "answers with pong",
                    "skills": [{"id": "pong", "name": "Pong", "examples": ["ping"]}],
                },
            },
            {"id": "ops"},
        ]
    },
    "deliveries": {"firstRetrySeconds": 0.05, "maxRetrySeconds": 0.1},
    # The push receivers and the other gateway are on loopback: named (decision 40).
    **LOOPBACK_EGRESS,
}


class GatedRuntime(AgentRuntime):
    """Replies ``pong: <message>``; a message starting with ``wait`` first waits until
    the test opens the gate (from its own thread). ``reached`` is set once a run waits
    there: what the test waits for (on a thread, never by polling)."""

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reached = threading.Event()

    async def run(self, request: RunRequest) -> RunReply:
        if request.message.startswith("wait"):
            self.loop = asyncio.get_running_loop()
            self.gate = self.gate or asyncio.Event()
            self.reached.set()
            await self.gate.wait()
        return RunReply(text=f"pong: {request.message}")

    async def wait_reached(self) -> None:
        assert await asyncio.to_thread(self.reached.wait, 60), "no run reached the agent"

    def open(self) -> None:
        assert self.loop is not None
        assert self.gate is not None
        self.loop.call_soon_threadsafe(self.gate.set)


@dataclass
class Served:
    url: str
    runtime: AgentRuntime
    store: str

    def agent(self, agent_id: str = "main") -> str:
        return f"{self.url}/a2a/{agent_id}"


class _GatewayServer(uvicorn.Server):
    """uvicorn that says when its port is open, and ends the gateway's event streams as
    it stops (an open SubscribeToTask would otherwise hold the shutdown, as in `serve`)."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event, gateway: Gateway) -> None:
        super().__init__(config)
        self.ready = ready
        self.gateway = gateway

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()

    async def shutdown(self, sockets: Any = None) -> None:
        internals(self.gateway).end_subscriptions()
        await super().shutdown(sockets=sockets)


@contextmanager
def a2a_server(
    store: str,
    runtime: AgentRuntime,
    config: Any = CONFIG,
    tokens: TokenSet = TOKENS,
    signing_key: Ed25519PrivateKey | None = None,
) -> Iterator[Served]:
    """The gateway serving A2A on a free loopback port; with ``signing_key`` its cards
    are signed, for its own URL as the public one (``--public-url``)."""
    port = free_port()
    public_url = f"http://127.0.0.1:{port}" if signing_key is not None else None
    ready = threading.Event()
    servers: list[uvicorn.Server] = []
    failures: list[BaseException] = []

    async def serve() -> None:
        gateway = await Gateway.open(
            config=config,
            store=store,
            runtime=runtime,
            delivery=A2APushDelivery(RecordedDelivery(), GatewayConfig.load(config).http.egress),
        )
        try:
            app = create_app(
                gateway,
                tokens,
                a2a=True,
                attempts=FailedAttempts(limit=1_000_000),
                a2a_signing_key=signing_key,
                public_url=public_url,
            )
            server = _GatewayServer(
                uvicorn.Config(
                    app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
                ),
                ready,
                gateway,
            )
            servers.append(server)
            await server.serve()
        finally:
            internals(gateway).end_subscriptions()
            await gateway.close()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as error:
            failures.append(error)
        finally:
            ready.set()

    thread = threading.Thread(target=run, name=f"a2a-gateway:{port}", daemon=True)
    thread.start()
    ready.wait(60)
    if not servers or not servers[0].started:
        thread.join(10)
        raise RuntimeError(f"the A2A gateway did not start: {failures!r}")
    try:
        yield Served(url=f"http://127.0.0.1:{port}", runtime=runtime, store=store)
    finally:
        servers[0].should_exit = True
        thread.join(30)
    if failures:
        raise failures[0]
    assert not thread.is_alive(), "the A2A gateway did not stop within 30 s"


@contextmanager
def server_on(tmp_path: Path, signing_key: Ed25519PrivateKey | None = None) -> Iterator[Served]:
    store = f"sqlite:///{tmp_path / 'a2a.db'}"
    with a2a_server(store, GatedRuntime(), signing_key=signing_key) as served:
        yield served


# The SDK's bindings, both served on every agent's URL (ADR 0046).
BINDINGS = [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON]


async def sdk_client(
    served: Served,
    token: str = OPERATOR,
    *,
    streaming: bool = True,
    agent: str = "main",
    binding: str = TransportProtocol.JSONRPC,
) -> Any:
    """The 1.x SDK's client of ``agent``, on ``binding`` (the card offers both)."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
    )
    return await create_client(served.agent(agent), config)


def message(text: str, context_id: str | None = None) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id or "",
    )


async def collect(events: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in events]


def state_name(state: int) -> str:
    return TaskState.Name(state)  # type: ignore[arg-type]


# The card ---------------------------------------------------------------------------


def test_each_agent_has_a_public_card_with_its_configured_skills(tmp_path: Path) -> None:
    with server_on(tmp_path) as served:
        card = httpx.get(
            served.agent() + "/.well-known/agent-card.json", timeout=HANG_SECONDS
        ).json()
        ops = httpx.get(
            served.agent("ops") + "/.well-known/agent-card.json", timeout=HANG_SECONDS
        ).json()
        unknown = httpx.get(
            served.agent("nobody") + "/.well-known/agent-card.json", timeout=HANG_SECONDS
        )
    assert card["description"] == "answers with pong"
    assert [skill["id"] for skill in card["skills"]] == ["pong"]
    assert card["supportedInterfaces"][0]["url"] == served.agent()
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True}
    # An agent with no skills configured offers one: a conversation with it.
    assert ops["name"] == "ops"
    assert [skill["id"] for skill in ops["skills"]] == ["chat"]
    assert unknown.status_code == 404


def test_a_card_is_signed_with_the_checkpoint_key_and_verifies() -> None:
    from a2a.utils.signing import create_signature_verifier
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jwt import PyJWK
    from sessionwire.adapters.a2a.agent_cards import agent_card, public_jwk, served_agents
    from sessionwire.application.config.gateway_config import GatewayConfig

    key = Ed25519PrivateKey.generate()
    entry = served_agents(GatewayConfig.model_validate(CONFIG))["main"]
    card = agent_card(
        "main", entry, base_url="https://a.example", push_notifications=False, signing_key=key
    )
    assert len(card.signatures) == 1
    verify = create_signature_verifier(lambda kid, jku: PyJWK(public_jwk(key)), ["EdDSA"])
    verify(card)  # raises if the signature does not match the card
    card.description = "tampered"
    with pytest.raises(Exception, match="signature"):
        verify(card)


# Send, get, list -----------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_waits_for_the_run_and_the_task_is_the_run(tmp_path: Path, binding: str) -> None:
    with server_on(tmp_path) as served:
        client = await sdk_client(served, streaming=False, binding=binding)
        answers = await collect(
            client.send_message(SendMessageRequest(message=message("hi", "ctx-1")))
        )
        task = answers[-1].task
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-1"))
        await client.close()
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert task.context_id == "ctx-1"
    assert task.artifacts[0].parts[0].text == "pong: hi"
    assert [m.parts[0].text for m in fetched.history] == ["hi", "pong: hi"]
    assert [t.id for t in listed.tasks] == [task.id]
    gateway = await Gateway.open(store=served.store)
    try:
        run = await gateway.run(task.id)
        history = await gateway.call_tool(
            "agent:main:a2a:ctx-1", "sessions_history", {"sessionKey": "agent:main:a2a:ctx-1"}
        )
        timeline = await gateway.timeline("agent:main:a2a:ctx-1")
    finally:
        await gateway.close()
    assert run is not None
    assert run["sessionKey"] == "agent:main:a2a:ctx-1"
    assert run["status"] == "ok"
    first = history["messages"][0]
    assert first["provenance"]["kind"] == "a2a-remote"
    calls = [e.summary for e in timeline.entries if e.kind == "remote_call"]
    assert [c.split(" by ")[0] for c in calls] == ["a2a SendMessage", "a2a GetTask"]
    assert all("by operator to agent main" in c for c in calls)


async def test_a_retried_message_id_finds_the_same_task(tmp_path: Path) -> None:
    with server_on(tmp_path) as served:
        client = await sdk_client(served, streaming=False)
        sent = message("once", "ctx-retry")
        first = await collect(client.send_message(SendMessageRequest(message=sent)))
        again = await collect(client.send_message(SendMessageRequest(message=sent)))
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-retry"))
        await client.close()
    assert first[-1].task.id == again[-1].task.id
    assert len(listed.tasks) == 1


# Stream, resubscribe, cancel ---------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_then_resubscribe_after_the_connection_is_dropped_then_cancel(
    tmp_path: Path, binding: str
) -> None:
    with server_on(tmp_path) as served:
        client = await sdk_client(served, binding=binding)
        stream = client.send_message(SendMessageRequest(message=message("wait for me")))
        first = await stream.__anext__()
        await stream.aclose()  # the client goes away mid-task
        task_id = first.task.id
        assert state_name(first.task.status.state) in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
        other = await sdk_client(served, binding=binding)
        resubscribed = other.subscribe(SubscribeToTaskRequest(id=task_id))
        snapshot = await resubscribed.__anext__()
        assert snapshot.task.id == task_id
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        rest = await collect(resubscribed)
        with pytest.raises(A2AError):  # an ended task takes no subscriber
            await collect(other.subscribe(SubscribeToTaskRequest(id=task_id)))
        await client.close()
        await other.close()
    assert state_name(cancelled.status.state) == "TASK_STATE_CANCELED"
    states = [state_name(e.status_update.status.state) for e in rest if e.HasField("status_update")]
    assert states[-1] == "TASK_STATE_CANCELED"
    assert states.count("TASK_STATE_CANCELED") == 1  # nothing shown twice


async def test_a_streamed_task_ends_with_its_reply_and_completed(tmp_path: Path) -> None:
    with server_on(tmp_path) as served:
        client = await sdk_client(served)
        stream = client.send_message(SendMessageRequest(message=message("wait then go")))
        first = await stream.__anext__()
        runtime = served.runtime
        assert isinstance(runtime, GatedRuntime)
        await runtime.wait_reached()  # the run is with the agent
        runtime.open()
        rest = await collect(stream)
        await client.close()
    kinds = [e.WhichOneof("payload") for e in rest]
    assert first.HasField("task")
    assert kinds[-2:] == ["artifact_update", "status_update"]
    assert rest[-2].artifact_update.artifact.parts[0].text == "pong: wait then go"
    assert state_name(rest[-1].status_update.status.state) == "TASK_STATE_COMPLETED"


# Push notifications through the outbox ---------------------------------------------


@dataclass
class Receiver:
    url: str
    bodies: list[tuple[int, dict[str, Any], str | None]] = field(default_factory=list)
    accepted: threading.Event = field(default_factory=threading.Event)


@contextmanager
def push_receiver(fail_first: int) -> Iterator[Receiver]:
    port = free_port()
    receiver = Receiver(url=f"http://127.0.0.1:{port}/push")

    async def push(request: Request) -> Response:
        attempt = len(receiver.bodies) + 1
        receiver.bodies.append(
            (attempt, json.loads(await request.body()), request.headers.get(TOKEN_HEADER))
        )
        if attempt <= fail_first:
            return Response(status_code=503)
        receiver.accepted.set()
        return Response(status_code=200)

    app = Starlette(routes=[Route("/push", push, methods=["POST"])])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.01)
    try:
        yield receiver
    finally:
        server.should_exit = True
        thread.join(30)


async def test_push_reaches_a_receiver_that_fails_twice_then_accepts(tmp_path: Path) -> None:
    with push_receiver(fail_first=2) as receiver, server_on(tmp_path) as served:
        client = await sdk_client(served, streaming=False)
        config = TaskPushNotificationConfig(url=receiver.url, token="receiver-secret")
        sent = await collect(
            client.send_message(
                SendMessageRequest(
                    message=message("push me", "ctx-push"),
                    configuration=SendMessageConfiguration(
                        return_immediately=True, task_push_notification_config=config
                    ),
                )
            )
        )
        task_id = sent[-1].task.id
        assert await asyncio.to_thread(receiver.accepted.wait, 60)
        await client.close()
    assert [attempt for attempt, _, _ in receiver.bodies] == [1, 2, 3]
    body = receiver.bodies[-1][1]
    assert body["task"]["id"] == task_id
    assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert receiver.bodies[-1][2] == "receiver-secret"
    gateway = await Gateway.open(store=served.store)
    try:
        timeline = await gateway.timeline("agent:main:a2a:ctx-push")
    finally:
        await gateway.close()
    deliveries = [e.event for e in timeline.entries if e.kind == "delivery"]
    assert deliveries == [
        "DeliveryQueued",
        "DeliveryAttemptFailed",
        "DeliveryAttemptFailed",
        "DeliverySucceeded",
    ]


# Scopes: a hidden task is a missing task ---------------------------------------------


async def test_a_hidden_or_unauthorised_caller_gets_the_answer_of_a_missing_task(
    tmp_path: Path,
) -> None:
    with server_on(tmp_path) as served:
        owner = await sdk_client(served, MAIN, streaming=False)
        sent = await collect(
            owner.send_message(SendMessageRequest(message=message("mine", "ctx-own")))
        )
        task_id = sent[-1].task.id
        answers: dict[str, str] = {}
        for name, token, task in (
            ("missing", MAIN, str(uuid.uuid4())),
            ("other session", OTHER, task_id),
            ("other agent's token", OPS, task_id),
        ):
            client = await sdk_client(served, token, streaming=False)
            with pytest.raises(A2AError) as refused:
                await client.get_task(GetTaskRequest(id=task))
            with pytest.raises(A2AError) as not_cancelled:
                await client.cancel_task(CancelTaskRequest(id=task))
            listed = await client.list_tasks(ListTasksRequest())
            kinds = (type(refused.value).__name__, type(not_cancelled.value).__name__)
            answers[name] = f"{kinds[0]}: {refused.value} / {kinds[1]}"
            assert listed.tasks == [] or name == "missing"
            await client.close()
        mine = await owner.get_task(GetTaskRequest(id=task_id))
        await owner.close()
    assert mine.id == task_id
    assert len(set(answers.values())) == 1, answers
    assert "TaskNotFoundError" in answers["missing"]


# The client: two gateways talking A2A ----------------------------------------------


async def test_sessions_send_to_a_remote_agent_over_a2a_between_two_gateways(
    tmp_path: Path,
) -> None:
    with server_on(tmp_path) as remote:
        runtime = A2ARemoteRuntime(
            {"helper": {"url": remote.agent(), "token": OPERATOR}},
            egress=GatewayConfig.load(LOOPBACK_EGRESS).http.egress,
        )
        config = {
            "agents": {"list": [{"id": "main", "default": True}, {"id": "helper"}]},
            # Another agent's session: outside main's default scope (tree), so `all`.
            "tools": {
                "agentToAgent": {"enabled": True, "allow": ["*"]},
                "sessions": {"visibility": "all"},
            },
        }
        gateway = await Gateway.open(config=config, store="memory", runtime=runtime)
        try:
            # The remote agent's session here: where its side of the conversation is kept.
            await gateway.record_message("agent:helper:main", role="user", content="(remote)")
            result = await gateway.call_tool(
                "main",
                "sessions_send",
                {
                    "sessionKey": "agent:helper:main",
                    "message": "hello over a2a",
                    "timeoutSeconds": 60,
                },
            )
            run = await gateway.run(result["runId"])
        finally:
            await gateway.close()
    assert result["status"] == "ok", result
    assert result["reply"] == "pong: hello over a2a"
    assert run is not None
    assert run["status"] == "ok"
    served = await Gateway.open(store=remote.store)
    try:
        tasks = (await served.runs())["runs"]
    finally:
        await served.close()
    assert [t["sessionKey"].split(":a2a:")[0] for t in tasks] == ["agent:main"]


async def test_resubscribe_to_a_task_after_its_gateway_was_stopped_and_started_again(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'a2a.db'}"
    with a2a_server(store, GatedRuntime()) as first:
        client = await sdk_client(first)
        stream = client.send_message(SendMessageRequest(message=message("wait across", "ctx-k")))
        task_id = (await stream.__anext__()).task.id
        runtime = first.runtime
        assert isinstance(runtime, GatedRuntime)
        await runtime.wait_reached()  # the agent has the run when the gateway goes down
        await stream.aclose()
        await client.close()
    # The run was in flight: the next gateway on the store resumes it, and its agent
    # waits at the gate again until the client has subscribed.
    with a2a_server(store, GatedRuntime()) as second:
        other = await sdk_client(second)
        resubscribed = other.subscribe(SubscribeToTaskRequest(id=task_id))
        snapshot = await resubscribed.__anext__()
        runtime = second.runtime
        assert isinstance(runtime, GatedRuntime)
        await runtime.wait_reached()  # the resumed run reaches the agent again
        runtime.open()
        rest = await collect(resubscribed)
        await other.close()
    assert snapshot.task.id == task_id
    states = [state_name(e.status_update.status.state) for e in rest if e.HasField("status_update")]
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert rest[-2].artifact_update.artifact.parts[0].text == "pong: wait across"


async def test_a_push_set_before_a_restart_is_sent_when_the_task_ends_after_it(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'a2a.db'}"
    with push_receiver(fail_first=0) as receiver:
        with a2a_server(store, GatedRuntime()) as first:
            client = await sdk_client(first, streaming=False)
            sent = await collect(
                client.send_message(
                    SendMessageRequest(
                        message=message("wait for the restart", "ctx-pr"),
                        configuration=SendMessageConfiguration(return_immediately=True),
                    )
                )
            )
            task_id = sent[-1].task.id
            config = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, id="p-1", url=receiver.url)
            )
            await client.close()
        assert config.id == "p-1"
        assert receiver.bodies == []  # the task had not ended
        with a2a_server(store, GatedRuntime()) as second:
            runtime = second.runtime
            assert isinstance(runtime, GatedRuntime)
            client = await sdk_client(second, streaming=False)
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            await runtime.wait_reached()  # the resumed run reaches the agent
            runtime.open()
            assert await asyncio.to_thread(receiver.accepted.wait, 60)
            await client.close()
    assert [c.id for c in listed.configs] == ["p-1"]
    assert receiver.bodies[-1][1]["task"]["id"] == task_id
    assert receiver.bodies[-1][1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
