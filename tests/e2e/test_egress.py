"""Outbound calls, replayed as the attacks of issue 36 were (contract decisions 38 and 40,
ADR 0040), against `sessionwire serve --a2a` and `sessionwire sessions send` as run:

- a push receiver answering 500 with a 400 MB body: the gateway reads none of it (the
  receiver, not the gateway's memory, says how much it could send), and retries only on
  the outbox's schedule, one request an attempt;
- push URLs on loopback, link-local, private and metadata addresses, refused when set (on
  SendMessage and on CreateTaskPushNotificationConfig), and by tokens not allowed to;
- a remote card naming another origin, or not signed by the configured key: refused
  before the token or the message goes anywhere; a signed card from a real gateway is
  taken, end to end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import A2AError
from command_line import run_in_process
from egress_rig import FloodServer
from hang_bounds import HANG_SECONDS
from live_http import cli_env, free_port, serve_process
from sessionwire.adapters.a2a.agent_cards import agent_card
from sessionwire.adapters.a2a.push import TOKEN_HEADER
from sessionwire.application.config.gateway_config import AgentEntry

OPERATOR = "egress-operator-token-0123456789abcdef"
BOB = "egress-bob-session-token-0123456789abc"
LOOPBACK = {"allow": ["127.0.0.1"]}
# What a receiver that is never read from can push into the kernel's buffers on loopback
# (its send buffer is small: tests/egress_rig.py). The body is 400 MB: a gateway that
# reads it shows 400 MB sent.
UNREAD_BOUND = 8 * 1024 * 1024


@contextmanager
def a2a_serve(tmp_path: Path, config: dict[str, Any], *options: str) -> Iterator[str]:
    """`serve --a2a` with ``config``, a scripted agent, an operator token and bob's;
    yields the agent's A2A URL."""
    name = uuid.uuid4().hex[:8]
    tokens = tmp_path / f"{name}-tokens.json"
    tokens.touch(mode=0o600)
    (tmp_path / f"{name}.json").write_text(json.dumps(config))
    (tmp_path / f"{name}-agent.json").write_text(
        json.dumps({"rules": [{"step": "primary", "reply": "done: {message}"}]})
    )
    (tmp_path / f"{name}-tokens.json").write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": OPERATOR, "role": "operator"},
                    {"token": BOB, "session": "agent:main:bob"},
                ]
            }
        )
    )
    port = free_port()
    command = (
        f"sessionwire --store sqlite:///{tmp_path / name}.db --config {tmp_path / name}.json "
        f"serve --a2a --port {port} --runtime {tmp_path / name}-agent.json "
        f"--tokens {tmp_path / name}-tokens.json {' '.join(options)}"
    )
    with serve_process(command, port=port, env=cli_env(), cwd=str(tmp_path)) as process:
        yield f"http://127.0.0.1:{port}/a2a/main"
    assert process.returncode in (0, -2), process.stderr.read()


async def client_of(url: str, token: str = OPERATOR) -> Any:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_SECONDS)
    return await create_client(url, ClientConfig(httpx_client=http, streaming=False))


def message(text: str, context_id: str) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id,
    )


def with_push(
    text: str, context_id: str, url: str, token: str = "push-secret"
) -> SendMessageRequest:
    config = TaskPushNotificationConfig(url=url, token=token)
    return SendMessageRequest(
        message=message(text, context_id),
        configuration=SendMessageConfiguration(
            return_immediately=True, task_push_notification_config=config
        ),
    )


async def sent_task_id(client: Any, request: SendMessageRequest) -> str:
    answers = [answer async for answer in client.send_message(request)]
    return str(answers[-1].task.id)


# A push answer is never read -----------------------------------------------------------


