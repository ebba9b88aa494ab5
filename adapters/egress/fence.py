"""The fence under every outbound request: an httpx transport that resolves the host,
checks each address against the policy (domain/egress.py), and connects to the address
it checked, keeping the name in ``Host`` and in TLS's SNI (and certificate check): a name
that resolves to a public address at the check and to loopback at the connect (DNS
rebinding) is connected to where it was checked. Each request is one check, so each
redirect hop, when redirects are followed, is checked again.

Answers are read through a counter: past ``max_bytes`` the read stops, the connection is
closed, and ``ResponseTooLarge`` is raised; compressed answers are refused (we ask for
``identity``), so the cap counts what would be decoded.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
from sessionwire.domain.egress import (
    EgressPolicy,
    EgressRefused,
    IPAddress,
    Origin,
    address_of,
)
from sessionwire.domain.errors import SessionwireError

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
"""``(host, port) -> addresses``: what a name resolves to, in the order to try them."""


class EgressFailed(SessionwireError, RuntimeError):
    """An outbound answer the gateway will not take (too large, compressed, no address)."""


class ResponseTooLarge(EgressFailed):
    """The answer went past ``http.egress.maxResponseBytes``; it was not read further."""


class NameNotResolved(SessionwireError, httpx.ConnectError):
    """A host that resolves to no address now: a network error like a refused connection
    (retried where those are), not a refusal by the policy."""


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The system's resolver, off the event loop (asyncio runs getaddrinfo in a thread)."""
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise NameNotResolved(f"cannot resolve {host}: {error.strerror}") from None
    addresses: list[IPAddress] = []
    for *_, sockaddr in found:
        address = address_of(str(sockaddr[0]).split("%", 1)[0])
        if address is not None and address not in addresses:
            addresses.append(address)
    return addresses


async def checked_address(
    policy: EgressPolicy, origin: Origin, resolver: Resolver = system_resolver
) -> IPAddress:
    """The first address ``origin``'s host resolves to that the policy allows; if none
    does, the refusal of the first (EgressRefused)."""
    literal = address_of(origin.host)
    addresses = [literal] if literal is not None else await resolver(origin.host, origin.port)
    if not addresses:
        raise NameNotResolved(f"{origin.host} resolves to no address")
    refusal: EgressRefused | None = None
    for address in addresses:
        try:
            policy.check(origin, address)
        except EgressRefused as refused:
            refusal = refusal or refused
            continue
        return address
    assert refusal is not None
    raise refusal


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, max_bytes: int, url: str) -> None:
        self.inner = inner
        self.max_bytes = max_bytes
        self.url = url
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.read += len(chunk)
            if self.read > self.max_bytes:
                await self.inner.aclose()
                raise ResponseTooLarge(
                    f"the answer from {self.url} is larger than {self.max_bytes} bytes "
                    "(http.egress.maxResponseBytes): not read further"
                )
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class FencedTransport(httpx.AsyncBaseTransport):
    """Checks, then connects to the checked address; caps what is read of the answer.

    ``inner`` is where the request goes once checked (httpx's own network transport by
    default; a test may hand an in-process one: it is fenced the same)."""

    def __init__(
        self,
        policy: EgressPolicy,
        max_bytes: int,
        *,
        inner: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.policy = policy
        self.max_bytes = max_bytes
        self.inner = inner or httpx.AsyncHTTPTransport(retries=0)
        self.resolver = resolver

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        try:
            origin = Origin.of(str(url))
        except ValueError as error:
            raise EgressRefused(f"refused to send: {error}") from None
        address = await checked_address(self.policy, origin, self.resolver)
        if address_of(url.host) is None:
            # Connect to the address checked, not to whatever the name says next time;
            # Host (already set from the URL) and SNI keep the name.
            request.url = url.copy_with(host=str(address))
            if origin.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": url.host}
        request.headers["Accept-Encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        request.url = url
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise EgressFailed(
                f"the answer from {url} is {encoding}-encoded; only identity is accepted"
            )
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self.max_bytes, str(url)),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
