"""The run routes under scoped tokens on every store, in-process (httpx over ASGI) with a
virtual clock: a run held at its agent stays ``running`` until cancelled, so the cancel
of a running run needs no waiting on real time."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sessionwire import Gateway
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.testing import ScriptedRuntime, VirtualClock

OPERATOR = "operator-token-0123456789abcdefghijklmnop"
MAIN = "main-token-0123456789abcdefghijklmnopqrstu"
WORK = "work-token-0123456789abcdefghijklmnopqrstu"
TOKENS = {
    "tokens": [
        {"tokenSha256": hashlib.sha256(OPERATOR.encode()).hexdigest(), "role": "operator"},
        {"token": MAIN, "session": "main"},
        {"token": WORK, "session": "agent:work:main"},
    ]
}
AGENTS = {
    "rules": [
        {"step": "primary", "match": "^slow", "reply": "late", "delaySeconds": 600},
        {"step": "primary", "reply": "pong"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


def auth(token: str, session: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if session is not None:
        headers["X-Sessionwire-Session"] = session
    return headers


@pytest.fixture
async def rig(store_url: str) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    gateway = await Gateway.open(
        store=store_url, clock=VirtualClock(), runtime=ScriptedRuntime.from_dict(AGENTS)
    )
    for key in ("main", "discord:group:ops", "agent:work:main", "agent:work:discord:group:b"):
        await gateway.record_message(key, role="user", content="hi")
    transport = httpx.ASGITransport(app=create_app(gateway, TokenSet.from_data(TOKENS)))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield gateway, http
    await gateway.close()


async def held(gateway: Gateway, requester: str, target: str) -> str:
    """A run of ``target`` its agent holds (on a clock that only moves when told)."""
    sent = await gateway.call_tool(
        requester, "sessions_send", {"sessionKey": target, "message": "slow", "timeoutSeconds": 0}
    )
    await gateway.wait_idle()
    return str(sent["runId"])


async def test_each_token_sees_and_cancels_only_what_its_session_may_see(rig: Any) -> None:
    gateway, http = rig
    mine = await held(gateway, "main", "discord:group:ops")
    theirs = await held(gateway, "agent:work:main", "agent:work:discord:group:b")

    listed = (await http.get("/v1/runs", headers=auth(MAIN))).json()
    assert [run["runId"] for run in listed["runs"]] == [mine]
    assert (await http.get(f"/v1/runs/{theirs}", headers=auth(MAIN))).status_code == 404
    refused = await http.post(f"/v1/runs/{theirs}/cancel", headers=auth(MAIN))
    assert refused.status_code == 404
    assert (await gateway.run(theirs))["status"] == "running"
    as_other = await http.get("/v1/runs", headers=auth(MAIN, "agent:work:main"))
    assert as_other.status_code == 403

    every = (await http.get("/v1/runs", headers=auth(OPERATOR))).json()
    assert {run["runId"] for run in every["runs"]} == {mine, theirs}
    as_work = (await http.get("/v1/runs", headers=auth(OPERATOR, "agent:work:main"))).json()
    assert [run["runId"] for run in as_work["runs"]] == [theirs]

    cancelled = await http.post(
        f"/v1/runs/{theirs}/cancel", json={"reason": "stop"}, headers=auth(WORK)
    )
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["cancelled"] is True
    assert cancelled.json()["status"] == "cancelled"
    assert (await gateway.run(theirs))["status"] == "cancelled"
    assert (await gateway.run(mine))["status"] == "running"

    running = (await http.get("/v1/runs?status=running", headers=auth(OPERATOR))).json()
    assert [run["runId"] for run in running["runs"]] == [mine]
    again = await http.post(f"/v1/runs/{theirs}/cancel", headers=auth(OPERATOR))
    assert again.status_code == 200
    assert again.json()["cancelled"] is False
