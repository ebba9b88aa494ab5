"""A real HTTP gateway for tests: uvicorn on a free loopback port, in a thread of its own.

The gateway is opened inside the server's event loop (its tasks must live there) and
closed when the server stops.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import log_watch
import uvicorn
from hang_bounds import HANG_SECONDS
from sessionwire import Gateway, SyncGateway
from sessionwire.adapters.access.auth import MAX_BODY_BYTES, FailedAttempts
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.cli.serve import LISTENING as SERVE_LISTENING
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.testkit.internals import internals
from sessionwire.testing import ScriptedRuntime

TOKEN = "test-token-0123456789"

SCRIPT = {
    "rules": [
        {"step": "primary", "match": "^slow", "reply": "late", "delaySeconds": 3},
        {"step": "primary", "reply": "pong: {message}"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_task", "reply": "done"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


class _SignallingServer(uvicorn.Server):
    """uvicorn that sets ``ready`` once its port is open (no polling for it)."""

    def __init__(
        self, config: uvicorn.Config, ready: threading.Event, gateway: Gateway | None = None
    ) -> None:
        super().__init__(config)
        self.ready = ready
        self.gateway = gateway

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # As `serve` does: open event streams end, or uvicorn would wait for them.
        if self.gateway is not None:
            internals(self.gateway).end_subscriptions()
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class LiveServer:
    url: str
    token: str

    def client(self, session: str | None = "main", token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        if session is not None:
            headers["X-Sessionwire-Session"] = session
        return httpx.Client(base_url=self.url, headers=headers, timeout=HANG_SECONDS)


@contextmanager
def live_server(
    store: str,
    *,
    runtime: Any = None,
    config: Any = None,
    token: str | TokenSet = TOKEN,
    max_body_bytes: int = MAX_BODY_BYTES,
    attempts: FailedAttempts | None = None,
) -> Iterator[LiveServer]:
    # These servers answer many deliberate 401s from one address; the failed-attempt
    # limit has its own tests (tests/e2e/test_http_tokens.py).
    attempts = attempts or FailedAttempts(limit=1_000_000)
    port = free_port()
    servers: list[uvicorn.Server] = []
    failures: list[BaseException] = []
    ready = threading.Event()

    async def serve() -> None:
        gateway = await Gateway.open(config=config, store=store, runtime=runtime)
        try:
            app = create_app(gateway, token, max_body_bytes=max_body_bytes, attempts=attempts)
            server = _SignallingServer(
                uvicorn.Config(
                    app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
                ),
                ready,
                gateway,
            )
            servers.append(server)
            await server.serve()
        finally:
            await gateway.close()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as error:  # reported to the test below
            failures.append(error)
        finally:
            ready.set()

    thread = threading.Thread(target=run, name=f"http-gateway:{port}", daemon=True)
    thread.start()
    ready.wait()  # set once the port is open, or the thread has ended
    if not (servers and servers[0].started):
        thread.join()
        raise RuntimeError(f"the HTTP gateway did not start: {failures!r}")
    try:
        clear = token if isinstance(token, str) else ""
        yield LiveServer(url=f"http://127.0.0.1:{port}", token=clear)
    finally:
        servers[0].should_exit = True
        thread.join(30)
    if failures:
        raise failures[0]


def wait_for_its_exchange(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """Wait until the exchange that ``run_id`` began is closed: its reply-back and
    announce steps still add messages after ``sessions_send`` has its reply. Read from the
    event stream of the run's trace (recorded events first, then live ones), so an
    exchange that closed already is found at once. Returns the trace's events up to the
    close; ``client``'s read timeout bounds a wait that never ends."""
    run = client.get(f"/v1/runs/{run_id}")
    assert run.status_code == 200, run.text
    exchange, trace = run.json()["exchangeId"], run.json()["traceId"]
    assert exchange is not None, f"run {run_id} began no exchange"
    seen: list[dict[str, Any]] = []
    with client.stream("GET", "/v1/events", params={"trace": trace}) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            seen.append(event)
            if event["type"] == "ExchangeClosed" and event["streamId"] == exchange:
                return seen
    raise AssertionError(f"the event stream ended before exchange {exchange} closed")


def seed(store: str) -> None:
    """Three sessions of two agents; main has a toolResult message."""
    with SyncGateway.open(store=store) as gateway:
        gateway.record_message("main", role="user", content="hello", channel="webchat")
        gateway.record_message("main", role="assistant", content="hi there")
        gateway.record_message("main", role="toolResult", content="tool output")
        gateway.record_message(
            "discord:group:ops",
            role="user",
            content="deploy done",
            channel="discord",
            chat_type="group",
            display_name="#ops",
        )
        gateway.record_message("agent:work:main", role="user", content="work stuff")


@contextmanager
def scripted_server(store: str) -> Iterator[LiveServer]:
    """A live gateway on ``store`` (seeded) whose agents answer from SCRIPT."""
    seed(store)
    with live_server(store, runtime=ScriptedRuntime.from_dict(SCRIPT)) as live:
        yield live


@contextmanager
def serve_process(
    command: str,
    *,
    port: int,
    env: dict[str, str],
    cwd: str,
    setup: str = "",
    listening: str = SERVE_LISTENING,
) -> Iterator[subprocess.Popen[str]]:
    """``sessionwire serve`` (or another server saying ``listening``) as a shell command
    (after ``setup``) in its own process group, stopped with Ctrl+C (SIGINT) afterwards;
    waits for the line on stderr that says it listens (what it wrote before that is kept
    as ``startup_stderr``)."""
    process = subprocess.Popen(
        ["bash", "-c", f"{setup}\nexec {command}"],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if line.startswith(listening):
                break
        else:
            process.wait()
            raise RuntimeError(f"serve exited with {process.returncode}: {''.join(lines)}")
        process.startup_stderr = "".join(lines)  # type: ignore[attr-defined]
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        # The server's log joins the session's log watch (tests/log_watch.py); the test
        # can still read it from process.stderr.
        if process.stderr is not None and not process.stderr.closed:
            logged = process.stderr.read()
            process.stderr.close()
            process.stderr = io.StringIO(logged)
            log_watch.note_output(logged, secrets=[env.get("SESSIONWIRE_TOKEN")])


def cli_env(**extra: str) -> dict[str, str]:
    """The environment with this interpreter's ``sessionwire`` first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", **extra}
