"""The egress client over real loopback HTTP (contract decision 40, ADR 0040): it connects
to the address it checked (the name kept in Host), refuses what the policy refuses before
connecting, follows no redirect unless told and checks each hop when it does, and reads
no more than the cap. The OpenAI-compatible runtime goes through it; and the A2A server
signs a card only for its configured public URL, whatever Host the request names."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
from chat_server import ChatServer, completion
from egress_rig import LOOPBACK_EGRESS, FloodServer, certificate_for, resolving
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.egress.client import egress_client
from sessionwire.adapters.egress.fence import NameNotResolved, ResponseTooLarge
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
from sessionwire.application.config.gateway_config import ConfigError, EgressConfig
from sessionwire.application.ports.runtime import RunRequest
from sessionwire.domain.egress import EgressRefused
from sessionwire.testing import VirtualClock

OPERATOR = "fence-operator-token-0123456789abcdef"


def egress(**settings: Any) -> EgressConfig:
    return GatewayConfig.load({"http": {"egress": settings}}).http.egress


async def test_a_name_is_connected_to_at_the_address_checked_and_kept_in_host() -> None:
    # peer.test resolves nowhere but through this resolver: the connection went to the
    # address the fence checked, once, and the server was asked for the name.
    asked, resolver = resolving({"peer.test": "127.0.0.1"})
    with FloodServer(status=200, body=b"{}").running() as peer:
        async with egress_client(egress(allow=["127.0.0.1"]), resolver=resolver) as client:
            answer = await client.get(f"http://peer.test:{peer.port}/hello")
    assert answer.status_code == 200
    assert asked == ["peer.test"]
    assert f"host: peer.test:{peer.port}".encode() in peer.connections[0].head.lower()


async def test_over_tls_the_name_goes_as_sni_and_the_certificate_is_checked_against_it(
    tmp_path: Path,
) -> None:
    # The certificate names peer.test only: had the client checked it against the
    # address it connected to, the handshake would fail.
    cert, key = certificate_for("peer.test", tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    names: list[str | None] = []
    server_side.sni_callback = lambda _socket, name, _context: names.append(name)  # type: ignore[assignment,func-returns-value]
    _, resolver = resolving({"peer.test": "127.0.0.1", "other.test": "127.0.0.1"})
    trusting = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(cert)))
    with FloodServer(status=200, body=b"{}", tls=server_side).running() as peer:
        async with egress_client(
            egress(allow=["127.0.0.1"]), transport=trusting, resolver=resolver
        ) as client:
            answer = await client.get(f"https://peer.test:{peer.port}/tls")
            with pytest.raises(httpx.ConnectError, match="certificate"):
                await client.get(f"https://other.test:{peer.port}/tls")
    assert answer.status_code == 200
    assert names == ["peer.test", "other.test"]


@pytest.mark.parametrize(
    ("table", "url", "reason"),
    [
        ({}, "http://127.0.0.1:{port}/", "a loopback address"),
        ({"evil.test": "127.0.0.1"}, "http://evil.test:{port}/", "evil.test (127.0.0.1)"),
        ({"meta.test": "169.254.169.254"}, "http://meta.test/", "a cloud metadata address"),
        ({"v6.test": "::ffff:127.0.0.1"}, "http://v6.test:{port}/", "a loopback address"),
        ({}, "http://[fe80::1]:{port}/", "a link-local address"),
        ({}, "http://192.168.1.1:{port}/", "a private address"),
    ],
)
async def test_what_the_policy_refuses_is_never_connected_to(
    table: dict[str, str], url: str, reason: str
) -> None:
    _, resolver = resolving(table)
    with FloodServer(status=200, body=b"{}").running() as peer:
        async with egress_client(resolver=resolver) as client:
            with pytest.raises(EgressRefused, match=r"http\.egress\.allow") as refused:
                await client.get(url.format(port=peer.port))
    assert reason in str(refused.value)
    assert peer.connections == []


async def test_redirects_are_not_followed_unless_configured_and_each_hop_is_checked() -> None:
    moved = {"Location": "http://169.254.169.254/latest/meta-data/"}
    with FloodServer(status=302, body=b"", headers=moved).running() as peer:
        async with egress_client(egress(allow=["127.0.0.1"])) as client:
            answer = await client.get(f"{peer.url}/start")
        async with egress_client(egress(allow=["127.0.0.1"], followRedirects=True)) as client:
            with pytest.raises(EgressRefused, match="cloud metadata"):
                await client.get(f"{peer.url}/start")
    assert answer.status_code == 302  # handed back, not followed
    assert len(peer.connections) == 2


async def test_an_answer_is_read_no_further_than_the_cap() -> None:
    with FloodServer(status=200).running() as flood:  # 400 MB, lazily
        async with egress_client(
            egress(allow=["127.0.0.1"], maxResponseBytes=1024 * 1024)
        ) as client:
            with pytest.raises(ResponseTooLarge, match="larger than 1048576 bytes"):
                await client.get(f"{flood.url}/big")
    assert flood.connections[0].sent <= 4 * 1024 * 1024, flood.connections[0].sent


async def test_a_compressed_answer_is_refused_so_the_cap_counts_what_is_decoded() -> None:
    with FloodServer(
        status=200, body=b"x" * 64, headers={"Content-Encoding": "gzip"}
    ).running() as peer:
        async with egress_client(egress(allow=["127.0.0.1"])) as client:
            with pytest.raises(Exception, match="gzip-encoded; only identity"):
                await client.get(f"{peer.url}/z")
    assert b"accept-encoding: identity" in peer.connections[0].head.lower()


def test_a_bad_allow_entry_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"http\.egress\.allow.*'10\.0\.0\.0/33'"):
        GatewayConfig.load({"http": {"egress": {"allow": ["10.0.0.0/33"]}}})


# The OpenAI-compatible runtime ---------------------------------------------------------


async def no_transcript(limit: int) -> list[dict[str, Any]]:
    return []


def run_request(clock: VirtualClock) -> RunRequest:
    return RunRequest(
        run_id="r-1",
        session_key="agent:main:main",
        agent_id="main",
        step="primary",
        message="ping",
        context=None,
        clock=clock,
        transcript=no_transcript,
    )


async def test_the_openai_runtime_reaches_a_loopback_server_only_when_it_is_named() -> None:
    with ChatServer().running() as server:
        server.answer(body=completion("pong"))
        refused = OpenAIRuntime({"baseUrl": server.base_url, "model": "m", "maxRetries": 3})
        with pytest.raises(EgressRefused, match="a loopback address"):
            await refused.run(run_request(VirtualClock()))
        assert server.received == []  # refused before anything was sent, and not retried
        named = OpenAIRuntime(
            {"baseUrl": server.base_url, "model": "m"},
            egress=GatewayConfig.load(LOOPBACK_EGRESS).http.egress,
        )
        reply = await named.run(run_request(VirtualClock()))
    assert reply.text == "pong"


async def test_a_name_that_does_not_resolve_is_a_network_error_retried_as_one() -> None:
    asked: list[str] = []

    async def nowhere(host: str, port: int) -> list[Any]:
        asked.append(host)
        raise NameNotResolved(f"cannot resolve {host}: Name or service not known")

    runtime = OpenAIRuntime(
        {
            "baseUrl": "https://llm.nowhere.test/v1",
            "model": "m",
            "maxRetries": 2,
            "backoffSeconds": 0,
        },
        resolver=nowhere,
    )
    with pytest.raises(RuntimeError, match=r"after 3 attempt\(s\): cannot reach .*cannot resolve"):
        await runtime.run(run_request(VirtualClock()))
    assert asked == ["llm.nowhere.test"] * 3


async def test_an_openai_answer_past_the_cap_fails_the_run_and_is_not_retried() -> None:
    with FloodServer(status=200).running() as flood:
        runtime = OpenAIRuntime(
            {"baseUrl": f"{flood.url}/v1", "model": "m", "maxRetries": 3},
            egress=egress(allow=["127.0.0.1"], maxResponseBytes=1024 * 1024),
        )
        with pytest.raises(ResponseTooLarge):
            await runtime.run(run_request(VirtualClock()))
    assert len(flood.connections) == 1
    assert flood.connections[0].sent <= 4 * 1024 * 1024


# The server's card ---------------------------------------------------------------------


FORGED = {
    "Host": "attacker.invalid:8443",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "attacker.invalid:8443",
}


async def test_a_card_is_signed_for_the_public_url_whatever_host_the_request_names() -> None:
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils.signing import create_signature_verifier
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jwt import PyJWK
    from sessionwire.adapters.a2a.agent_cards import public_jwk
    from sessionwire.adapters.a2a.push import A2APushDelivery
    from sessionwire.application.ports.runtime import RecordedDelivery

    key = Ed25519PrivateKey.generate()
    gateway = await Gateway.open(store="memory", delivery=A2APushDelivery(RecordedDelivery()))
    try:
        cards: dict[str, dict[str, Any]] = {}
        for public_url in ("https://gw.example", None):
            app = create_app(
                gateway, OPERATOR, a2a=True, a2a_signing_key=key, public_url=public_url
            )
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1:8765"
            ) as http:
                answer = await http.get("/a2a/main/.well-known/agent-card.json", headers=FORGED)
            assert answer.status_code == 200
            cards[str(public_url)] = answer.json()
    finally:
        await gateway.close()
    configured, unconfigured = cards["https://gw.example"], cards["None"]
    # Every interface, and the URL a 0.3 client reads, is the configured one.
    urls = {i["url"] for i in configured["supportedInterfaces"]} | {configured["url"]}
    assert urls == {"https://gw.example/a2a/main"}
    assert len(configured["supportedInterfaces"]) == 4
    verify = create_signature_verifier(lambda kid, jku: PyJWK(public_jwk(key)), ["EdDSA"])
    verify(parse_agent_card(json.loads(json.dumps(configured))))
    # No public URL: the card names where the request says it went, and is not signed.
    assert "signatures" not in unconfigured
    assert "attacker.invalid" in unconfigured["supportedInterfaces"][0]["url"]
