"""Visibility scopes (decision 28) through the HTTP transport, on every store: a token
bound to a non-main session reaches what its scope allows, by the tools and by the
gateway methods alike, and a hidden session answers exactly as a missing one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.domain.policy import list_warning
from sessionwire.testing import ScriptedRuntime, VirtualClock

CRON = "cron-token-0123456789abcdefghijklmnopqrstu"
MAIN = "main-token-0123456789abcdefghijklmnopqrstu"
TOKENS = {
    "tokens": [
        {"token": CRON, "session": "cron:job"},
        {"token": MAIN, "session": "main"},
    ]
}
TREE_REFUSAL = "Session not found, or not visible under tools.sessions.visibility=tree."


@pytest.fixture
async def http(store_url: str, request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    config = GatewayConfig.model_validate(getattr(request, "param", {}))
    gateway = await Gateway.open(
        config=config,
        store=store_url,
        clock=VirtualClock(),
        runtime=ScriptedRuntime.from_dict({"rules": [{"reply": "REPLY_SKIP"}]}),
    )
    await gateway.record_message("main", role="user", content="main's secret")
    await gateway.record_message("cron:job", role="user", content="the job's own line")
    await gateway.record_message("discord:group:dev", role="user", content="dev's secret")
    transport = httpx.ASGITransport(app=create_app(gateway, TokenSet.from_data(TOKENS)))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client
    await gateway.close()


def bearer(token: str) -> dict[str, str]:
    session = "cron:job" if token == CRON else "main"
    return {"Authorization": f"Bearer {token}", "X-Sessionwire-Session": session}


async def history(http: httpx.AsyncClient, token: str, key: str) -> httpx.Response:
    return await http.post(
        "/v1/tools/sessions_history", json={"sessionKey": key}, headers=bearer(token)
    )


async def test_a_non_main_token_sees_its_own_session_only_under_the_default(
    http: httpx.AsyncClient,
) -> None:
    listed = await http.post("/v1/tools/sessions_list", json={}, headers=bearer(CRON))
    assert [row["key"] for row in listed.json()["sessions"]] == ["agent:main:cron:job"]
    assert listed.json()["visibility"] == {
        "mode": "tree",
        "restricted": True,
        "warning": list_warning("tree"),
    }
    own = await history(http, CRON, "cron:job")
    assert [m["content"][0]["text"] for m in own.json()["messages"]] == ["the job's own line"]
    refused = await history(http, CRON, "main")
    assert refused.json() == {
        "status": "forbidden",
        "tool": "sessions_history",
        "error": TREE_REFUSAL,
    }
    method = await http.post(
        "/v1/methods/chat.history", json={"sessionKey": "main"}, headers=bearer(CRON)
    )
    assert method.status_code == 403
    assert "secret" not in method.text
    listed_by_method = await http.post("/v1/methods/sessions.list", json={}, headers=bearer(CRON))
    assert [row["key"] for row in listed_by_method.json()["sessions"]] == ["agent:main:cron:job"]


async def test_a_hidden_session_answers_as_a_missing_one(http: httpx.AsyncClient) -> None:
    hidden = await history(http, CRON, "discord:group:dev")
    missing = await history(http, CRON, "discord:group:nobody")
    assert hidden.status_code == missing.status_code == 200
    assert hidden.content.replace(b"dev", b"X") == missing.content.replace(b"nobody", b"X")
    hidden_send = await http.post(
        "/v1/tools/sessions_send",
        json={"sessionKey": "discord:group:dev", "message": "hi", "timeoutSeconds": 0},
        headers=bearer(CRON),
    )
    missing_send = await http.post(
        "/v1/tools/sessions_send",
        json={"sessionKey": "discord:group:nobody", "message": "hi", "timeoutSeconds": 0},
        headers=bearer(CRON),
    )
    shown, absent = hidden_send.json(), missing_send.json()
    shown.pop("runId"), absent.pop("runId")  # a fresh id for every call
    assert shown["status"] == absent["status"] == "forbidden"
    assert {**shown, "sessionKey": "X"} == {**absent, "sessionKey": "X"}


async def test_main_reaches_its_agent_under_the_default(http: httpx.AsyncClient) -> None:
    listed = await http.post("/v1/tools/sessions_list", json={}, headers=bearer(MAIN))
    assert len(listed.json()["sessions"]) == 3
    assert listed.json()["visibility"]["mode"] == "tree"
    assert "dev's secret" in (await history(http, MAIN, "discord:group:dev")).text


@pytest.mark.parametrize("http", [{"tools": {"sessions": {"visibility": "agent"}}}], indirect=True)
async def test_agent_scope_opens_the_agent_to_a_non_main_token(http: httpx.AsyncClient) -> None:
    assert "main's secret" in (await history(http, CRON, "main")).text
    listed = await http.post("/v1/tools/sessions_list", json={}, headers=bearer(CRON))
    assert len(listed.json()["sessions"]) == 3
    assert listed.json()["visibility"]["mode"] == "agent"


@pytest.mark.parametrize("http", [{"tools": {"sessions": {"visibility": "self"}}}], indirect=True)
async def test_self_scope_holds_main_to_its_own_session(http: httpx.AsyncClient) -> None:
    refused = await history(http, MAIN, "discord:group:dev")
    assert refused.json()["error"] == (
        "Session not found, or not visible under tools.sessions.visibility=self."
    )
    listed = await http.post("/v1/tools/sessions_list", json={}, headers=bearer(MAIN))
    assert [row["key"] for row in listed.json()["sessions"]] == ["main"]
