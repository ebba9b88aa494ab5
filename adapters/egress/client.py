"""``egress_client``: the httpx client every outbound request of the gateway is made with
(A2A pushes, remote A2A agents, the OpenAI-compatible runtime; contract decision 40).

From ``http.egress``: the address policy and the response cap (the fence, fence.py),
timeouts, and redirects (none followed unless ``followRedirects``; each hop is a new
request through the fence, so it is checked again). A bearer given as ``PinnedBearer``
goes only to the origin it is pinned to, whatever else the client is asked to reach.
"""

from __future__ import annotations

from collections.abc import Generator

import httpx
from sessionwire.adapters.egress.fence import FencedTransport, Resolver, system_resolver
from sessionwire.application.config.gateway_config import EgressConfig
from sessionwire.domain.egress import Origin


class PinnedBearer(httpx.Auth):
    """``Authorization: Bearer <token>`` on requests to ``origin`` only."""

    def __init__(self, token: str, origin: Origin) -> None:
        self.token = token
        self.origin = origin

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        try:
            pinned = Origin.of(str(request.url)) == self.origin
        except ValueError:
            pinned = False
        if pinned:
            request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def egress_client(
    egress: EgressConfig | None = None,
    *,
    timeout: float | None = None,
    follow_redirects: bool | None = None,
    auth: httpx.Auth | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    resolver: Resolver = system_resolver,
) -> httpx.AsyncClient:
    """A client fenced by ``egress`` (the defaults when None: public addresses only).
    ``timeout`` overrides ``timeoutSeconds``; ``follow_redirects=False`` forbids them
    whatever the config says. ``transport`` is what the fence hands checked requests to
    (tests: an in-process app), never a way around it."""
    settings = egress or EgressConfig()
    follow = settings.followRedirects if follow_redirects is None else follow_redirects
    return httpx.AsyncClient(
        transport=FencedTransport(
            settings.policy, settings.maxResponseBytes, inner=transport, resolver=resolver
        ),
        timeout=timeout if timeout is not None else settings.timeoutSeconds,
        follow_redirects=follow and settings.followRedirects,
        max_redirects=settings.maxRedirects,
        auth=auth,
        # The environment's proxies would be a way around the fence.
        trust_env=False,
    )
