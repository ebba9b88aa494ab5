"""Runs as a read model (issue 13, item 1; ADR 0017): ``gw.run`` and ``gw.runs`` answer
from ``sw_runs``, written in the transaction that records each run's events, on every
store; an existing store fills it once when opened; ``audit rebuild`` compares it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import pytest
from audit_rig import RawStore, populate, run_cli
from postgres_server import ON_CITUS
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.citus_schema import NotDistributed
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
A = "agent:main:work:a"
B = "agent:main:work:b"
OTHER = "agent:other:main"
OTHER_WORK = "agent:other:work"
QUIET = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
SLOW = [
    {"step": "primary", "reply": "done: {message}", "delaySeconds": 5, "model": "m-1",
     "usage": {"input": 3, "output": 4}},
    {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    {"step": "subagent_task", "reply": "done"},
    {"step": "subagent_announce", "reply": "Result: all done"},
]  # fmt: skip


@asynccontextmanager
async def open_gateway(
    store: str,
    clock: VirtualClock,
    *,
    config: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    sessions: tuple[str, ...] = (MAIN, A, B),
) -> AsyncIterator[Gateway]:
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(config or QUIET)),
        store=store,
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": rules if rules is not None else SLOW}),
        delivery=CapturingDelivery(),
    )
    try:
        for key in sessions:
            await gw.record_message(key, role="user", content="(opened)")
        yield gw
    finally:
        await gw.close()


async def fire(gw: Gateway, target: str, message: str, requester: str = MAIN) -> str:
    result = await gw.call_tool(
        requester, "sessions_send", {"sessionKey": target, "message": message, "timeoutSeconds": 0}
    )
    assert result["status"] == "accepted", result
    return str(result["runId"])


async def found(gw: Gateway, run_id: str) -> dict[str, Any]:
    run = await gw.run(run_id)
    assert run is not None
    return run


async def test_a_run_row_follows_queued_running_and_ok(store_url: str, clock: VirtualClock) -> None:
    async with open_gateway(store_url, clock) as gw:
        first = await fire(gw, A, "one")
        second = await fire(gw, A, "two")  # waits in A's mailbox behind the first
        await gw.wait_idle()
        running, queued = await found(gw, first), await found(gw, second)
        assert running["status"] == "running"
        assert running["startedAt"] == clock.now().isoformat().replace("+00:00", "Z")
        assert running["endedAt"] is None
        assert running["attempt"] == 1
        assert queued["status"] == "queued"
        assert queued["startedAt"] is None
        assert queued["attempt"] == 0

        await clock.advance(5)
        await gw.wait_idle()
        ended = await found(gw, first)
        assert ended["status"] == "ok"
        assert ended["endedAt"] is not None
        assert ended["usage"]["input"] == 3
        assert ended["model"] == "m-1"
        assert ended["error"] is None
        assert ended == {
            **ended,
            "runId": first,
            "sessionKey": A,
            "step": "primary",
            "requesterSessionKey": MAIN,
            "traceId": first,
            "parentRunId": None,
            "hop": 1,
        }
        # A send's primary run belongs to the exchange its send opened.
        assert "exchangeId" in ended
        assert "spawnId" not in ended
        assert (await found(gw, second))["status"] == "running"


async def test_the_announce_run_of_an_exchange_is_listed_under_its_trace(
    store_url: str, clock: VirtualClock
) -> None:
    async with open_gateway(store_url, clock) as gw:
        primary = await fire(gw, A, "hello")
        await clock.advance(5)
        await gw.wait_idle()
        runs = (await gw.runs(trace_id=primary))["runs"]
        assert [run["step"] for run in runs] == ["announce", "primary"]  # newest first
        announce, first = runs
        assert announce["parentRunId"] == primary
        assert announce["exchangeId"] == first["exchangeId"]
        assert announce["hop"] == 1


async def test_a_spawns_child_and_announce_runs_name_their_spawn(
    store_url: str, clock: VirtualClock
) -> None:
    async with open_gateway(store_url, clock) as gw:
        spawned = await gw.call_tool(MAIN, "sessions_spawn", {"task": "sum up"})
        assert spawned["status"] == "accepted", spawned
        await gw.wait_idle()
        child = await found(gw, spawned["runId"])
        assert child["step"] == "subagent_task"
        assert child["sessionKey"] == spawned["childSessionKey"]
        assert child["status"] == "ok"
        runs = (await gw.runs(trace_id=child["traceId"]))["runs"]
        steps = {run["step"]: run for run in runs}
        assert set(steps) == {"subagent_task", "subagent_announce"}
        assert steps["subagent_announce"]["spawnId"] == child["spawnId"]
        assert "exchangeId" not in child


async def test_runs_filter_by_session_status_and_trace_newest_first_within_the_limit(
    store_url: str, clock: VirtualClock
) -> None:
    async with open_gateway(store_url, clock, rules=[]) as gw:
        ids = []
        for index, target in enumerate([A, B, A, B, A]):
            ids.append(await fire(gw, target, f"m{index}"))
            await gw.wait_idle()
            await clock.advance(1)
        primaries = [run for run in (await gw.runs(limit=1000))["runs"] if run["step"] == "primary"]
        assert [run["runId"] for run in primaries] == ids[::-1]
        of_a = (await gw.runs(session_key=A, limit=1000))["runs"]
        assert [r["runId"] for r in of_a if r["step"] == "primary"] == [ids[4], ids[2], ids[0]]
        assert {run["sessionKey"] for run in of_a} == {A}
        # A short key names its canonical session, as in the tools.
        assert await gw.runs(session_key="work:a", limit=1000) == {"runs": of_a}
        assert [run["runId"] for run in (await gw.runs(session_key=B, limit=1))["runs"]] == [ids[3]]
        assert [run["runId"] for run in (await gw.runs(trace_id=ids[1]))["runs"]][-1] == ids[1]
        assert all(run["status"] == "ok" for run in (await gw.runs(status="ok"))["runs"])
        assert await gw.runs(status="queued") == {"runs": []}
        assert len((await gw.runs(limit=2))["runs"]) == 2


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"status": "finished"}, "status must be one of"),
        ({"limit": 0}, "limit must be"),
        ({"limit": 1001}, "limit must be"),
        ({"limit": True}, "limit must be"),
        ({"limit": "5"}, "limit must be"),
        ({"trace_id": 5}, "trace_id must be"),
        ({"session_key": "agent:"}, "."),
    ],
)
async def test_bad_filters_are_a_clear_value_error(
    filters: dict[str, Any], message: str, clock: VirtualClock
) -> None:
    async with open_gateway("memory", clock) as gw:
        with pytest.raises(ValueError, match=message):
            await gw.runs(**filters)


async def test_an_unknown_or_malformed_run_id_is_none(store_url: str, clock: VirtualClock) -> None:
    async with open_gateway(store_url, clock) as gw:
        run_id = await fire(gw, A, "hi")
        assert await gw.run(str(uuid4())) is None
        for malformed in ("", "nope", "1' OR '1'='1", run_id + "0", None, 42):
            assert await gw.run(malformed) is None  # type: ignore[arg-type]
        # Any spelling of a UUID names the same run.
        assert (await found(gw, f" {run_id.upper()} "))["runId"] == run_id


A2A_MAIN_OPS = {
    **QUIET,
    "tools": {"agentToAgent": {"enabled": True, "allow": ["main", "ops"]}},
}


async def test_a_run_of_a_session_the_requester_may_not_see_is_not_found(
    store_url: str, clock: VirtualClock
) -> None:
    ops = "agent:ops:main"
    async with open_gateway(
        store_url, clock, config=A2A_MAIN_OPS, sessions=(MAIN, A, ops, OTHER, OTHER_WORK)
    ) as gw:
        to_ops = await fire(gw, ops, "for ops")
        to_a = await fire(gw, A, "for a")
        await clock.advance(5)
        await gw.wait_idle()
        # "other" is not in the agent-to-agent allow list: ops's runs are hidden from it,
        # exactly as a missing run (and sessions_history of ops would be refused).
        assert await gw.run(to_ops, requester="agent:other:main") is None
        assert await gw.run(to_ops, requester=ops) == await gw.run(to_ops)
        assert await gw.run(to_ops, requester=MAIN) == await gw.run(to_ops)
        assert await gw.run(to_a, requester="agent:other:main") is None
        assert await gw.runs(requester="agent:other:main") == {"runs": []}
        # Runs of another agent's own sessions: hidden from ops and main, seen by other.
        own = await fire(gw, "agent:other:work", "mine", requester="agent:other:main")
        await gw.wait_idle()
        assert await gw.run(own, requester=ops) is None
        assert {run["runId"] for run in (await gw.runs(requester="agent:other:main"))["runs"]} == {
            own
        }
        seen_by_ops = {run["sessionKey"] for run in (await gw.runs(requester=ops))["runs"]}
        assert seen_by_ops == {ops, A}
        assert "agent:other:work" in {run["sessionKey"] for run in (await gw.runs())["runs"]}


async def test_a_requesters_listing_pages_past_hidden_runs(
    clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sessionwire.application.run_queries.VISIBLE_PAGE", 2)
    ops = "agent:ops:main"
    async with open_gateway(
        "memory", clock, config=A2A_MAIN_OPS, rules=[], sessions=(MAIN, ops, OTHER, OTHER_WORK)
    ) as gw:
        visible = await fire(gw, ops, "early")
        await gw.wait_idle()
        for index in range(5):  # newer runs, all hidden from ops
            await clock.advance(1)
            await fire(gw, OTHER_WORK, f"late {index}", requester=OTHER)
            await gw.wait_idle()
        listed = (await gw.runs(requester=ops, limit=1))["runs"]
        assert [run["runId"] for run in listed] == [visible]


def test_the_sync_gateway_answers_the_same(tmp_path: Any) -> None:
    from sessionwire import SyncGateway

    url = f"sqlite:///{tmp_path}/sync.db"
    gw = SyncGateway.open(config=before_scopes(QUIET), store=url)
    try:
        gw.record_message(MAIN, role="user", content="hi")
        assert gw.runs() == {"runs": []}
        assert gw.run(str(uuid4())) is None
        with pytest.raises(ValueError, match="status"):
            gw.runs(status="nope")
    finally:
        gw.close()


# Existing stores and the rebuild ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def raw(request: pytest.FixtureRequest, tmp_path: Any, clock: VirtualClock) -> RawStore:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/runs.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    await populate(url, clock)
    return RawStore(url)


async def listed(url: str, clock: VirtualClock) -> list[dict[str, Any]]:
    gw = await Gateway.open(config=GatewayConfig.load(before_scopes()), store=url, clock=clock)
    try:
        return list((await gw.runs(limit=1000))["runs"])
    finally:
        await gw.close()


async def test_a_store_recorded_before_the_runs_read_model_fills_it_when_opened(
    raw: RawStore, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    before = await listed(raw.url, clock)
    assert {run["step"] for run in before} == {"subagent_task", "subagent_announce"}
    assert all("spawnId" in run for run in before)

    raw.run(("DELETE FROM sw_runs", ()))  # as a store made before the table was
    assert await listed(raw.url, clock) == before
    raw.run(("DROP TABLE sw_runs", ()))  # an older store still: no table at all
    if ON_CITUS and not raw.is_sqlite:
        # The table made anew is local: refused until distributed (ADR 0051's steps).
        with pytest.raises(NotDistributed, match="first: sw_runs: primary key"):
            await listed(raw.url, clock)
        assert await listed(f"{raw.url}&upgrade=yes", clock) == before
    assert await listed(raw.url, clock) == before
    assert rebuilt_runs(capsys, raw.url) == {
        "added": 0,
        "removed": 0,
        "changed": 0,
        "examples": [],
    }


def rebuilt_runs(capsys: pytest.CaptureFixture[str], url: str, *flags: str) -> dict[str, Any]:
    _code, out, err = run_cli(capsys, "--store", url, "--json", "audit", "rebuild", *flags)
    assert out, err
    report: dict[str, Any] = json.loads(out)["tables"]["runs"]
    return report


async def test_audit_rebuild_finds_and_repairs_a_tampered_run_row(
    raw: RawStore, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_id,) = raw.rows("SELECT run_id FROM sw_runs WHERE step = 'subagent_task'")[0]
    raw.run(("UPDATE sw_runs SET status = 'queued', spawn_id = NULL WHERE run_id = ?", (run_id,)))
    assert rebuilt_runs(capsys, raw.url, "--check")["changed"] == 1
    assert rebuilt_runs(capsys, raw.url)["examples"] == [f"changed {run_id}"]
    assert rebuilt_runs(capsys, raw.url)["changed"] == 0
    (status,) = raw.rows("SELECT status FROM sw_runs WHERE run_id = ?", (run_id,))[0]
    assert status == "ok"
