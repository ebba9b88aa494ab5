"""sessions_yield over real HTTP: uvicorn on a loopback port, an SQLite store, httpx.

The wake is awaited on the gateway's own event stream (``GET /v1/events``), not by
polling: the stream ends the wait the moment ``YieldWoken`` is recorded."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
from live_http import live_server, seed
from sessionwire import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "counted"},
        {"step": "subagent_announce", "reply": "Result: 42 sheep\nNotes: none"},
        {"step": "yield_wake", "reply": "thanks, noted"},
    ]
}


class HeldChild(AgentRuntime):
    """The script's agents, but the child's task answers only once the test lets it: the
    yield is sure to find it in flight, by order, not by a delay."""

    def __init__(self, script: ScriptedRuntime) -> None:
        self.script = script
        self.release = threading.Event()  # the server runs on a thread of its own

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            await asyncio.to_thread(self.release.wait, 60)
        return await self.script.run(request)


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
    held = HeldChild(runtime)
    with live_server(store, runtime=held) as live, live.client() as http:
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
        held.release.set()
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
