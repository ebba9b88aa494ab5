"""The HTTP gateway over real HTTP: uvicorn on a loopback port, an SQLite store, httpx."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hang_bounds import HANG_SECONDS
from live_http import SCRIPT, LiveServer, live_server, scripted_server, wait_for_its_exchange
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.gateway import GatewayService
from sessionwire.application.tools.registry import REGISTRY
from sessionwire.application.tools.schemas import tool_parameters
from sessionwire.testing import ScriptedRuntime

METHODS = ["sessions.list", "sessions.resolve", "sessions.patch", "chat.history", "agent.wait"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(f"sqlite:///{tmp_path_factory.mktemp('http')}/sessions.db") as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


def error_of(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    return dict(body["error"])


# Health and readiness -------------------------------------------------------------------


def test_health_and_readiness_answer_without_a_token(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=HANG_SECONDS) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        ready = anonymous.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready"}


async def test_readiness_is_503_when_the_store_does_not_answer(tmp_path: Path) -> None:
    gateway = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=f"sqlite:///{tmp_path}/gone.db"
    )
    app = create_app(gateway, "t")
    store_of(gateway).close()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        response = await http.get("/readyz")
        assert (await http.get("/healthz")).status_code == 200
    assert response.status_code == 503
    assert error_of(response)["code"] == "unavailable"


# Authentication -------------------------------------------------------------------------

PROTECTED = [
    ("GET", "/v1/tools"),
    *[("POST", f"/v1/tools/{name}") for name in REGISTRY.names],
    ("POST", "/v1/tools/no_such_tool"),
    *[("POST", f"/v1/methods/{name}") for name in METHODS],
]


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", "Bearer test-token-012345678X", "Basic dGVzdDp0ZXN0", "Bearer"],
    ids=["missing", "wrong", "near-miss", "basic", "empty"],
)
def test_every_route_but_health_needs_the_bearer_token(
    server: LiveServer, authorization: str | None
) -> None:
    headers = {"X-Sessionwire-Session": "main"}
    if authorization is not None:
        headers["Authorization"] = authorization
    with httpx.Client(base_url=server.url, headers=headers, timeout=HANG_SECONDS) as http:
        for method, path in PROTECTED:
            response = http.request(method, path, json={})
            assert response.status_code == 401, (method, path)
            assert response.headers["WWW-Authenticate"] == "Bearer"
            assert error_of(response)["code"] == "unauthorized"


def test_an_empty_token_is_refused() -> None:
    # create_app checks the token before using the service
    gateway = Gateway(object.__new__(GatewayService))
    with pytest.raises(ValueError, match="non-empty token"):
        create_app(gateway, "  ")


# Tools ----------------------------------------------------------------------------------


def test_tool_schemas_are_listed(client: httpx.Client) -> None:
    tools = client.get("/v1/tools").json()["tools"]
    assert [tool["name"] for tool in tools] == list(REGISTRY.names)


def test_sessions_list_answers_as_the_named_session(client: httpx.Client) -> None:
    response = client.post("/v1/tools/sessions_list", json={"messageLimit": 1})
    assert response.status_code == 200
    rows = {row["key"]: row for row in response.json()["sessions"]}
    # Agent-to-agent access is off by default: agent work's session is not visible to main.
    assert set(rows) >= {"main", "agent:main:discord:group:ops"}
    assert "agent:work:main" not in rows
    assert rows["agent:main:discord:group:ops"]["displayName"] == "#ops"
    assert rows["agent:main:discord:group:ops"]["messages"][0]["content"][0]["text"] == (
        "deploy done"
    )


def test_sessions_history_returns_the_tool_result_exactly(client: httpx.Client) -> None:
    plain = client.post("/v1/tools/sessions_history", json={"sessionKey": "main", "limit": 10})
    with_tools = client.post(
        "/v1/tools/sessions_history",
        json={"sessionKey": "main", "limit": 10, "includeTools": True},
    )
    assert plain.status_code == with_tools.status_code == 200
    assert plain.json()["sessionKey"] == "main"
    assert [m["role"] for m in plain.json()["messages"]][:2] == ["user", "assistant"]
    assert "toolResult" not in [m["role"] for m in plain.json()["messages"]]
    assert "toolResult" in [m["role"] for m in with_tools.json()["messages"]]


def test_sessions_history_pages_back_over_http(client: httpx.Client) -> None:
    # Decision 27 through the real transport: pages of 1, newest first, down to the first.
    total = client.post("/v1/tools/sessions_history", json={"sessionKey": "main", "offset": 0})
    assert total.status_code == 200
    count = total.json()["totalMessages"]
    assert total.json()["truncated"] is False
    seen: list[str] = []
    body: dict[str, object] = {"sessionKey": "main", "offset": 0, "limit": 1}
    while True:
        page = client.post("/v1/tools/sessions_history", json=body).json()
        seen = [m["role"] for m in page["messages"]] + seen
        if "nextOffset" not in page:
            break
        body["offset"] = page["nextOffset"]
    assert len(seen) == count
    assert seen == [m["role"] for m in total.json()["messages"]]
    bad = client.post("/v1/tools/sessions_history", json={"sessionKey": "main", "offset": -1})
    assert bad.status_code == 200
    assert bad.json()["error"] == "offset must be a non-negative integer"


def test_sessions_list_filters_over_http(client: httpx.Client) -> None:
    found = client.post("/v1/tools/sessions_list", json={"search": "#OPS"}).json()
    assert [row["key"] for row in found["sessions"]] == ["agent:main:discord:group:ops"]
    archived = client.post("/v1/tools/sessions_list", json={"archived": True}).json()
    assert (archived["count"], archived["sessions"]) == (0, [])
    assert archived["visibility"]["mode"] == "tree"  # main's default scope says so


def test_refusals_are_200_results_with_their_status(server: LiveServer) -> None:
    with server.client("main") as http:
        missing = http.post("/v1/tools/sessions_history", json={"sessionKey": "cron:nope"})
        forbidden = http.post("/v1/tools/sessions_history", json={"sessionKey": "agent:work:main"})
        unknown_param = http.post("/v1/tools/sessions_list", json={"limt": 5})
        not_an_object = http.post("/v1/tools/sessions_list", json=[1, 2])
    with server.client("agent:main:subagent:abc") as http:
        from_subagent = http.post("/v1/tools/sessions_spawn", json={"task": "x"})
    assert missing.status_code == forbidden.status_code == from_subagent.status_code == 200
    assert missing.json() == {
        "status": "error",
        "tool": "sessions_history",
        "error": "Session not found: cron:nope",
    }
    assert forbidden.json()["status"] == "forbidden"
    # Another agent: outside the default scope (tree), whatever tools.agentToAgent says.
    assert (
        "Session history visibility is restricted. Set tools.sessions.visibility=all"
        in (forbidden.json()["error"])
    )
    assert from_subagent.json()["status"] == "forbidden"
    assert unknown_param.status_code == 200
    assert unknown_param.json()["status"] == "error"
    assert "unknown parameter" in unknown_param.json()["error"]
    assert not_an_object.json()["error"] == "parameters must be a JSON object"


def test_an_empty_body_means_no_parameters(server: LiveServer) -> None:
    with server.client("main") as http:
        response = http.post("/v1/tools/agents_list")
    assert response.status_code == 200
    assert response.json()["requester"] == "main"


def test_send_waits_for_the_reply_and_agent_wait_reports_the_run(client: httpx.Client) -> None:
    sent = client.post(
        "/v1/tools/sessions_send",
        json={"sessionKey": "discord:group:ops", "message": "ping", "timeoutSeconds": 20},
    ).json()
    assert sent["status"] == "ok", sent
    assert sent["reply"] == "pong: ping"
    assert sent["delivery"] in (
        {"status": "started", "mode": "announce"},
        # An earlier test's exchange may still be running in that session.
        {"status": "queued", "position": 1, "mode": "announce"},
    )
    waited = client.post(
        "/v1/methods/agent.wait", json={"runId": sent["runId"], "timeoutMs": 0}
    ).json()
    assert waited["runId"] == sent["runId"]
    assert waited["status"] == "ok"
    assert waited["startedAt"] <= waited["endedAt"]
    assert "error" not in waited
    # The reply-back and announce steps still add messages after the reply is back.
    wait_for_its_exchange(client, sent["runId"])
    history = client.post(
        "/v1/methods/chat.history", json={"sessionKey": "discord:group:ops", "limit": 4}
    ).json()
    said = [(m["role"], m["content"][0]["text"]) for m in history["messages"]]
    assert said[:2] == [("user", "ping"), ("assistant", "pong: ping")]
    assert said[3] == ("assistant", "ANNOUNCE_SKIP")  # the announce step came after


def test_fire_and_forget_then_agent_wait(client: httpx.Client) -> None:
    sent = client.post(
        "/v1/tools/sessions_send",
        json={"sessionKey": "discord:group:ops", "message": "later", "timeoutSeconds": 0},
    ).json()
    assert sent["status"] == "accepted"
    waited = client.post(
        "/v1/methods/agent.wait", json={"runId": sent["runId"], "timeoutMs": 20_000}
    ).json()
    assert waited["status"] == "ok"
    # Its exchange's later steps would otherwise write into the tests after this one.
    wait_for_its_exchange(client, sent["runId"])


def test_agent_wait_times_out_on_a_run_still_going(client: httpx.Client) -> None:
    sent = client.post(
        "/v1/tools/sessions_send",
        json={"sessionKey": "main", "message": "slow one", "timeoutSeconds": 0},
    ).json()
    waited = client.post(
        "/v1/methods/agent.wait", json={"runId": sent["runId"], "timeoutMs": 50}
    ).json()
    assert waited == {"runId": sent["runId"], "status": "timeout"}


def test_spawn_returns_at_once_and_the_child_run_can_be_awaited(client: httpx.Client) -> None:
    spawned = client.post("/v1/tools/sessions_spawn", json={"task": "count the sheep"}).json()
    assert spawned["status"] == "accepted", spawned
    assert spawned["childSessionKey"].startswith("agent:main:subagent:")
    waited = client.post(
        "/v1/methods/agent.wait", json={"runId": spawned["runId"], "timeoutMs": 20_000}
    ).json()
    assert waited["status"] == "ok"


def test_unknown_tool_is_404(client: httpx.Client) -> None:
    response = client.post("/v1/tools/sessions_delete", json={})
    assert response.status_code == 404
    assert error_of(response)["code"] == "unknown_tool"
    assert "sessions_list" in error_of(response)["message"]


def test_missing_session_header_is_422(server: LiveServer) -> None:
    with server.client(session=None) as http:
        response = http.post("/v1/tools/sessions_list", json={})
    assert response.status_code == 422
    assert "X-Sessionwire-Session" in error_of(response)["message"]


@pytest.mark.parametrize("path", ["/v1/tools/sessions_list", "/v1/methods/sessions.list"])
def test_malformed_json_is_400_and_a_non_json_body_415(client: httpx.Client, path: str) -> None:
    malformed = client.post(
        path, content=b'{"limit": ', headers={"Content-Type": "application/json"}
    )
    assert malformed.status_code == 400
    assert error_of(malformed)["code"] == "invalid_json"
    form = client.post(path, data={"limit": "5"})
    assert form.status_code == 415
    assert error_of(form)["code"] == "unsupported_media_type"


# Request size ---------------------------------------------------------------------------


def test_bodies_over_the_limit_are_413(client: httpx.Client) -> None:
    big = "x" * (1024 * 1024)
    declared = client.post("/v1/tools/sessions_send", json={"sessionKey": "main", "message": big})
    assert declared.status_code == 413
    assert error_of(declared)["code"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"message": "'
        for _ in range(20):
            yield b"y" * 65536
        yield b'"}'

    streamed = client.post(
        "/v1/tools/sessions_send", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    just_under = client.post(
        "/v1/tools/sessions_history", json={"sessionKey": "main", "padding": "z" * 1_000_000}
    )
    assert just_under.status_code == 200  # reached the tool, which refuses the parameter
    assert just_under.json()["status"] == "error"


# Gateway methods ------------------------------------------------------------------------


def test_sessions_list_method_shows_every_agent_with_canonical_keys(client: httpx.Client) -> None:
    listed = client.post("/v1/methods/sessions.list").json()  # no body: the defaults
    keys = [row["key"] for row in listed["sessions"]]
    assert {"agent:main:main", "agent:main:discord:group:ops", "agent:work:main"} <= set(keys)
    assert listed["count"] == len(keys)
    assert listed["path"].endswith("sessions.db")
    work = client.post("/v1/methods/sessions.list", json={"agentId": "work"}).json()
    assert [row["key"] for row in work["sessions"]] == ["agent:work:main"]
    one = client.post("/v1/methods/sessions.list", json={"limit": 1}).json()
    assert one["count"] == 1
    too_small = client.post("/v1/methods/sessions.list", json={"limit": 0})
    assert too_small.status_code == 422
    assert error_of(too_small)["message"].startswith("limit:")
    extra = client.post("/v1/methods/sessions.list", json={"search": "x"})
    assert extra.status_code == 422
    # JSON true is not a number of minutes (found by the schemathesis run).
    boolean = client.post("/v1/methods/sessions.list", json={"activeMinutes": True})
    assert boolean.status_code == 422
    assert error_of(boolean)["message"].startswith("activeMinutes:")
    # …while 2.0 is the integer 2, as JSON Schema's "integer" reads it.
    whole = client.post("/v1/methods/sessions.list", json={"limit": 2.0})
    assert whole.status_code == 200


def test_sessions_resolve_by_key_session_id_and_label(client: httpx.Client) -> None:
    by_key = client.post("/v1/methods/sessions.resolve", json={"key": "main"})
    assert by_key.json() == {"ok": True, "key": "agent:main:main"}
    listed = client.post("/v1/methods/sessions.list", json={"agentId": "work"}).json()
    session_id = listed["sessions"][0]["sessionId"]
    by_id = client.post("/v1/methods/sessions.resolve", json={"sessionId": session_id.upper()})
    assert by_id.json() == {"ok": True, "key": "agent:work:main"}
    patched = client.post(
        "/v1/methods/sessions.patch", json={"key": "agent:work:main", "label": "worker"}
    )
    assert patched.status_code == 200
    by_label = client.post("/v1/methods/sessions.resolve", json={"label": "worker"})
    assert by_label.json() == {"ok": True, "key": "agent:work:main"}

    both = client.post("/v1/methods/sessions.resolve", json={"key": "main", "label": "worker"})
    assert both.status_code == 400
    assert error_of(both)["message"] == "Provide either key, sessionId, or label (not multiple)"
    neither = client.post("/v1/methods/sessions.resolve", json={})
    assert error_of(neither)["message"] == "Either key, sessionId, or label is required"
    missing = client.post("/v1/methods/sessions.resolve", json={"key": "cron:nope"})
    assert missing.status_code == 404
    assert error_of(missing)["message"] == "No session found: cron:nope"
    no_label = client.post("/v1/methods/sessions.resolve", json={"label": "nobody"})
    assert error_of(no_label)["message"] == "No session found with label: nobody"
    empty_label = client.post("/v1/methods/sessions.resolve", json={"label": "  "})
    assert empty_label.status_code == 400
    assert error_of(empty_label)["message"] == "invalid label: empty"


def test_sessions_patch_sets_and_clears_and_refuses(client: httpx.Client) -> None:
    denied = client.post(
        "/v1/methods/sessions.patch", json={"key": "discord:group:ops", "sendPolicy": "deny"}
    ).json()
    assert denied["ok"] is True
    assert denied["key"] == "agent:main:discord:group:ops"
    assert denied["entry"]["send_policy"] == "deny"
    cleared = client.post(
        "/v1/methods/sessions.patch", json={"key": "discord:group:ops", "sendPolicy": None}
    ).json()
    assert cleared["entry"]["send_policy"] is None

    bad = client.post("/v1/methods/sessions.patch", json={"key": "main", "sendPolicy": "maybe"})
    assert bad.status_code == 400
    assert error_of(bad)["message"] == 'invalid sendPolicy (use "allow"|"deny")'
    missing = client.post("/v1/methods/sessions.patch", json={"key": "cron:nope", "label": "x"})
    assert missing.status_code == 404
    assert error_of(missing)["message"] == "Session not found: agent:main:cron:nope"
    taken = client.post(
        "/v1/methods/sessions.patch", json={"key": "discord:group:ops", "label": "taken"}
    )
    assert taken.status_code == 200
    clash = client.post("/v1/methods/sessions.patch", json={"key": "main", "label": "taken"})
    assert error_of(clash)["message"] == "label already in use: taken"


def test_chat_history_includes_tool_results_and_refuses_missing_sessions(
    client: httpx.Client,
) -> None:
    history = client.post("/v1/methods/chat.history", json={"sessionKey": "main"}).json()
    assert history["sessionKey"] == "agent:main:main"
    assert [m["role"] for m in history["messages"]][:3] == ["user", "assistant", "toolResult"]
    assert history["thinkingLevel"] is None
    last = client.post("/v1/methods/chat.history", json={"sessionKey": "main", "limit": 1}).json()
    assert len(last["messages"]) == 1
    missing = client.post("/v1/methods/chat.history", json={"sessionKey": "cron:nope"})
    assert missing.status_code == 404
    over = client.post("/v1/methods/chat.history", json={"sessionKey": "main", "limit": 1001})
    assert over.status_code == 422


def test_agent_wait_refuses_bad_and_unknown_run_ids(client: httpx.Client) -> None:
    bad = client.post("/v1/methods/agent.wait", json={"runId": "not-a-uuid"})
    assert bad.status_code == 400
    unknown = client.post("/v1/methods/agent.wait", json={"runId": str(uuid.uuid4())})
    assert unknown.status_code == 404
    assert error_of(unknown)["message"].startswith("Run not found: ")


# Errors are JSON everywhere -------------------------------------------------------------


def test_unknown_paths_and_wrong_methods_answer_json(client: httpx.Client) -> None:
    nowhere = client.get("/v2/everything")
    assert nowhere.status_code == 404
    assert error_of(nowhere)["code"] == "not_found"
    wrong_method = client.get("/v1/methods/sessions.list")
    assert wrong_method.status_code == 405
    assert wrong_method.headers["Allow"] == "POST"
    assert error_of(wrong_method)["code"] == "method_not_allowed"


def test_docs_is_the_api_reference_page_without_a_token_or_a_script(server: LiveServer) -> None:
    """Issue 24: ``/docs`` was 404 on serve. It is the OpenAPI document as a page (no
    Swagger UI: that loads its scripts from a CDN), public like ``/openapi.json``."""
    with httpx.Client(base_url=server.url, timeout=HANG_SECONDS) as anonymous:
        page = anonymous.get("/docs")
        document = anonymous.get("/openapi.json").json()
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "<script" not in page.text.lower()
    assert "href='/openapi.json'" in page.text
    for path in document["paths"]:
        assert f"<code>{path}</code>" in page.text
    assert "<code>/v1/tools/sessions_send</code> <em>token</em>" in page.text
    assert "<code>/healthz</code></h2>" in page.text  # public: no token mark
    assert "/docs" not in document["paths"]


def test_the_openapi_document_carries_each_tools_json_schema(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=HANG_SECONDS) as anonymous:
        document = anonymous.get("/openapi.json").json()
    for name in REGISTRY.names:
        operation = document["paths"][f"/v1/tools/{name}"]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        assert schema == tool_parameters(name)
        assert operation["security"] == [{"HTTPBearer": []}]
    for name in METHODS:
        assert "post" in document["paths"][f"/v1/methods/{name}"]
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_the_gateway_serves_a_postgresql_store_too(postgres_url: str) -> None:
    with scripted_server(postgres_url) as live, live.client() as http:
        listed = http.post("/v1/methods/sessions.list", json={}).json()
        sent = http.post(
            "/v1/tools/sessions_send",
            json={"sessionKey": "discord:group:ops", "message": "ping", "timeoutSeconds": 20},
        ).json()
        waited = http.post("/v1/methods/agent.wait", json={"runId": sent["runId"]}).json()
        ready = http.get("/readyz")
    assert listed["count"] == 3
    assert sent["reply"] == "pong: ping"
    assert waited["status"] == "ok"
    assert ready.json() == {"status": "ready"}


def test_agent_wait_sees_a_run_that_another_gateway_process_ends(postgres_url: str) -> None:
    """Two gateways on one database: the one waiting never ran the run itself."""
    with (
        scripted_server(postgres_url) as runner,
        live_server(postgres_url, runtime=ScriptedRuntime.from_dict(SCRIPT)) as waiter,
    ):
        with runner.client() as http:
            sent = http.post(
                "/v1/tools/sessions_send",
                json={"sessionKey": "discord:group:ops", "message": "slow", "timeoutSeconds": 0},
            ).json()
        with waiter.client() as http:
            waited = http.post(
                "/v1/methods/agent.wait", json={"runId": sent["runId"], "timeoutMs": 30_000}
            ).json()
    assert waited["status"] == "ok"
