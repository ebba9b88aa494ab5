"""An agent calling back over real HTTP without ``X-Sessionwire-Run`` (issue 43 §1,
ADR 0034): uvicorn on a loopback port, SQLite, httpx from inside each agent's turn.

The attack: session s_i's turn sends a message on to s_(i+1) through ``POST
/v1/tools/sessions_send``. With ``maxRuns: 2`` and ``maxHops: 3`` the chain must stop at
s2 whether or not the call names its run: each call without the header was a fresh
trace before (s1 -> s10, 20 runs in 10 traces, every send accepted). With
``callbacksWithoutRun: "refuse"`` the first such call is refused and recorded."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from hang_bounds import HANG_SECONDS
from live_http import TOKEN, live_server
from scopes import before_scopes
from sessionwire import AgentRuntime, GatewayConfig, RunReply, RunRequest, SyncGateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.domain.access_refusal import AccessRefusal

LAST = 10
OUTSIDE = "agent:main:work:outside"


def key(n: int) -> str:
    return f"agent:main:work:s{n}"


class CallingBack(AgentRuntime):
    """Session s_i's primary turn sends "go" on to s_(i+1) over HTTP, as s_i, with or
    without its run token; ``done`` is set once a send is not accepted, or at s10."""

    def __init__(self, *, with_header: bool) -> None:
        self.with_header = with_header
        self.url = ""
        self.answers: dict[int, dict[str, Any]] = {}
        self.done = threading.Event()  # the server runs on a thread of its own

    async def run(self, request: RunRequest) -> RunReply:
        if request.step != "primary":
            return RunReply(text="ANNOUNCE_SKIP")
        n = int(request.session_key.rsplit("s", 1)[1])
        if n >= LAST:
            self.done.set()
            return RunReply(text="the end")
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "X-Sessionwire-Session": request.session_key,
        }
        if self.with_header:
            assert request.run_token is not None
            headers["X-Sessionwire-Run"] = request.run_token
        async with httpx.AsyncClient(base_url=self.url, timeout=HANG_SECONDS) as client:
            response = await client.post(
                "/v1/tools/sessions_send",
                headers=headers,
                json={"sessionKey": key(n + 1), "message": "go", "timeoutSeconds": 0},
            )
        self.answers[n] = response.json()
        if self.answers[n].get("status") != "accepted":
            self.done.set()
        return RunReply(text=f"s{n} sent on")


def settings(**agent_to_agent: Any) -> GatewayConfig:
    return GatewayConfig.load(
        before_scopes(
            {
                "session": {
                    "agentToAgent": {
                        "maxPingPongTurns": 0,
                        "maxHops": 3,
                        "budget": {"maxRuns": 2},
                        **agent_to_agent,
                    }
                }
            }
        )
    )


def play(tmp_path: Path, agents: CallingBack, config: GatewayConfig) -> str:
    """Run the chain from one outside message into s1; the store's URL."""
    store = f"sqlite:///{tmp_path}/sessions.db"
    with SyncGateway.open(store=store) as gateway:
        for n in range(1, LAST + 1):
            gateway.record_message(key(n), role="user", content="hi")
        gateway.record_message(OUTSIDE, role="user", content="hi")
    with live_server(store, runtime=agents, config=config) as live:
        agents.url = live.url
        with live.client(OUTSIDE) as client:
            first = client.post(
                "/v1/tools/sessions_send",
                json={"sessionKey": key(1), "message": "go", "timeoutSeconds": 0},
            ).json()
        assert first["status"] == "accepted", first
        assert agents.done.wait(HANG_SECONDS), agents.answers
    return store


def recorded(store: str) -> tuple[list[dict[str, Any]], list[AccessRefusal.AccessRefused]]:
    with SyncGateway.open(store=store) as gateway:
        runs = gateway.runs(limit=1000)["runs"]
        refusals = [
            event
            for _, event in store_of(gateway).events()
            if isinstance(event, AccessRefusal.AccessRefused)
        ]
    return runs, refusals


BUDGET_SPENT = "trace budget exceeded: maxRuns 2 reached (2 runs in this trace)"


@pytest.mark.parametrize("with_header", [True, False], ids=["with-header", "without-header"])
def test_a_callback_is_counted_in_its_runs_trace_with_or_without_the_header(
    tmp_path: Path, with_header: bool
) -> None:
    agents = CallingBack(with_header=with_header)
    runs, refusals = recorded(play(tmp_path, agents, settings()))
    # s1 -> s2 accepted (the trace's second run); s2 -> s3 refused by the budget.
    assert sorted(agents.answers) == [1, 2]
    assert agents.answers[1]["status"] == "accepted"
    assert agents.answers[2] == {"status": "forbidden", "error": BUDGET_SPENT}
    primaries = [run for run in runs if run["step"] == "primary"]
    assert sorted(run["sessionKey"] for run in primaries) == [key(1), key(2)]
    assert len({run["traceId"] for run in runs}) == 1
    assert {run["hop"] for run in primaries} == {1, 2}
    assert ("sessions_send", BUDGET_SPENT) in [(r.tool, r.message) for r in refusals]


def test_a_callback_without_the_header_may_be_refused_instead(tmp_path: Path) -> None:
    agents = CallingBack(with_header=False)
    store = play(tmp_path, agents, settings(callbacksWithoutRun="refuse"))
    runs, refusals = recorded(store)
    (s1,) = [run for run in runs if run["step"] == "primary"]
    message = (
        f"session {key(1)} has a run in progress ({s1['runId']}): a call it makes must name "
        "that run (the X-Sessionwire-Run header over HTTP, _meta sessionwire/run over MCP; "
        "session.agentToAgent.callbacksWithoutRun: refuse)"
    )
    assert agents.answers == {1: {"status": "forbidden", "tool": "sessions_send", "error": message}}
    # Recorded on the calling run's chain: it is in that trace's audit.
    assert [
        (r.check, r.rule, r.requester_key, r.trace_id) for r in refusals if r.check == "run_header"
    ] == [("run_header", "session.agentToAgent.callbacksWithoutRun", key(1), s1["traceId"])]
