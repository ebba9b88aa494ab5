"""``sessionwire runs list|show|cancel`` through the real command line, on SQLite and
PostgreSQL: tables for people, ``--json`` for scripts, exit 1 for an unknown run, exit 2
for bad usage; a cancel beside a live gateway (SQLite: refused, one writer per file;
PostgreSQL: the gateway running the run stops it).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from uuid import UUID

import anyio.to_thread
import pytest
from command_line import Ran, run_in_process, run_process
from sessionwire import Gateway
from sessionwire.adapters.cli.runs import STATUSES
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.run_read_model import RUN_STATUSES
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        {"step": "primary", "match": "^slow", "reply": "late", "delaySeconds": 120},
        {"step": "primary", "reply": "pong"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
WAIT_SECONDS = 60


def cli(*args: str, store: str) -> Ran:
    return run_in_process(*args, env={"SESSIONWIRE_STORE": store})


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db"
    return str(request.getfixturevalue("postgres_url"))


async def open_gateway(store: str) -> Gateway:
    return await Gateway.open(store=store, runtime=ScriptedRuntime.from_dict(SCRIPT))


async def started(gateway: Gateway, message: str, target: str = "discord:group:ops") -> str:
    """A run of ``target`` sent by main; with a slow message, once it is running."""
    sent = await gateway.call_tool(
        "main", "sessions_send", {"sessionKey": target, "message": message, "timeoutSeconds": 0}
    )
    run_id = str(sent["runId"])
    with anyio.fail_after(WAIT_SECONDS):
        while (await gateway.run(run_id) or {}).get("status") == "queued":
            await asyncio.sleep(0)  # one loop turn: the actor takes the run
    return run_id


@pytest.fixture
async def runs(store: str) -> dict[str, str]:
    """A finished run, and one left running by a gateway that has stopped."""
    gateway = await open_gateway(store)
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message("discord:group:ops", role="user", content="standup")
    done = await gateway.call_tool(
        "main",
        "sessions_send",
        {"sessionKey": "discord:group:ops", "message": "ping", "timeoutSeconds": 30},
    )
    await gateway.wait_idle()
    left = await started(gateway, "slow job")
    await gateway.close()
    return {"done": str(done["runId"]), "left": left}


def test_the_statuses_offered_are_the_read_models() -> None:
    assert STATUSES == RUN_STATUSES


async def test_runs_are_listed_as_a_table_and_as_json(store: str, runs: dict[str, str]) -> None:
    table = await anyio.to_thread.run_sync(lambda: cli("runs", "list", store=store))
    listed = await anyio.to_thread.run_sync(lambda: cli("runs", "list", "--json", store=store))
    ok = await anyio.to_thread.run_sync(
        lambda: cli("--json", "runs", "list", "--status", "ok", "--limit", "1", store=store)
    )
    ops = await anyio.to_thread.run_sync(
        lambda: cli("runs", "list", "--session", "discord:group:ops", "--json", store=store)
    )
    assert table.returncode == 0, table.stderr
    assert runs["done"] in table.stdout
    assert "running" in table.stdout
    assert "run(s), newest first" in table.stdout
    ids = [run["runId"] for run in json.loads(listed.stdout)["runs"]]
    assert set(runs.values()) <= set(ids)
    assert [run["status"] for run in json.loads(ok.stdout)["runs"]] == ["ok"]
    assert {run["sessionKey"] for run in json.loads(ops.stdout)["runs"]} == {
        "agent:main:discord:group:ops"
    }


async def test_a_run_is_shown_and_an_unknown_one_is_exit_1(
    store: str, runs: dict[str, str]
) -> None:
    shown = await anyio.to_thread.run_sync(lambda: cli("runs", "show", runs["done"], store=store))
    as_json = await anyio.to_thread.run_sync(
        lambda: cli("runs", "show", runs["done"], "--json", store=store)
    )
    unknown = await anyio.to_thread.run_sync(
        lambda: cli("runs", "show", "00000000-0000-4000-8000-000000000000", store=store)
    )
    malformed = await anyio.to_thread.run_sync(lambda: cli("runs", "show", "nope", store=store))
    assert shown.returncode == 0, shown.stderr
    assert "agent:main:discord:group:ops" in shown.stdout
    assert json.loads(as_json.stdout)["status"] == "ok"
    assert unknown.returncode == malformed.returncode == 1
    assert unknown.stdout == ""
    assert "no run '00000000-0000-4000-8000-000000000000'" in unknown.stderr
    assert "no run 'nope'" in malformed.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "list", "--status", "done"),
        ("runs", "list", "--limit", "0"),
        ("runs", "list", "--limit", "1001"),
        ("runs", "show"),
        ("runs", "cancel"),
    ],
)
def test_bad_usage_is_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = cli(*args, store=f"sqlite:///{tmp_path}/unused.db")
    assert result.returncode == 2
    assert result.stdout == ""


async def test_cancel_a_run_left_running_and_an_ended_one(store: str, runs: dict[str, str]) -> None:
    cancelled = await anyio.to_thread.run_sync(
        lambda: cli("runs", "cancel", runs["left"], "--reason", "stale", store=store)
    )
    again = await anyio.to_thread.run_sync(
        lambda: cli("runs", "cancel", runs["left"], "--json", store=store)
    )
    ended = await anyio.to_thread.run_sync(lambda: cli("runs", "cancel", runs["done"], store=store))
    unknown = await anyio.to_thread.run_sync(lambda: cli("runs", "cancel", "nope", store=store))
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelled run {runs['left']}" in cancelled.stdout
    answer = json.loads(again.stdout)
    assert answer["status"] == "cancelled"
    assert answer["cancelled"] is False
    assert ended.returncode == 0
    assert "not cancelled: the run had already ended (ok)" in ended.stdout
    assert unknown.returncode == 1
    assert "no run 'nope'" in unknown.stderr


async def test_a_cancel_beside_a_live_gateway(store: str, runs: dict[str, str]) -> None:
    """SQLite: the serving gateway holds the one writer's lock, so the CLI's cancel is
    refused naming it, and the run runs on. PostgreSQL: the cancel is recorded, and the
    gateway running the run stops it (its cancellation watch)."""
    owner = await open_gateway(store)
    try:
        # The ops group is busy with the run the fixture left (resumed here): another group.
        await owner.record_message("discord:group:dev", role="user", content="standup")
        run_id = await started(owner, "slow again", "discord:group:dev")
        listed = await anyio.to_thread.run_sync(
            lambda: cli("runs", "list", "--json", "--status", "running", store=store)
        )
        answer = await anyio.to_thread.run_sync(
            lambda: cli("runs", "cancel", run_id, "--json", store=store)
        )
        assert run_id in [run["runId"] for run in json.loads(listed.stdout)["runs"]]
        if store.startswith("sqlite"):
            assert answer.returncode == 1
            assert "held by another gateway" in answer.stderr
            assert "one writer per SQLite file" in answer.stderr
            assert "cancel the run through that gateway" in answer.stderr
            assert (await owner.run(run_id) or {})["status"] == "running"
        else:
            assert answer.returncode == 0, answer.stderr
            assert json.loads(answer.stdout)["cancelled"] is True
            # The owner's runtime call is stopped and its waiters hear it ended.
            ended: Any = await internals(owner).run_engine.wait(UUID(run_id), timeout=WAIT_SECONDS)
            assert ended is not None
            assert ended.status == "cancelled"
    finally:
        await owner.close()


def test_an_unknown_run_as_a_real_process(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/p.db"
    assert run_in_process("--store", store, "record", "main", "hello").returncode == 0
    result = run_process("--store", store, "runs", "show", "nope")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip() == "sessionwire: no run 'nope' (unknown, or not a run id)"
