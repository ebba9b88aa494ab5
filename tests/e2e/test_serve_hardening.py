"""Issue 36's HTTP findings replayed against a real ``sessionwire serve`` over loopback:
an unauthenticated body that froze the server, the failed-token limiter that locked out
the valid token and was bypassed by a rotating ``X-Forwarded-For``, and a grant that
could hold every connection and stream of the server."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from hang_bounds import HANG_SECONDS
from live_http import cli_env, free_port, serve_process
from sessionwire.adapters.mcp.server import LISTENING as MCP_LISTENING

TOKEN = "serve-hardening-token-0123456789abcdefgh"
OTHER = "other-grant-token-0123456789abcdefghijkl"
# The body: brackets, then an unterminated string of escaped quotes.
ATTACK = b"[" * 40_000 + b'"' + b'\\"' * 20_000
# A GET /healthz answers well within this even on a loaded machine; the unfixed server
# took more than 20 s while it scanned the attack.
PROMPT_SECONDS = 5.0


@contextmanager
def served(tmp_path: Path, config: dict[str, Any] | None = None) -> Iterator[str]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": TOKEN, "role": "operator"},
                    {"token": OTHER, "session": "main"},
                ]
            }
        )
    )
    tokens.chmod(0o600)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config or {}))
    port = free_port()
    command = (
        f"sessionwire --store sqlite:///{tmp_path}/s.db --config {config_file} "
        f"serve --port {port} --tokens {tokens}"
    )
    with serve_process(command, port=port, env=cli_env(), cwd=str(tmp_path)):
        yield f"http://127.0.0.1:{port}"


def _raw_post(url: str, path: str, body: bytes, headers: str = "") -> bytes:
    """POST ``body`` on a socket of its own; the status line (b"" if none came)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=HANG_SECONDS) as connection:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{headers}\r\n"
        )
        connection.sendall(head.encode())
        with contextlib.suppress(OSError):  # it may answer and close before the body is in
            connection.sendall(body)
        try:
            return connection.recv(4096).split(b"\r\n", 1)[0]
        except OSError:
            return b""


def test_a_public_route_takes_no_body_and_the_server_keeps_answering(tmp_path: Path) -> None:
    with served(tmp_path) as url:
        statuses: dict[str, bytes] = {}

        def attack(path: str) -> None:
            statuses[path] = _raw_post(url, path, ATTACK)

        attackers = [
            threading.Thread(target=attack, args=(path,))
            for path in ("/healthz", "/readyz", "/docs", "/openapi.json")
        ]
        for thread in attackers:
            thread.start()
        started = time.monotonic()
        health = httpx.get(f"{url}/healthz", timeout=PROMPT_SECONDS)
        answered_in = time.monotonic() - started
        for thread in attackers:
            thread.join(HANG_SECONDS)
        # Behind a token, the same body is refused as too deep, at once.
        auth = f"Authorization: Bearer {TOKEN}\r\nX-Sessionwire-Session: main\r\n"
        deep = _raw_post(url, "/v1/tools/sessions_list", ATTACK, auth)
        listed = httpx.post(
            f"{url}/v1/tools/sessions_list",
            json={},
            headers={"Authorization": f"Bearer {TOKEN}", "X-Sessionwire-Session": "main"},
            timeout=PROMPT_SECONDS,
        )
    assert health.status_code == 200
    assert answered_in < PROMPT_SECONDS
    assert statuses == dict.fromkeys(
        ("/healthz", "/readyz", "/docs", "/openapi.json"), b"HTTP/1.1 405 Method Not Allowed"
    )
    assert deep == b"HTTP/1.1 400 Bad Request"
    assert listed.status_code == 200


def test_wrong_tokens_never_lock_out_the_valid_one_and_forwarding_headers_change_nothing(
    tmp_path: Path,
) -> None:
    with served(tmp_path) as url, httpx.Client(base_url=url, timeout=HANG_SECONDS) as http:
        session = {"X-Sessionwire-Session": "main"}
        wrong = [
            http.post(
                "/v1/tools/sessions_list",
                json={},
                headers={"Authorization": f"Bearer wrong-{n}", **session},
            ).status_code
            for n in range(12)
        ]
        valid = http.post(
            "/v1/tools/sessions_list",
            json={},
            headers={"Authorization": f"Bearer {TOKEN}", **session},
        )
        # No proxy is trusted (http.trustedProxies is empty): a forwarding header from the
        # peer is not read, so rotating it makes each guess no other client's.
        rotated = [
            http.post(
                "/v1/tools/sessions_list",
                json={},
                headers={
                    "Authorization": f"Bearer {n:08d}-guess",
                    "X-Forwarded-For": f"203.0.113.{n}",
                    "Forwarded": f"for=198.51.100.{n}",
                    **session,
                },
            ).status_code
            for n in range(60)
        ]
    assert wrong[:10] == [401] * 10
    assert wrong[10:] == [429, 429]
    assert valid.status_code == 200
    assert set(rotated) == {429}