async def test_a_push_receiver_answering_500_with_400_mb_is_not_read_and_retried_on_schedule(
    tmp_path: Path,
) -> None:
    config = {
        "http": {"egress": {**LOOPBACK, "maxResponseBytes": 64 * 1024}},
        "deliveries": {"firstRetrySeconds": 0.2, "maxRetrySeconds": 0.2},
    }
    with FloodServer(status=500).running() as flood:
        with a2a_serve(tmp_path, config) as url:
            client = await client_of(url)
            await sent_task_id(client, with_push("flood me", "ctx-flood", f"{flood.url}/push"))
            await client.close()
            for _ in range(3):  # the first attempt and two retries
                assert flood.arrived.acquire(timeout=HANG_SECONDS), "no push arrived"
        store = next(tmp_path.glob("*.db"))
        timeline = run_in_process(
            "--store",
            f"sqlite:///{store}",
            "--json",
            "audit",
            "timeline",
            "agent:main:a2a:ctx-flood",
        )
    assert timeline.returncode == 0, timeline.stderr
    events = [entry["event"] for entry in json.loads(timeline.stdout)["entries"]]
    failed = events.count("DeliveryAttemptFailed")
    sent = [connection.sent for connection in flood.connections]
    assert len(sent) >= 3
    # Each attempt is one request (no retries inside the client); the one the server's
    # stop interrupted may not be recorded.
    assert failed <= len(sent) <= failed + 1, (events, sent)
    assert max(sent) <= UNREAD_BOUND, sent  # a gateway reading the body lets all 400 MB go
    # Every request that arrived carried the token (one cut short by the server's stop
    # may have arrived without its headers).
    asked = [c.head.lower() for c in flood.connections if c.head]
    assert len(asked) >= 3
    assert all(f"{TOKEN_HEADER}: push-secret".lower().encode() in head for head in asked)


# Push URLs are fenced when set ----------------------------------------------------------


async def test_push_urls_on_refused_addresses_are_refused_when_set_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    with FloodServer(status=200, body=b"{}").running() as receiver:
        refused_urls = [
            f"{receiver.url}/push",  # loopback
            f"http://localhost:{receiver.port}/push",  # a name that resolves to loopback
            f"http://[::1]:{receiver.port}/push",
            "http://169.254.169.254/latest/meta-data/",  # cloud metadata
            "http://[fd00:ec2::254]/latest/meta-data/",
            "http://10.0.0.7:8080/hook",  # private
            "http://0.0.0.0:8080/hook",
        ]
        with a2a_serve(tmp_path, {}) as url:
            client = await client_of(url)
            task_id = await sent_task_id(
                client,
                SendMessageRequest(
                    message=message("a task", "ctx-set"),
                    configuration=SendMessageConfiguration(return_immediately=True),
                ),
            )
            said: dict[str, list[str]] = {}
            for push_url in refused_urls:
                with pytest.raises(A2AError) as on_send:
                    await sent_task_id(client, with_push("x", "ctx-send", push_url))
                with pytest.raises(A2AError) as on_create:
                    await client.create_task_push_notification_config(
                        TaskPushNotificationConfig(task_id=task_id, url=push_url, token="t")
                    )
                said[push_url] = [str(on_send.value), str(on_create.value)]
            await client.close()
    assert receiver.connections == []
    for push_url, texts in said.items():
        for text in texts:
            assert "http.egress.allow" in text, (push_url, text)
    assert "loopback" in said[f"http://localhost:{receiver.port}/push"][0]
    assert "cloud metadata" in said["http://169.254.169.254/latest/meta-data/"][0]
    assert "private" in said["http://10.0.0.7:8080/hook"][0]


async def test_only_operator_tokens_and_sessions_the_config_names_set_push_urls(
    tmp_path: Path,
) -> None:
    with FloodServer(status=200, body=b"{}").running() as receiver:
        with a2a_serve(tmp_path, {"http": {"egress": LOOPBACK}}) as url:
            bob = await client_of(url, BOB)
            with pytest.raises(A2AError) as refused:
                await sent_task_id(bob, with_push("from bob", "ctx-bob", f"{receiver.url}/bob"))
            await bob.close()
        named = {"http": {"egress": {**LOOPBACK, "pushSessions": ["agent:main:bob"]}}}
        with a2a_serve(tmp_path, named) as url:
            bob = await client_of(url, BOB)
            await sent_task_id(bob, with_push("from bob", "ctx-bob", f"{receiver.url}/named"))
            await bob.close()
            assert receiver.arrived.acquire(timeout=HANG_SECONDS)
    assert "may not set push notification URLs" in str(refused.value)
    assert [c.head.split(b" ")[1] for c in receiver.connections] == [b"/named"]


# The client: pinned to its origin, the card's signature checked --------------------


def remote_card(origin: str, signing_key: Any = None) -> bytes:
    card = agent_card(
        "helper",
        AgentEntry(id="helper"),
        base_url=origin,
        push_notifications=False,
        signing_key=signing_key,
    )
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    return json.dumps(agent_card_to_dict(card)).encode()


