"""Every current A2A client against ``serve --a2a`` (decision 38, ADR 0046): the card
declares JSON-RPC and HTTP+JSON (REST) at 1.0 and 0.3; the a2a-sdk 1.3 client's push
configs over REST, the a2a-sdk 0.3.26 client (in a virtual environment of its own) over
both bindings, plain REST calls with httpx, and a request without ``A2A-Version`` taken
as 0.3. (tests/e2e/test_a2a.py drives the 1.3 client, sends and streams on both
bindings, restarts included.)

The 0.3 client's environment is built once under the user's cache directory and reused;
without a network or pip it cannot be built, and its test skips saying so, except under
``CI=true``, where that is a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import TransportProtocol
from chat_server import ChatServer, completion
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from egress_rig import LOOPBACK_EGRESS
from hang_bounds import HANG_SECONDS
from live_http import cli_env, free_port, serve_process
from sessionwire.adapters.a2a.agent_cards import public_jwk
from test_a2a import (
    OPERATOR,
    OTHER,
    Served,
    message,
    push_receiver,
    sdk_client,
    server_on,
    state_name,
)

# With its signing extra: the 0.3 client checks the card's signature too.
A2A_V03 = "a2a-sdk[signing]==0.3.26"
V03_ENVIRONMENT = "a2a-sdk-0.3.26-signing"
V03_CLIENT = Path(__file__).parent.parent / "a2a_v03_client.py"
# Installing a2a-sdk and its dependencies: a minute on this machine, more on a slow link.
INSTALL_SECONDS = 600


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sessionwire-tests"


def _ready(venv: Path) -> bool:
    return (venv / "installed").is_file() and (venv / "bin" / "python").exists()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the A2A 0.3 client's tests, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def v03_python() -> Path:
    """The interpreter of a virtual environment holding a2a-sdk 0.3.26 (the suite's own
    is 1.x): built from nothing at the first run, then reused. Built beside its place
    and moved there whole, so test processes building it at once never see half of one."""
    venv = _cache_root() / f"{V03_ENVIRONMENT}-py{sys.version_info[0]}{sys.version_info[1]}"
    if _ready(venv):
        return venv / "bin" / "python"
    building = venv.with_name(f"{venv.name}.{os.getpid()}.building")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    steps = (
        [sys.executable, "-m", "venv", str(building)],
        [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", A2A_V03],
    )
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_SECONDS)
        except subprocess.TimeoutExpired:
            shutil.rmtree(building, ignore_errors=True)
            _unavailable(f"installing {A2A_V03} took over {INSTALL_SECONDS} s")
        if done.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            _unavailable(
                f"{A2A_V03} could not be installed (no network or pip?): "
                f"{(done.stderr or done.stdout).strip()[-500:]}"
            )
    (building / "installed").write_text(A2A_V03 + "\n")
    try:
        building.rename(venv)
    except OSError:
        # Another test process got there first: its environment is as good.
        shutil.rmtree(building, ignore_errors=True)
    assert _ready(venv), f"no environment at {venv}"
    return venv / "bin" / "python"


def card_of(served: Served) -> dict[str, Any]:
    answer = httpx.get(served.agent() + "/.well-known/agent-card.json", timeout=HANG_SECONDS)
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


def authorized(token: str = OPERATOR, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


# The card ------------------------------------------------------------------------------


def test_the_card_declares_both_bindings_at_1_0_and_0_3_on_one_url(tmp_path: Path) -> None:
    with server_on(tmp_path) as served:
        card = card_of(served)
        # The REST binding's paths are not the app's root: the console is still there.
        console = httpx.get(served.url + "/console/", headers=authorized(), timeout=HANG_SECONDS)
    interfaces = [
        (i["protocolBinding"], i["protocolVersion"], i["url"]) for i in card["supportedInterfaces"]
    ]
    assert interfaces == [
        ("JSONRPC", "1.0", served.agent()),
        ("HTTP+JSON", "1.0", served.agent()),
        ("JSONRPC", "0.3", served.agent()),
        ("HTTP+JSON", "0.3", served.agent()),
    ]
    # What a 0.3 client reads: the first 0.3 interface, then the others of 0.3.
    assert card["protocolVersion"] == "0.3"
    assert card["url"] == served.agent()
    assert card["preferredTransport"] == "JSONRPC"
    assert card["additionalInterfaces"] == [{"transport": "HTTP+JSON", "url": served.agent()}]
    assert card["security"] == [{"bearer": []}]
    assert console.status_code == 200


# The 1.3 client over REST ---------------------------------------------------------------
# (tests/e2e/test_a2a.py sends, reads, lists, streams, resubscribes and cancels on both
# bindings; here the push configs' methods, which only REST routes by path.)


async def test_the_1_3_client_over_rest_keeps_reads_withdraws_and_sends_push_configs(
    tmp_path: Path,
) -> None:
    with push_receiver(fail_first=0) as receiver, server_on(tmp_path) as served:
        client = await sdk_client(served, binding=TransportProtocol.HTTP_JSON)
        stream = client.send_message(SendMessageRequest(message=message("wait on rest")))
        task_id = (await stream.__anext__()).task.id
        await stream.aclose()
        for config_id in ("p-rest", "p-gone"):
            config = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, id=config_id, url=receiver.url)
            )
        kept = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="p-rest")
        )
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="p-gone")
        )
        configs = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert await asyncio.to_thread(receiver.accepted.wait, 60)
        await client.close()
    assert (config.id, kept.url) == ("p-gone", receiver.url)
    assert [c.id for c in configs.configs] == ["p-rest"]
    assert state_name(cancelled.status.state) == "TASK_STATE_CANCELED"
    assert receiver.bodies[-1][1]["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert len(receiver.bodies) == 1  # the withdrawn config was sent nothing


# The 0.3 client -------------------------------------------------------------------------


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_0_3_client_reads_the_card_and_does_every_call_it_has(
    tmp_path: Path, v03_python: Path, binding: str
) -> None:
    key = Ed25519PrivateKey.generate()
    with push_receiver(fail_first=0) as receiver, server_on(tmp_path, key) as served:
        args = {
            "agent": served.agent(),
            "token": OPERATOR,
            "other": OTHER,
            "binding": binding,
            "push": receiver.url,
            "jwk": public_jwk(key),
        }
        ran = subprocess.run(
            [str(v03_python), str(V03_CLIENT), json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
        )
        assert ran.returncode == 0, ran.stderr
        assert receiver.accepted.wait(HANG_SECONDS)
    seen = json.loads(ran.stdout)
    assert seen["card"] == {
        "protocolVersion": "0.3",
        "preferredTransport": "JSONRPC",
        "url": served.agent(),
        "transports": ["HTTP+JSON"],
        "skills": ["pong"],
        "verified": True,  # the signature over the card as 0.3 reads it
    }
    context_id = f"ctx-03-{binding.replace('+', '-').lower()}"
    assert seen["sent"] == {"state": "completed", "contextId": context_id, "artifact": "pong: hi"}
    assert seen["got"] == {"id": True, "state": "completed", "texts": ["hi", "pong: hi"]}
    assert seen["streamed"] == {
        "first": "working",
        "resubscribed": True,
        "cancelled": "canceled",
        "last": "canceled",
    }
    assert seen["push"]["url"] == receiver.url
    # Set by a 0.3 call, the notification is 0.3's: the bare task, as 0.3 shows it.
    pushed = receiver.bodies[-1][1]
    assert (pushed["kind"], pushed["id"]) == ("task", seen["push"]["taskId"])
    assert pushed["status"]["state"] == "completed"
    assert pushed["artifacts"][0]["parts"][0] == {"kind": "text", "text": "pong: push me"}
    assert receiver.bodies[-1][2] == "receiver-03"
    # Another session's caller: the task it may not see is answered as a missing one.
    assert seen["hidden"] == seen["missing"]
    assert ("-32001" if binding == "JSONRPC" else "404") in seen["hidden"]


# Plain requests ---------------------------------------------------------------------------


def test_plain_rest_calls_with_httpx_at_1_0_and_at_0_3(tmp_path: Path) -> None:
    sent = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "plain"}]}
    # 0.3's REST binding is the JSON of its protocol buffers: parts are ``content``.
    legacy = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "content": [{"text": "plain 0.3"}],
    }
    with server_on(tmp_path) as served, httpx.Client(timeout=HANG_SECONDS) as http:
        current = authorized(**{"A2A-Version": "1.0"})
        answered = http.post(
            served.agent() + "/message:send", json={"message": sent}, headers=current
        )
        task_id = answered.json()["task"]["id"]
        fetched = http.get(served.agent() + f"/tasks/{task_id}", headers=current)
        listed = http.get(served.agent() + "/tasks", headers=current)
        tokenless = http.post(
            served.agent() + "/message:send", json={"message": sent}, headers={"A2A-Version": "1.0"}
        )
        # No A2A-Version: a 0.3 request. The 0.3 paths answer it; the 1.0 ones refuse it.
        old = http.post(
            served.agent() + "/v1/message:send", json={"message": legacy}, headers=authorized()
        )
        unversioned = http.post(
            served.agent() + "/message:send", json={"message": sent}, headers=authorized()
        )
    assert answered.status_code == 200, answered.text
    assert answered.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fetched.json()["artifacts"][0]["parts"][0]["text"] == "pong: plain"
    assert [t["id"] for t in listed.json()["tasks"]] == [task_id]
    assert tokenless.status_code == 401
    assert old.status_code == 200, old.text
    assert old.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert old.json()["task"]["artifacts"][0]["parts"][0]["text"] == "pong: plain 0.3"
    assert unversioned.status_code == 400
    assert "A2A version '0.3' is not supported" in unversioned.json()["error"]["message"]


def test_a_json_rpc_request_without_a2a_version_is_taken_as_0_3(tmp_path: Path) -> None:
    legacy = {
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": "no header"}],
        "contextId": "ctx-plain",
    }

    def call(method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = httpx.post(
            served.agent(), json=body, headers=authorized(**headers), timeout=HANG_SECONDS
        )
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()
        return result

    with server_on(tmp_path) as served:
        sent = call("message/send", {"message": legacy})
        got = call("tasks/get", {"id": sent["result"]["id"]})
        current = call("GetTask", {"id": sent["result"]["id"]}, **{"A2A-Version": "1.0"})
        unversioned = call("GetTask", {"id": sent["result"]["id"]})
        mislabelled = call("tasks/get", {"id": sent["result"]["id"]}, **{"A2A-Version": "1.0"})
    assert sent["result"]["kind"] == "task"
    assert sent["result"]["status"]["state"] == "completed"
    assert sent["result"]["contextId"] == "ctx-plain"
    assert got["result"]["artifacts"][0]["parts"][0] == {"kind": "text", "text": "pong: no header"}
    # One task, whichever version reads it.
    assert current["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # A 1.0 method without the header, or a 0.3 one labelled 1.0: the version is refused.
    assert unversioned["error"]["code"] == -32009
    assert "A2A version '0.3' is not supported" in unversioned["error"]["message"]
    assert "A2A version '1.0' is not supported" in mislabelled["error"]["message"]


# A 0.3 client's task survives kill -9 ---------------------------------------------------


def _events(http: httpx.Client, url: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC results a streaming call's Server-Sent Events carry, as they come."""
    with http.stream("POST", url, json=body, headers=authorized()) as answer:
        for line in answer.iter_lines():
            if line.startswith("data:"):
                yield json.loads(line[len("data:") :])["result"]


