"""``audit trace``: the chain of one trace (who caused what), read through its index.

Runs on the memory, SQLite and PostgreSQL stores. The tree must hold every stream the
log records for the trace, each under the stream that caused it, and the query must
read the trace's own streams, never the whole log.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from audit_rig import RawStore, run_cli
from sessionwire import Gateway
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.audit.trace import Trace, trace_chain
from sessionwire.testing import VirtualClock
from test_causality import OPERATOR, A, CycleAgents, open_cycle


def streams_in_log(gw: Gateway, trace_id: str) -> set[str]:
    return {
        str(event.originator_id)
        for _, event in store_of(gw).events()
        if event.originator_version == 1 and getattr(event, "trace_id", None) == trace_id
    }


class NoScan:
    """The store, except that reading the whole log fails the test."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name == "events":
            raise AssertionError("the trace read the whole log")
        return getattr(self.store, name)


async def chain_of_three(store_url: str, clock: VirtualClock) -> tuple[Gateway, str]:
    gw = await open_cycle(store_url, clock, CycleAgents(), maxHops=3)
    sent = await gw.call_tool(
        OPERATOR, "sessions_send", {"sessionKey": A, "message": "loop", "timeoutSeconds": 0}
    )
    await gw.wait_idle()
    return gw, str(sent["runId"])


def check_tree(trace: Trace) -> None:
    ids = [node.id for node in trace.nodes]
    assert len(ids) == len(set(ids))
    seen: set[str] = set()
    for node in trace.nodes:
        # Depth first: a node's parent came before it, one level up.
        if node.parent_id is not None:
            assert node.parent_id in seen
            parent = next(n for n in trace.nodes if n.id == node.parent_id)
            assert node.depth == parent.depth + 1
        else:
            assert node.depth == 0
        seen.add(node.id)


async def test_a_trace_is_every_stream_of_the_chain_each_under_its_cause(
    store_url: str, clock: VirtualClock
) -> None:
    gw, trace_id = await chain_of_three(store_url, clock)
    try:
        trace = trace_chain(NoScan(store_of(gw)), trace_id)  # type: ignore[arg-type]
        assert {node.id for node in trace.nodes} == streams_in_log(gw, trace_id)
        check_tree(trace)
        # The chain starts with the operator's send: the first run is the trace's id.
        first = trace.nodes[0]
        assert (first.id, first.kind, first.depth, first.hops) == (trace_id, "run", 0, 1)
        # Each hop is one level of sends deeper; the refusal at hop 3 ends the chain.
        (refusal,) = [node for node in trace.nodes if node.kind == "refusal"]
        assert refusal.hops == 3
        assert refusal.parent_id is not None
        cause = next(n for n in trace.nodes if n.id == refusal.parent_id)
        assert (cause.kind, cause.hops) == ("run", 3)
        exchanges = [node for node in trace.nodes if node.kind == "exchange"]
        assert exchanges, "each send opened an exchange"
        for exchange in exchanges:
            assert exchange.parent_id is not None
        # Every event of every stream is there, in log order within the stream.
        for node in trace.nodes:
            positions = [entry.position for entry in node.entries]
            assert positions == sorted(positions)
            assert {entry.trace_id for entry in node.entries} == {trace_id}
        assert await gw.trace(trace_id) == trace
    finally:
        await gw.close()


async def test_an_unknown_trace_is_not_found(store_url: str, clock: VirtualClock) -> None:
    gw, _ = await chain_of_three(store_url, clock)
    try:
        with pytest.raises(LookupError, match="Trace not found"):
            trace_chain(NoScan(store_of(gw)), "no-such-trace")  # type: ignore[arg-type]
    finally:
        await gw.close()


async def test_audit_trace_on_the_command_line(
    tmp_path: Path, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    store_file = f"sqlite:///{tmp_path}/store.db"
    gw, trace_id = await chain_of_three(store_file, clock)
    expected = streams_in_log(gw, trace_id)
    await gw.close()
    capsys.readouterr()

    assert main(["--store", store_file, "audit", "trace", trace_id, "--json"]) == 0
    shown: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert {node["id"] for node in shown["nodes"]} == expected
    assert shown["nodes"][0]["id"] == trace_id

    assert main(["--store", store_file, "audit", "trace", trace_id]) == 0
    table = capsys.readouterr().out
    assert f"trace {trace_id}" in table
    assert "refusal" in table
    assert "exchange opened" in table

    assert main(["--store", store_file, "audit", "trace", "nope"]) == 1
    assert "Trace not found: nope" in capsys.readouterr().err


def test_sessions_history_says_who_caused_each_line(
    tmp_path: Path, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    store_file = f"sqlite:///{tmp_path}/store.db"

    async def record() -> str:
        gw, trace_id = await chain_of_three(store_file, clock)
        await gw.close()
        return trace_id

    # A plain test: the command runs its own event loop.
    trace_id = asyncio.run(record())
    capsys.readouterr()
    b = "agent:main:discord:group:b"

    assert main(["--store", store_file, "--json", "sessions", "history", b]) == 0
    lines = json.loads(capsys.readouterr().out)["messages"]
    sent_by_a = next(line for line in lines if line["provenance"]["kind"] == "a2a")
    # B's run was caused by A's run (the trace's first), one hop further.
    assert sent_by_a["provenance"]["traceId"] == trace_id
    assert sent_by_a["provenance"]["parentRunId"] == trace_id
    assert sent_by_a["provenance"]["hops"] == 2

    assert main(["--store", store_file, "sessions", "history", b]) == 0
    table = capsys.readouterr().out
    assert f"a2a from {A} · trace {trace_id[:8]}" in table
    assert f"parent {trace_id[:8]} hop 2" in table


async def test_a_store_without_trace_rows_gets_them_from_audit_rebuild(
    tmp_path: Path, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    gw, trace_id = await chain_of_three(url, clock)
    expected = await gw.trace(trace_id)
    await gw.close()
    # As recorded before the trace rows: the sessions' index rows only.
    RawStore(url).run(("DELETE FROM sw_session_streams WHERE session_key LIKE 'trace:%'", ()))
    capsys.readouterr()
    assert main(["--store", url, "audit", "trace", trace_id]) == 1

    code, out, err = run_cli(capsys, "--store", url, "--json", "audit", "rebuild")
    assert code == 1, err  # the live index lacked rows the log implies: now it has them
    assert '"session_streams"' in out
    assert main(["--store", url, "--json", "audit", "trace", trace_id]) == 0
    assert json.loads(capsys.readouterr().out) == expected.model_dump(mode="json")