def send_to_helper(tmp_path: Path, remote: dict[str, Any]) -> Any:
    """`sessions send agent:helper:main` with helper as a remote A2A agent."""
    (tmp_path / "remote.json").write_text(json.dumps({"a2a": {"agents": {"helper": remote}}}))
    config = {
        "tools": {
            "agentToAgent": {"enabled": True, "allow": ["*"]},
            "sessions": {"visibility": "all"},
        },
        "http": {"egress": LOOPBACK},
    }
    (tmp_path / "caller.json").write_text(json.dumps(config))
    store = f"sqlite:///{tmp_path / 'caller.db'}"
    base = ["--store", store, "--config", str(tmp_path / "caller.json")]
    for session, text in (("agent:helper:main", "(remote)"), ("main", "hello")):
        assert run_in_process(*base, "record", session, text).returncode == 0
    return run_in_process(
        *base,
        "--json",
        "sessions",
        "send",
        "agent:helper:main",
        "the secret plan",
        "--runtime",
        str(tmp_path / "remote.json"),
    )


def test_a_card_naming_another_origin_gets_neither_the_token_nor_the_message(
    tmp_path: Path,
) -> None:
    with FloodServer(status=200, body=b"{}").running() as elsewhere:
        card = remote_card(elsewhere.url)
        with FloodServer(status=200, body=card).running() as listed:
            sent = send_to_helper(
                tmp_path, {"url": f"{listed.url}/a2a/helper", "token": "sw-bearer"}
            )
    assert sent.stdout, sent.stderr
    result = json.loads(sent.stdout)
    assert result["status"] == "error", result
    assert f"names {elsewhere.url}/a2a/helper, not on {listed.url}" in result["error"]
    assert elsewhere.connections == []  # no bearer, no message
    assert [c.head.split(b"\r\n")[0] for c in listed.connections] == [
        b"GET /a2a/helper/.well-known/agent-card.json HTTP/1.1"
    ]
    assert b"authorization" not in listed.connections[0].head.lower()  # not even for the card


def test_with_a_card_key_an_unsigned_or_wrongly_signed_card_is_refused_before_sending(
    tmp_path: Path,
) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from sessionwire.application.audit.checkpoint import public_key_text, raw_public_key

    trusted = Ed25519PrivateKey.generate()
    other = Ed25519PrivateKey.generate()
    answers = []
    for signer in (None, other):
        with FloodServer(status=200, body=b"").running() as listed:
            listed.body = remote_card(listed.url, signer)
            sent = send_to_helper(
                tmp_path,
                {
                    "url": f"{listed.url}/a2a/helper",
                    "token": "sw-bearer",
                    "cardKey": public_key_text(raw_public_key(trusted)),
                },
            )
        answers.append(json.loads(sent.stdout))
        assert len(listed.connections) == 1  # the card, and nothing after it
    for answer in answers:
        assert answer["status"] == "error", answer
        assert "is not signed by the configured cardKey" in answer["error"]
        assert "nothing was sent" in answer["error"]


def test_a_gateway_signs_its_card_for_its_public_url_and_a_client_with_its_key_sends(
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "keys" / "card.key"
    made = run_in_process("audit", "keygen", "--key", str(key_file))
    assert made.returncode == 0, made.stderr
    public_key = made.stdout.strip()
    port = free_port()  # known before the server starts: its public URL names it
    origin = f"http://127.0.0.1:{port}"
    name = "signed"
    (tmp_path / f"{name}.json").write_text("{}")
    (tmp_path / f"{name}-agent.json").write_text(
        json.dumps({"rules": [{"step": "primary", "reply": "helper got: {message}"}]})
    )
    (tmp_path / f"{name}-tokens.json").touch(mode=0o600)
    (tmp_path / f"{name}-tokens.json").write_text(
        json.dumps({"tokens": [{"token": OPERATOR, "role": "operator"}]})
    )
    command = (
        f"sessionwire --store sqlite:///{tmp_path / name}.db --config {tmp_path / name}.json "
        f"serve --a2a --port {port} --runtime {tmp_path / name}-agent.json "
        f"--tokens {tmp_path / name}-tokens.json --public-url {origin} "
        f"--checkpoint-key {key_file}"
    )
    with serve_process(command, port=port, env=cli_env(), cwd=str(tmp_path)):
        # The agent is `main` there; here it is `helper`, a remote agent.
        sent = send_to_helper(
            tmp_path, {"url": f"{origin}/a2a/main", "token": OPERATOR, "cardKey": public_key}
        )
    assert sent.stdout, sent.stderr
    result = json.loads(sent.stdout)
    assert result["status"] == "ok", result
    assert result["reply"] == "helper got: the secret plan"
