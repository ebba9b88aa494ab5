"""Runs over real HTTP (uvicorn on a loopback port, SQLite): GET /v1/runs/{id}, GET
/v1/runs, POST /v1/runs/{id}/cancel, under scoped tokens.

Runs are made by real sends: main sends into its ops group (a run main may see), the
work agent into its own group (a run main may not see: agent-to-agent access is off).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hang_bounds import HANG_SECONDS
from live_http import SCRIPT, LiveServer, live_server
from sessionwire import SyncGateway
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.application.run_views import RunCancelResult, RunList, RunView
from sessionwire.testing import ScriptedRuntime

OPERATOR = "operator-token-0123456789abcdefghijklmnop"
MAIN = "main-token-0123456789abcdefghijklmnopqrstu"
TOKENS = TokenSet.from_data(
    {"tokens": [{"token": OPERATOR, "role": "operator"}, {"token": MAIN, "session": "main"}]}
)


def seed(store: str) -> None:
    with SyncGateway.open(store=store) as gateway:
        gateway.record_message("main", role="user", content="hello")
        gateway.record_message("discord:group:ops", role="user", content="deploy done")
        gateway.record_message("agent:work:main", role="user", content="work stuff")
        gateway.record_message("agent:work:discord:group:build", role="user", content="build")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    store = f"sqlite:///{tmp_path_factory.mktemp('runs')}/sessions.db"
    seed(store)
    with live_server(store, runtime=ScriptedRuntime.from_dict(SCRIPT), token=TOKENS) as live:
        yield live


def client(server: LiveServer, token: str, session: str | None = None) -> httpx.Client:
    return server.client(session=session, token=token)


def send(server: LiveServer, requester: str, target: str, message: str, wait: int = 30) -> str:
    with client(server, OPERATOR, requester) as http:
        answer = http.post(
            "/v1/tools/sessions_send",
            json={"sessionKey": target, "message": message, "timeoutSeconds": wait},
        ).json()
    assert answer["status"] in {"ok", "accepted"}, answer
    return str(answer["runId"])


@pytest.fixture(scope="module")
def runs(server: LiveServer) -> dict[str, str]:
    """A finished run main may see and one it may not."""
    return {
        "visible": send(server, "main", "discord:group:ops", "ping"),
        "hidden": send(server, "agent:work:main", "discord:group:build", "ping"),
    }


def error_of(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    return dict(body["error"])


def wait_for_status(server: LiveServer, run_id: str, status: str) -> dict[str, Any]:
    """Poll GET /v1/runs/{id} (the client's only way to watch a run over HTTP) until it
    has ``status``; the run is real work on a real clock, so there is no other signal."""
    deadline = time.monotonic() + 30
    with client(server, OPERATOR) as http:
        while True:
            found = http.get(f"/v1/runs/{run_id}").json()
            if found.get("status") == status or time.monotonic() > deadline:
                return dict(found)
            http.get("/healthz")  # one round trip between looks, no sleep


# GET /v1/runs/{id} --------------------------------------------------------------------


def test_a_run_is_found_with_its_fields(server: LiveServer, runs: dict[str, str]) -> None:
    with client(server, OPERATOR) as http:
        answer = http.get(f"/v1/runs/{runs['visible']}")
    assert answer.status_code == 200
    run = answer.json()
    RunView.model_validate(run)
    assert run["runId"] == runs["visible"]
    assert run["status"] == "ok"
    assert run["sessionKey"] == "agent:main:discord:group:ops"
    assert run["requesterSessionKey"] == "agent:main:main"
    assert run["exchangeId"]
    assert "spawnId" not in run


@pytest.mark.parametrize(
    "run_id",
    [str(uuid.uuid4()), "not-a-uuid", "%20", "1" * 300],
    ids=["unknown", "bad", "sp", "long"],
)
def test_an_unknown_or_malformed_run_is_404(server: LiveServer, run_id: str) -> None:
    with client(server, OPERATOR) as http:
        answer = http.get(f"/v1/runs/{run_id}")
    assert answer.status_code == 404
    assert error_of(answer)["code"] == "not_found"


def test_a_bound_token_sees_its_sessions_runs_only(
    server: LiveServer, runs: dict[str, str]
) -> None:
    with client(server, MAIN) as http:
        seen = http.get(f"/v1/runs/{runs['visible']}")
        hidden = http.get(f"/v1/runs/{runs['hidden']}")
        unknown = http.get(f"/v1/runs/{uuid.uuid4()}")
        as_other = http.get(
            f"/v1/runs/{runs['hidden']}", headers={"X-Sessionwire-Session": "agent:work:main"}
        )
    assert seen.status_code == 200
    # Hidden and missing answer the same: the body tells nothing of the hidden run.
    assert hidden.status_code == unknown.status_code == 404
    assert error_of(hidden) == error_of(unknown)
    assert as_other.status_code == 403


def test_an_operator_may_see_as_a_session(server: LiveServer, runs: dict[str, str]) -> None:
    with client(server, OPERATOR, "main") as as_main:
        assert as_main.get(f"/v1/runs/{runs['hidden']}").status_code == 404
        assert as_main.get(f"/v1/runs/{runs['visible']}").status_code == 200
    with client(server, OPERATOR, "agent:work:main") as as_work:
        assert as_work.get(f"/v1/runs/{runs['hidden']}").status_code == 200
    with client(server, OPERATOR, "agent:Bad Key:") as bad:
        answer = bad.get(f"/v1/runs/{runs['hidden']}")
    assert answer.status_code == 400
    assert error_of(answer)["code"] == "bad_request"


# GET /v1/runs -------------------------------------------------------------------------


def test_runs_are_listed_and_filtered(server: LiveServer, runs: dict[str, str]) -> None:
    with client(server, OPERATOR) as http:
        every = http.get("/v1/runs").json()
        ops = http.get("/v1/runs", params={"session": "discord:group:ops"}).json()
        one = http.get("/v1/runs", params={"limit": 1}).json()
        ok = http.get("/v1/runs", params={"status": "ok"}).json()
        queued = http.get("/v1/runs", params={"status": "queued"}).json()
        trace = http.get("/v1/runs/" + runs["visible"]).json()["traceId"]
        traced = http.get("/v1/runs", params={"trace": trace}).json()
    RunList.model_validate(every)
    ids = [run["runId"] for run in every["runs"]]
    assert {runs["visible"], runs["hidden"]} <= set(ids)
    assert runs["visible"] in [run["runId"] for run in ops["runs"]]
    assert {run["sessionKey"] for run in ops["runs"]} == {"agent:main:discord:group:ops"}
    assert len(one["runs"]) == 1
    assert one["runs"][0]["runId"] == ids[0]
    assert {run["status"] for run in ok["runs"]} == {"ok"}
    assert queued == {"runs": []}
    assert runs["visible"] in [run["runId"] for run in traced["runs"]]
    assert {run["traceId"] for run in traced["runs"]} == {trace}


def test_a_bound_token_lists_only_what_it_may_see(server: LiveServer, runs: dict[str, str]) -> None:
    with client(server, MAIN) as http:
        listed = http.get("/v1/runs").json()
        other = http.get("/v1/runs", params={"session": "agent:work:discord:group:build"}).json()
    ids = {run["runId"] for run in listed["runs"]}
    assert runs["visible"] in ids
    assert runs["hidden"] not in ids
    assert other == {"runs": []}


@pytest.mark.parametrize(
    ("params", "mentions"),
    [
        ({"status": "done"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"session": "agent:Bad Key:"}, "agent"),
        ({"sesion": "main"}, "unknown query parameter 'sesion'"),
        ({"": "true"}, "unknown query parameter"),
    ],
)
def test_a_bad_filter_is_400(server: LiveServer, params: dict[str, Any], mentions: str) -> None:
    with client(server, OPERATOR) as http:
        answer = http.get("/v1/runs", params=params)
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert error["code"] == "bad_request"
    assert mentions in error["message"]


def test_the_run_routes_need_a_token(server: LiveServer, runs: dict[str, str]) -> None:
    with httpx.Client(base_url=server.url, timeout=HANG_SECONDS) as anonymous:
        for answer in (
            anonymous.get("/v1/runs"),
            anonymous.get(f"/v1/runs/{runs['visible']}"),
            anonymous.post(f"/v1/runs/{runs['visible']}/cancel"),
        ):
            assert answer.status_code == 401
            assert error_of(answer)["code"] == "unauthorized"


# POST /v1/runs/{id}/cancel ------------------------------------------------------------


def test_a_running_run_is_cancelled(server: LiveServer) -> None:
    run_id = send(server, "main", "discord:group:ops", "slow job", wait=0)
    wait_for_status(server, run_id, "running")
    with client(server, MAIN) as http:
        answer = http.post(f"/v1/runs/{run_id}/cancel", json={"reason": "not needed"})
    assert answer.status_code == 200, answer.text
    run = answer.json()
    RunCancelResult.model_validate(run)
    assert run["cancelled"] is True
    assert run["status"] == "cancelled"
    assert run["cascaded"] == []
    assert run["error"] == "run cancelled: not needed"
    with client(server, OPERATOR) as http:
        assert http.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled"


def test_cancelling_an_ended_run_changes_nothing(server: LiveServer, runs: dict[str, str]) -> None:
    with client(server, OPERATOR) as http:
        before = http.get(f"/v1/runs/{runs['visible']}").json()
        answer = http.post(f"/v1/runs/{runs['visible']}/cancel")  # no body: no reason
    assert answer.status_code == 200
    run = answer.json()
    assert run["cancelled"] is False
    assert run["status"] == "ok"
    assert "already ended" in run["reason"]
    assert {key: run[key] for key in before} == before


def test_cancel_is_404_for_unknown_and_invisible_runs(
    server: LiveServer, runs: dict[str, str]
) -> None:
    with client(server, MAIN) as http:
        hidden = http.post(f"/v1/runs/{runs['hidden']}/cancel", json={})
        unknown = http.post(f"/v1/runs/{uuid.uuid4()}/cancel", json={})
        malformed = http.post("/v1/runs/nope/cancel", json={})
    assert hidden.status_code == unknown.status_code == malformed.status_code == 404
    assert error_of(hidden) == error_of(unknown)
    with client(server, OPERATOR) as http:
        assert http.get(f"/v1/runs/{runs['hidden']}").json()["status"] == "ok"


@pytest.mark.parametrize(
    ("body", "status"),
    [({"reason": "x" * 1001}, 422), ({"reason": 3}, 422), ({"why": "x"}, 422), ([1], 422)],
)
def test_a_bad_cancel_body_is_refused(
    server: LiveServer, runs: dict[str, str], body: Any, status: int
) -> None:
    with client(server, OPERATOR) as http:
        answer = http.post(f"/v1/runs/{runs['visible']}/cancel", json=body)
        text = http.post(
            f"/v1/runs/{runs['visible']}/cancel",
            content=b"reason",
            headers={"Content-Type": "text/plain"},
        )
    assert answer.status_code == status, answer.text
    assert error_of(answer)["code"] == "invalid_request"
    assert text.status_code == 415


def test_the_run_routes_are_in_the_openapi_document(server: LiveServer, tmp_path: Path) -> None:
    with httpx.Client(base_url=server.url, timeout=HANG_SECONDS) as anonymous:
        paths = anonymous.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/runs/{run_id}"]) == {"get"}
    assert set(paths["/v1/runs"]) == {"get"}
    assert set(paths["/v1/runs/{run_id}/cancel"]) == {"post"}
    status = next(p for p in paths["/v1/runs"]["get"]["parameters"] if p["name"] == "status")
    assert "cancelled" in str(status["schema"])
