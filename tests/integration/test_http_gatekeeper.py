"""What the Gatekeeper reads before it answers (issue 36, item 1): nothing on a public
route, nothing on a route that takes no body, at most its limit elsewhere. Each request
is driven over ASGI with a ``receive`` that counts what the app asks of the client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sessionwire import Gateway
from sessionwire.adapters.access.auth import CONSOLE_BODY_BYTES, client_address
from sessionwire.adapters.http.app import create_app
from sessionwire.application.config.gateway_config import HttpConfig

TOKEN = "gatekeeper-token-0123456789abcdefghijklm"
CHUNK = b"[" * 4096


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[Any]:
    gateway = await Gateway.open(store=store_url)
    yield create_app(gateway, TOKEN, a2a=True)
    await gateway.close()


async def ask(
    app: Any, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, int]:
    """The answer's status, and the body bytes the app read (the client has plenty)."""
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += len(CHUNK)
        return {"type": "http.request", "body": CHUNK, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("192.0.2.7", 5000),
        "server": ("gateway", 80),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }
    await app(scope, receive, send)
    return int(sent[0]["status"]), read


PUBLIC = ["/healthz", "/readyz", "/docs", "/openapi.json", "/a2a/main/.well-known/agent-card.json"]
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Sessionwire-Session": "main"}


@pytest.mark.parametrize("path", PUBLIC)
async def test_a_public_route_reads_no_body(app: Any, path: str) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert await ask(app, method, path, {"Content-Length": "40000"}) == (405, 0)
    assert await ask(app, "GET", path, {"Transfer-Encoding": "chunked"}) == (413, 0)


@pytest.mark.parametrize("path", ["/v1/events", "/v1/tools", "/v1/runs", "/console/"])
async def test_a_route_without_a_body_reads_none(app: Any, path: str) -> None:
    assert await ask(app, "GET", path, {**AUTH, "Content-Length": "40000"}) == (413, 0)
    assert await ask(app, "GET", path, {**AUTH, "Transfer-Encoding": "chunked"}) == (413, 0)


async def test_the_console_reads_at_most_a_form(app: Any) -> None:
    declared = {"Content-Length": str(CONSOLE_BODY_BYTES + 1)}
    assert await ask(app, "POST", "/console/login", declared) == (413, 0)
    status, read = await ask(app, "POST", "/console/login", {"Transfer-Encoding": "chunked"})
    assert status == 413
    assert read <= CONSOLE_BODY_BYTES + len(CHUNK)


def test_forwarding_headers_count_only_from_a_trusted_proxy() -> None:
    proxies = HttpConfig.model_validate({"trustedProxies": ["10.0.0.0/8"]}).trusted_networks()
    forwarded = [(b"x-forwarded-for", b"203.0.113.9, 10.1.2.3")]
    behind = {"client": ("10.0.0.1", 1), "headers": forwarded}
    outside = {"client": ("192.0.2.7", 1), "headers": forwarded}
    assert client_address(behind, proxies) == "203.0.113.9"
    assert client_address(outside, proxies) == "192.0.2.7"
    assert client_address(behind) == "10.0.0.1"
    rfc = {"client": ("10.0.0.1", 1), "headers": [(b"forwarded", b'for="[2001:db8::7]:4711"')]}
    assert client_address(rfc, proxies) == "2001:db8::7"