def test_a_task_a_0_3_client_started_survives_kill_9_and_ends_once(tmp_path: Path) -> None:
    """``serve --a2a`` killed with SIGKILL while a 0.3 client's task is with its agent:
    the next ``serve`` on the store resumes the run, a 0.3 resubscribe follows it to its
    end, and the task has one reply."""
    store = f"sqlite:///{tmp_path / 'a2a.db'}"
    (tmp_path / "config.json").write_text(json.dumps(LOOPBACK_EGRESS))
    gate = threading.Event()
    legacy = {
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": "survive"}],
        "contextId": "ctx-kill",
    }
    with ChatServer().running() as chat, httpx.Client(timeout=HANG_SECONDS) as http:
        for _ in range(2):  # the killed gateway's request, then the resumed run's
            chat.answer(body=completion("survived"), gate=gate)
        (tmp_path / "agents.yaml").write_text(
            f"openai:\n  baseUrl: {chat.base_url}\n  model: fake-1\n"
        )

        def serving() -> Any:
            port = free_port()
            command = (
                f"sessionwire --store {store} --config {tmp_path / 'config.json'} serve "
                f"--a2a --runtime {tmp_path / 'agents.yaml'} --port {port}"
            )
            env = cli_env(SESSIONWIRE_TOKEN=OPERATOR)
            return serve_process(command, port=port, env=env, cwd=str(tmp_path)), port

        first, port = serving()
        with first as process:
            agent = f"http://127.0.0.1:{port}/a2a/main"
            call = {"jsonrpc": "2.0", "id": 1, "method": "message/stream"}
            for event in _events(http, agent, {**call, "params": {"message": legacy}}):
                if event.get("status", {}).get("state") == "working":
                    task_id = event.get("taskId") or event["id"]
                    break
            os.killpg(process.pid, signal.SIGKILL)
            assert process.wait(HANG_SECONDS) == -signal.SIGKILL
        second, port = serving()
        with second:
            agent = f"http://127.0.0.1:{port}/a2a/main"
            call = {"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe"}
            states = []
            for event in _events(http, agent, {**call, "params": {"id": task_id}}):
                if "status" in event:
                    states.append(event["status"]["state"])
                    gate.set()  # subscribed: the agent may answer now
            got = http.post(
                agent,
                json={"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": task_id}},
                headers=authorized(),
            ).json()["result"]
    assert states[-1] == "completed"
    assert got["status"]["state"] == "completed"
    replies = [m for m in got["history"] if m["role"] == "agent"]
    assert [m["parts"][0]["text"] for m in replies] == ["survived"]
