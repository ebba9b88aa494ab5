"""Scoped HTTP tokens (contract decision 22; issue 16, findings 1, 2, 5 and 9).

In-process (httpx over ASGI) on every store: a session-bound token acts only as its
session and meets the tools' policy on every route, the gateway methods included; an
operator token names any requester. The token is checked before the body is read, failed
attempts are limited, a deep JSON body is a clear 400, and no log line carries a token.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.auth import FailedAttempts
from sessionwire.adapters.access.tokens import TokenFileError, TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.testing import ScriptedRuntime, VirtualClock

OPERATOR = "operator-token-0123456789abcdefghijklmnop"
MAIN = "main-token-0123456789abcdefghijklmnopqrstu"
JURGEN = "jurgen-token-0123456789abcdefghijklmnopqr"
TOKENS = {
    "tokens": [
        {"tokenSha256": hashlib.sha256(OPERATOR.encode()).hexdigest(), "role": "operator"},
        {"token": MAIN, "session": "main"},
        {"token": JURGEN, "session": "discord:group:jürgen"},
    ]
}
SANDBOXED = {"agents": {"defaults": {"sandbox": {"mode": "all"}}}}
NOT_VISIBLE = "Session not visible from this sandboxed agent session: cron:job"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def rig(
    store_url: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient, Clock]]:
    config = GatewayConfig.model_validate(getattr(request, "param", {}))
    gateway = await Gateway.open(
        config=config,
        store=store_url,
        clock=VirtualClock(),
        runtime=ScriptedRuntime.from_dict({"rules": [{"reply": "REPLY_SKIP"}]}),
    )
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message("cron:job", role="user", content="secret of the cron job")
    await gateway.record_message("agent:other:main", role="user", content="other's secret")
    clock = Clock()
    app = create_app(
        gateway, TokenSet.from_data(TOKENS), attempts=FailedAttempts(limit=3, now=clock)
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield gateway, http, clock
    await gateway.close()


def headers(token: str, session: str = "main") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Sessionwire-Session": session}


async def test_a_bound_token_cannot_name_another_requester(rig: Any) -> None:
    _, http, _ = rig
    as_other = await http.post(
        "/v1/tools/sessions_list", json={}, headers=headers(MAIN, "cron:job")
    )
    assert as_other.status_code == 403
    assert as_other.json()["error"]["code"] == "forbidden"
    as_itself = await http.post(
        "/v1/tools/sessions_list", json={}, headers=headers(MAIN, "agent:main:main")
    )
    assert as_itself.status_code == 200
    operator = await http.post(
        "/v1/tools/sessions_list", json={}, headers=headers(OPERATOR, "cron:job")
    )
    assert operator.status_code == 200


async def test_the_session_header_is_read_as_utf8(rig: Any) -> None:
    _, http, _ = rig
    raw = {
        "Authorization": f"Bearer {JURGEN}",
        "X-Sessionwire-Session": "discord:group:jürgen".encode(),
    }
    answer = await http.post("/v1/tools/sessions_list", json={}, headers=raw)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("rig", [SANDBOXED], indirect=True)
async def test_chat_history_applies_the_sandbox_for_a_bound_token(rig: Any) -> None:
    _, http, _ = rig
    tool = await http.post(
        "/v1/tools/sessions_history", json={"sessionKey": "cron:job"}, headers=headers(MAIN)
    )
    assert tool.json()["error"] == NOT_VISIBLE
    method = await http.post(
        "/v1/methods/chat.history", json={"sessionKey": "cron:job"}, headers=headers(MAIN)
    )
    assert method.status_code == 403
    assert method.json()["error"]["message"] == NOT_VISIBLE
    assert "secret" not in method.text
    operator = await http.post(
        "/v1/methods/chat.history", json={"sessionKey": "cron:job"}, headers=headers(OPERATOR)
    )
    assert "secret of the cron job" in operator.text


async def test_a_bound_token_lists_and_resolves_only_what_its_session_sees(rig: Any) -> None:
    _, http, _ = rig
    listed = await http.post("/v1/methods/sessions.list", json={}, headers=headers(MAIN))
    keys = {row["key"] for row in listed.json()["sessions"]}
    assert "agent:other:main" not in keys  # agent-to-agent is off
    assert "agent:main:cron:job" in keys
    hidden = await http.post(
        "/v1/methods/sessions.resolve", json={"key": "agent:other:main"}, headers=headers(MAIN)
    )
    missing = await http.post(
        "/v1/methods/sessions.resolve", json={"key": "agent:other:nobody"}, headers=headers(MAIN)
    )
    assert hidden.status_code == missing.status_code == 404
    operator = await http.post("/v1/methods/sessions.list", json={}, headers=headers(OPERATOR))
    assert "agent:other:main" in {row["key"] for row in operator.json()["sessions"]}


async def test_sessions_patch_needs_an_operator_token(rig: Any) -> None:
    _, http, _ = rig
    body = {"key": "main", "sendPolicy": "deny"}
    bound = await http.post("/v1/methods/sessions.patch", json=body, headers=headers(MAIN))
    assert bound.status_code == 403
    operator = await http.post("/v1/methods/sessions.patch", json=body, headers=headers(OPERATOR))
    assert operator.status_code == 200


async def test_failed_attempts_are_limited_per_client_and_never_refuse_a_valid_token(
    rig: Any,
) -> None:
    _, http, clock = rig
    for _ in range(3):
        wrong = await http.post("/v1/tools/sessions_list", json={}, headers=headers("nope"))
        assert wrong.status_code == 401
    blocked = await http.post("/v1/tools/sessions_list", json={}, headers=headers("nope2"))
    assert blocked.status_code == 429
    assert int(blocked.headers["Retry-After"]) > 0
    # Decision 41: the limit holds back guesses, never the token's owner.
    valid = await http.post("/v1/tools/sessions_list", json={}, headers=headers(MAIN))
    assert valid.status_code == 200
    clock.now += 61
    assert (
        await http.post("/v1/tools/sessions_list", json={}, headers=headers("nope3"))
    ).status_code == 401


async def test_the_token_is_checked_before_the_body_is_read(rig: Any) -> None:
    gateway, _, _ = rig
    app = create_app(gateway, TokenSet.from_data(TOKENS))
    read: list[bool] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        read.append(True)
        return {"type": "http.request", "body": b"{}" * 1000, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/tools/sessions_list",
        "raw_path": b"/v1/tools/sessions_list",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"x-sessionwire-session", b"main")],
        "client": ("10.0.0.9", 5000),
        "server": ("gateway", 80),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 401
    assert read == []


async def test_a_deeply_nested_body_is_a_400_and_no_log_line_has_a_token(
    rig: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, http, _ = rig
    caplog.set_level(logging.DEBUG)
    deep = "[" * 100_000 + "]" * 100_000
    for token in (MAIN, OPERATOR, "wrong-token-guess"):
        answer = await http.post(
            "/v1/tools/sessions_send",
            content=deep,
            headers={**headers(token), "Content-Type": "application/json"},
        )
        assert answer.status_code in {400, 401}
        if token != "wrong-token-guess":
            assert answer.json()["error"]["code"] == "too_deep"
    method = await http.post(
        "/v1/methods/chat.history",
        content='{"sessionKey": ' + deep + "}",
        headers={**headers(MAIN), "Content-Type": "application/json"},
    )
    assert method.status_code == 400
    logged = "\n".join(record.getMessage() + repr(record.__dict__) for record in caplog.records)
    for token in (MAIN, OPERATOR, "wrong-token-guess", JURGEN):
        assert token not in logged


def test_a_tokens_file_in_yaml_or_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "tokens.yaml"
    yaml_file.write_text(f"tokens:\n  - token: {MAIN}\n    session: main\n")
    yaml_file.chmod(0o600)
    assert TokenSet.from_file(yaml_file).grant_for(MAIN).session == "main"  # type: ignore[union-attr]
    json_file = tmp_path / "tokens.json"
    json_file.write_text(json.dumps(TOKENS))
    json_file.chmod(0o600)
    tokens = TokenSet.from_file(json_file)
    assert tokens.grant_for(OPERATOR).is_operator  # type: ignore[union-attr]
    assert tokens.grant_for("") is None
    assert tokens.shortest_clear == min(len(MAIN), len(JURGEN))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"tokens": [{"token": "s3cret-value", "session": "main", "role": "operator"}]},
            "exactly one of session and role",
        ),
        ({"tokens": [{"token": "s3cret-value"}]}, "exactly one of session and role"),
        (
            {"tokens": [{"token": "s3cret-value", "tokenSha256": "0" * 64, "role": "operator"}]},
            "exactly one of token and tokenSha256",
        ),
        (
            {"tokens": [{"token": "s3cret-value", "sesion": "main"}]},
            "Extra inputs are not permitted",
        ),
        ({"tokens": [{"token": "s3cret-value", "role": "admin"}]}, "tokens.0.role"),
        ({"tokens": []}, "tokens"),
    ],
)
def test_a_bad_tokens_file_is_refused_without_quoting_a_token(
    data: dict[str, Any], problem: str
) -> None:
    with pytest.raises(TokenFileError) as refused:
        TokenSet.from_data(data)
    assert problem in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_a_short_hashed_token_is_refused_when_presented_beyond_loopback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A digest has no length: the minimum is enforced when the token is presented.
    from sessionwire.adapters.cli.serve import read_tokens

    weak = "tiny-tok"
    file = tmp_path / "tokens.json"
    file.write_text(
        json.dumps(
            {
                "tokens": [
                    {"tokenSha256": hashlib.sha256(weak.encode()).hexdigest(), "role": "operator"}
                ]
            }
        )
    )
    file.chmod(0o600)
    on_loopback = read_tokens(str(file), "UNUSED", None, "127.0.0.1")
    assert on_loopback.grant_for(weak) is not None
    beyond = read_tokens(str(file), "UNUSED", None, "0.0.0.0")
    with caplog.at_level(logging.WARNING, logger="sessionwire"):
        assert beyond.grant_for(weak) is None
    refusal = [r for r in caplog.records if "shorter than the minimum" in r.getMessage()]
    assert refusal, "the refusal is logged"
    assert weak not in caplog.text
    assert refusal[0].grant == "operator#1"  # type: ignore[attr-defined]

    strong = "a-long-enough-token-0123456789abcdef"
    long_file = tmp_path / "long.json"
    long_file.write_text(
        json.dumps(
            {
                "tokens": [
                    {"tokenSha256": hashlib.sha256(strong.encode()).hexdigest(), "role": "operator"}
                ]
            }
        )
    )
    long_file.chmod(0o600)
    assert read_tokens(str(long_file), "UNUSED", None, "0.0.0.0").grant_for(strong) is not None
