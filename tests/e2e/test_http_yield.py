"""sessions_yield over real HTTP: uvicorn on a loopback port, an SQLite store, httpx.

The wake is awaited on the gateway's own event stream (``GET /v1/events``), not by
polling: the stream ends the wait the moment ``YieldWoken`` is recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from live_http import live_server, seed
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        # Long enough that the yield below always finds the child in flight.
        {"step": "subagent_task", "reply": "counted", "delaySeconds": 5},
        {"step": "subagent_announce", "reply": "Result: 42 sheep\nNotes: none"},
        {"step": "yield_wake", "reply": "thanks, noted"},
    ]
}


def follow_until(http: httpx.Client, session: str, event_type: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    with http.stream("GET", "/v1/events", params={"session": session}) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[len("data: ") :]))
                if seen[-1]["type"] == event_type:
                    return seen
    raise AssertionError(f"the event stream ended before {event_type}")


def test_yield_over_http_wakes_the_session_with_the_childs_report(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/yield.db"
    seed(store)
    runtime = ScriptedRuntime.from_dict(SCRIPT)
    with live_server(store, runtime=runtime) as live, live.client() as http:
        spawned = http.post("/v1/tools/sessions_spawn", json={"task": "count the sheep"}).json()
        assert spawned["status"] == "accepted", spawned
        response = http.post(
            "/v1/tools/sessions_yield", json={"timeoutSeconds": 60, "message": "sum them up"}
        )
        assert response.status_code == 200
        yielded = response.json()
        assert yielded["status"] == "yielded", yielded
        assert yielded["waitFor"] == "all"
        assert [child["runId"] for child in yielded["children"]] == [spawned["runId"]]
        seen = follow_until(http, "main", "YieldWoken")
        assert any(event["type"] == "RunYielded" for event in seen)
        wake_run = seen[-1]["data"]["wake_run_id"]
        waited = http.post(
            "/v1/methods/agent.wait", json={"runId": wake_run, "timeoutMs": 20_000}
        ).json()
        assert waited["status"] == "ok"
    (wake,) = [call for call in runtime.calls if call.step == "yield_wake"]
    assert wake.session_key == "agent:main:main"
    assert "sum them up" in wake.message
    assert "Status: ok" in wake.message
    assert "42 sheep" in wake.message


def test_yield_over_http_refuses_clearly(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/yield.db"
    seed(store)
    with (
        live_server(store, runtime=ScriptedRuntime.from_dict(SCRIPT)) as live,
        live.client() as http,
    ):
        lonely = http.post("/v1/tools/sessions_yield", json={})
        bad = http.post("/v1/tools/sessions_yield", json={"waitFor": "most"})
        schemas = {tool["name"] for tool in http.get("/v1/tools").json()["tools"]}
    assert lonely.status_code == 200
    assert lonely.json()["status"] == "error"
    assert "no sub-agent of this session is in flight" in lonely.json()["error"]
    assert bad.json()["status"] == "error"
    assert 'waitFor must be "all" or "any"' in bad.json()["error"]
    assert "sessions_yield" in schemas
