"""The reads a ``sessions_send`` makes itself (issue 37 item 7, ADR 0037's amendment):
each is a trip to a store thread and back, most of what a short read costs (ADR 0036
§4). What the send decides on is read in as few trips as its order allows; a read that
must be fresh (the trace's count under its lock, the target's runs in flight for the
busy decision) is still made in the call, never taken from an earlier one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from reader_trips import count_reads, count_reads_of
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import ScriptedRuntime, VirtualClock

REQ = "discord:group:req"
SEND_TO_MAIN = {"sessionKey": "main", "message": "ping", "timeoutSeconds": 30}
RULES = [
    # The requester's turn sends into main and waits for its reply (an in-turn send).
    {
        "session": f"agent:main:{REQ}",
        "step": "primary",
        "match": "^go$",
        "tools": [{"tool": "sessions_send", "params": SEND_TO_MAIN}],
        "reply": "sent",
    },
    {"step": "primary", "reply": "done"},
    {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    {"reply": "REPLY_SKIP"},
]


@asynccontextmanager
async def gateway(
    store_url: str, clock: VirtualClock, **agent_to_agent: Any
) -> AsyncIterator[Gateway]:
    settings = {"session": {"agentToAgent": {"maxPingPongTurns": 0, **agent_to_agent}}}
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes(settings)),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": RULES}),
    )
    try:
        await gw.record_message(REQ, role="user", content="hi", channel="discord")
        await gw.record_message("main", role="user", content="hi")
        yield gw
    finally:
        await gw.close()


async def test_a_send_from_outside_reads_twice_then_waits_without_reading(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The target's row (the access checks), then in one trip what the send is decided
    # on: the requester's row (its channel) and the target's runs in flight. The wait
    # for the run it queued here reads nothing: this gateway's actor tells its end.
    async with gateway(store_url, clock) as gw:
        reads = count_reads_of("sessions_send", monkeypatch, gw)
        sent = await gw.call_tool(REQ, "sessions_send", SEND_TO_MAIN)
        assert (sent["status"], sent["reply"]) == ("ok", "done")
        assert reads == [["session", "_requester_and_target"]]


async def test_a_send_from_a_turn_reads_four_times_under_a_trace_budget(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From a turn: first, in one trip, whether the turn's earlier attempt made this send
    # (its run, its busy decision); the trace's count under the trace's lock (decision
    # 31), then the two reads of a send from outside.
    async with gateway(store_url, clock, budget={"maxRuns": 40}) as gw:
        reads = count_reads_of("sessions_send", monkeypatch, gw)
        await gw.call_tool("main", "sessions_send", {"sessionKey": REQ, "message": "go"})
        await gw.wait_idle()
        outer, in_turn = reads
        assert outer == ["_count", "session", "_requester_and_target"]
        assert in_turn == ["_earlier_records", "_count", "session", "_requester_and_target"]


async def test_a_send_and_what_it_sets_going_read_twelve_times(
    store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Until the gateway is idle: the send's two reads; its run's load and its outcome's;
    # the exchange's loads (each step looks afresh: exactly once across gateways), the
    # announce run's (absent, its load and its outcome's). Neither the run's turn nor a
    # wait reads again what was just read, nor does the announce run's send policy: it
    # is decided on the target's session the reply's unit of work holds. 13 since ADR
    # 0057 moved the exchange's steps into its runs' commits (14 before), 12 since that
    # policy check stopped reading the session again.
    async with gateway(store_url, clock) as gw:
        reads = count_reads(gw, monkeypatch)
        await gw.call_tool(REQ, "sessions_send", SEND_TO_MAIN)
        await gw.wait_idle()
        assert len(reads) == 12, repr(reads)
        assert reads.count("work") == 10
        assert reads.count("session") == 1
