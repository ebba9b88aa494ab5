"""``audit timeline KEY`` reads the session's own stream and the streams an index names
for it (written with the events, in the same transaction), not the whole log; a store
recorded before the index existed is read whole until ``audit rebuild`` fills it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from audit_rig import QUICK, RawStore, run_cli
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.audit.timeline import TimelineEntry, _scanned
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

KEYS = ["main", "discord:group:dev", "agent:work:main"]


async def recorded(url: str, clock: VirtualClock) -> Gateway:
    gateway = await Gateway.open(
        config=GatewayConfig(),
        store=url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": QUICK}),
        delivery=CapturingDelivery(),
    )
    await gateway.record_message("main", role="user", content="hello")
    await gateway.record_message("discord:group:dev", role="user", content="standup")
    await gateway.record_message("agent:work:main", role="user", content="elsewhere")
    spawned = await gateway.call_tool("main", "sessions_spawn", {"task": "sum up"})
    assert spawned["status"] == "accepted", spawned
    await gateway.wait_idle()
    # Another agent's session, with agent-to-agent off: refused, and the refusal recorded.
    refused = await gateway.call_tool("main", "sessions_history", {"sessionKey": "agent:work:main"})
    assert refused["status"] == "forbidden", refused
    await gateway.record_message("discord:group:dev", role="assistant", content="noted")
    return gateway


def full_scan(gateway: Gateway, key: str) -> list[TimelineEntry]:
    return list(_scanned(store_of(gateway), internals(gateway).rules.canonical(key)))


def no_log_scan(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    def scan(*_: Any, **__: Any) -> Iterator[Any]:
        raise AssertionError("the timeline read the whole log")

    monkeypatch.setattr(store_of(gateway), "events", scan)


async def test_a_timeline_reads_only_the_streams_of_its_session(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = await recorded(store_url, clock)
    try:
        expected = {key: full_scan(gateway, key) for key in KEYS}
        child = next(e.data["child_key"] for e in expected["main"] if e.event == "SubagentSpawned")
        expected[child] = full_scan(gateway, child)
        no_log_scan(gateway, monkeypatch)

        for key, entries in expected.items():
            assert (await gateway.timeline(key)).entries == entries, key
        kinds = {key: {e.kind for e in entries} for key, entries in expected.items()}
        assert kinds["main"] >= {"session", "spawn", "run", "refusal"}
        assert kinds[child] >= {"session", "spawn", "run"}
        assert kinds["agent:work:main"] == {"session", "refusal"}
        assert kinds["discord:group:dev"] == {"session"}
    finally:
        await gateway.close()


async def test_a_store_without_the_index_is_read_whole_until_rebuilt(
    tmp_path: Any,
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    gateway = await recorded(url, clock)
    expected = (await gateway.timeline("main")).entries
    await gateway.close()
    RawStore(url).run(("DELETE FROM sw_session_streams", ()))  # as before the index

    gateway = await Gateway.open(config=GatewayConfig(), store=url, clock=clock)
    try:
        assert (await gateway.timeline("main")).entries == expected
    finally:
        await gateway.close()

    code, out, err = run_cli(capsys, "--store", url, "--json", "audit", "rebuild")
    assert code == 1, err  # the live index differed from the log: now it holds the rows
    assert '"session_streams"' in out

    gateway = await Gateway.open(config=GatewayConfig(), store=url, clock=clock)
    try:
        no_log_scan(gateway, monkeypatch)
        assert (await gateway.timeline("main")).entries == expected
    finally:
        await gateway.close()