@contextmanager
def event_stream(url: str, token: str) -> Iterator[httpx.Response]:
    with (
        httpx.Client(base_url=url, timeout=HANG_SECONDS) as http,
        http.stream(
            "GET",
            "/v1/events",
            headers={"Authorization": f"Bearer {token}", "X-Sessionwire-Session": "main"},
        ) as stream,
    ):
        yield stream


@contextmanager
def slow_upload(url: str, token: str) -> Iterator[None]:
    """A request whose body has not all come: it holds its connection meanwhile."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=HANG_SECONDS) as connection:
        connection.sendall(
            f"POST /v1/tools/sessions_list HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nX-Sessionwire-Session: main\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
        )
        # The server holds it once it answers another request of the same grant: a
        # request on a connection of its own, which completes before the next one starts.
        httpx.get(f"{url}/healthz", timeout=HANG_SECONDS)
        yield


def test_a_grant_holds_at_most_its_share_of_streams_and_connections(tmp_path: Path) -> None:
    limits = {"http": {"limits": {"streamsPerGrant": 2, "connectionsPerGrant": 3}}}
    with served(tmp_path, limits) as url, ExitStack() as streams:
        held = [streams.enter_context(event_stream(url, TOKEN)).status_code for _ in range(2)]
        with event_stream(url, TOKEN) as third:
            third_status, retry = third.status_code, third.headers.get("Retry-After")
        with event_stream(url, OTHER) as others:
            others_status = others.status_code
        # Two streams and a body still on its way: the grant's three connections.
        ask = {"Authorization": f"Bearer {TOKEN}", "X-Sessionwire-Session": "main"}
        with slow_upload(url, TOKEN):
            over = httpx.post(
                f"{url}/v1/tools/sessions_list", json={}, headers=ask, timeout=HANG_SECONDS
            )
        listed = httpx.post(
            f"{url}/v1/tools/sessions_list", json={}, headers=ask, timeout=HANG_SECONDS
        )
        held.append(streams.enter_context(event_stream(url, OTHER)).status_code)
        streams.close()  # every stream ends: the grant's share is free again
        with event_stream(url, TOKEN) as again:
            again_status = again.status_code
    assert held == [200, 200, 200]
    assert (third_status, retry) == (503, "1")
    assert others_status == 200
    assert over.status_code == 503
    assert "holds 3 requests open" in over.json()["error"]["message"]
    assert listed.status_code == 200
    assert again_status == 200


@contextmanager
def mcp_over_http(tmp_path: Path) -> Iterator[str]:
    """``sessionwire mcp --http``: the same Gatekeeper in front of another app."""
    port = free_port()
    command = (
        f"sessionwire --store sqlite:///{tmp_path}/m.db mcp --http --port {port} --session main"
    )
    env = cli_env(SESSIONWIRE_TOKEN=TOKEN)
    with serve_process(command, port=port, env=env, cwd=str(tmp_path), listening=MCP_LISTENING):
        yield f"http://127.0.0.1:{port}"


def test_mcp_over_http_has_the_same_limits(tmp_path: Path) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    with mcp_over_http(tmp_path) as url, httpx.Client(base_url=url, timeout=HANG_SECONDS) as http:
        public = _raw_post(url, "/healthz", ATTACK)
        wrong = [
            http.post(
                "/mcp",
                json=listing,
                headers={"Authorization": f"Bearer wrong-{n}", **accept},
            ).status_code
            for n in range(12)
        ]
        valid = http.post(
            "/mcp", json=listing, headers={"Authorization": f"Bearer {TOKEN}", **accept}
        )
        rotated = {
            http.post(
                "/mcp",
                json=listing,
                headers={
                    "Authorization": f"Bearer {n:08d}-guess",
                    "X-Forwarded-For": f"203.0.113.{n}",
                    **accept,
                },
            ).status_code
            for n in range(20)
        }
    assert public == b"HTTP/1.1 405 Method Not Allowed"
    assert wrong == [401] * 10 + [429, 429]
    assert valid.status_code == 200, valid.text
    assert rotated == {429}
