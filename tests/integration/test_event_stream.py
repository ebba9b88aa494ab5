"""The live event stream (``gw.subscribe``, ADR 0023) on every store: order, resumption,
filters, visibility, waking without polling, and subscribers that never read."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

REQ = "agent:main:discord:group:req"
TARGET = "agent:main:discord:group:target"


async def take(subscription: Any, count: int) -> list[dict[str, Any]]:
    """The next ``count`` events; the test fails (not hangs) if they never come, since
    every wait below is on the gateway having recorded them already."""
    found = []
    for _ in range(count):
        found.append(await asyncio.wait_for(anext(subscription), timeout=30))
    return found


async def listed(gw: Gateway, **filters: Any) -> list[dict[str, Any]]:
    """What a subscriber gets of the events recorded so far (sealed first: PostgreSQL
    seals behind its writers)."""
    store_of(gw).seal()
    return [event async for event in gw.subscribe(**filters).recorded()]


def recorded(gw: Gateway) -> list[tuple[int, str]]:
    """The store's sealed log, as (position, event name)."""
    store_of(gw).seal()
    return [(p, type(e).__name__) for p, e in store_of(gw).records_after(0, 10_000)]


async def test_a_subscriber_from_p_sees_exactly_the_events_after_p_in_order(
    gateway: Gateway,
) -> None:
    for n in range(5):
        await gateway.record_message("main", role="user", content=f"m{n}")
    log = recorded(gateway)
    assert len(log) == 6  # the session opened, five messages
    for start in (0, 2, 6):
        subscription = gateway.subscribe(after=start)
        got = [event async for event in subscription.recorded()]
        assert [(e["position"], e["type"]) for e in got] == log[start:]
    first = (await listed(gateway))[1]
    assert first["sessionKey"] == "agent:main:main"
    assert first["kind"] == "session"
    assert first["summary"] == "user message: 'm0'"
    assert first["data"]["message"]["content"][0]["text"] == "m0"
    assert first["timestamp"].startswith("2026-05-01T12:00:00")
    assert set(first) >= {"position", "type", "sessionKey", "timestamp", "traceId", "runId"}


async def test_new_events_wake_a_waiting_subscriber(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="before")
    store_of(gateway).seal()  # PostgreSQL seals behind its writers
    subscription = gateway.subscribe(after=store_of(gateway).sealed_position())
    waiting = asyncio.ensure_future(take(subscription, 2))
    await asyncio.sleep(0)
    # Idle: the subscriber waits, and wait_idle does not count it as work.
    await gateway.wait_idle()
    assert not waiting.done()
    await gateway.record_message("main", role="user", content="one")
    await gateway.record_message("main", role="user", content="two")
    got = await waiting
    assert [e["data"]["message"]["content"][0]["text"] for e in got] == ["one", "two"]


async def test_close_ends_open_subscriptions(gateway: Gateway) -> None:
    subscription = gateway.subscribe()
    waiting = asyncio.ensure_future(take(subscription, 1))
    await asyncio.sleep(0)
    await gateway.close()
    with pytest.raises(StopAsyncIteration):
        await waiting
    with pytest.raises(StopAsyncIteration):
        await anext(subscription)


async def test_a_subscription_whose_read_the_close_cuts_short_ends(gateway: Gateway) -> None:
    # Failed when reads went off the loop: a page read in flight as the gateway closed
    # failed with the closing store, and the subscriber got that error, not the end.
    reading, release = threading.Event(), threading.Event()

    def cut_short(position: int, limit: int) -> Any:
        reading.set()
        release.wait()
        raise RuntimeError("the store closed under the read")

    store_of(gateway).records_after = cut_short  # type: ignore[method-assign]
    waiting = asyncio.ensure_future(take(gateway.subscribe(), 1))
    await asyncio.to_thread(reading.wait)
    closing = asyncio.ensure_future(gateway.close())
    while not internals(gateway).events.closed:
        await asyncio.sleep(0)
    release.set()
    with pytest.raises(StopAsyncIteration):
        await waiting
    await closing


async def test_filters_by_session_and_by_trace(clock: VirtualClock, store_url: str) -> None:
    runtime = ScriptedRuntime.from_dict(
        {"rules": [{"step": "primary", "reply": "pong"}, {"reply": "REPLY_SKIP"}]}
    )
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()),
        store=store_url,
        clock=clock,
        runtime=runtime,
        delivery=CapturingDelivery(),
    )
    try:
        await gw.record_message("discord:group:req", role="user", content="hi", channel="discord")
        await gw.record_message("discord:group:target", role="user", content="x", channel="discord")
        await gw.record_message("other", role="user", content="not this one")
        sent = await gw.call_tool(REQ, "sessions_send", {"sessionKey": TARGET, "message": "ping"})
        assert sent["status"] == "ok", sent
        await gw.wait_idle()
        everything = await listed(gw)
        of_target = await listed(gw, session_key="discord:group:target")
        assert of_target
        assert all(TARGET in e["sessions"] for e in of_target)
        assert {e["kind"] for e in of_target} >= {"session", "run", "exchange"}
        assert [e for e in everything if TARGET in e["sessions"]] == of_target
        trace = next(e["traceId"] for e in of_target if e["type"] == "ExchangeOpened")
        of_trace = await listed(gw, trace_id=trace)
        assert of_trace
        assert all(e["traceId"] == trace for e in of_trace)
        assert "agent:main:other" not in {k for e in of_trace for k in e["sessions"]}
        runs = [e for e in of_trace if e["kind"] == "run"]
        assert runs
        assert all(e["runId"] == e["streamId"] for e in runs)
    finally:
        await gw.close()


async def test_a_requester_never_sees_a_session_it_may_not_read(
    clock: VirtualClock, store_url: str
) -> None:
    # Sandboxed sub-agents see only what they spawned: none of main's sessions.
    config = GatewayConfig.load(
        {"agents": {"defaults": {"sandbox": {"mode": "all", "sessionToolsVisibility": "spawned"}}}}
    )
    gw = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        await gw.record_message("main", role="user", content="secret plans")
        await gw.record_message("discord:group:dev", role="user", content="standup")
        refused = await gw.call_tool(
            "discord:group:dev", "sessions_history", {"sessionKey": "main"}
        )
        assert refused["status"] == "forbidden"
        everything = await listed(gw)
        seen = await listed(gw, requester="discord:group:dev")
        assert everything
        for event in seen:
            assert "agent:main:main" not in event["sessions"]
        assert "secret plans" not in repr(seen)
        # The operator's view (no requester) has main's events.
        assert any("agent:main:main" in e["sessions"] for e in everything)
    finally:
        await gw.close()


async def test_another_sessions_secrets_are_masked_for_a_requester(
    clock: VirtualClock, store_url: str
) -> None:
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_url, clock=clock
    )
    try:
        secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
        await gw.record_message("discord:group:dev", role="user", content=f"key {secret}")
        await gw.record_message("main", role="user", content="hi")
        as_main = await listed(gw, requester="main")
        dev_messages = [e for e in as_main if e["type"] == "MessageAppended"]
        assert any(e["sessionKey"] == "agent:main:discord:group:dev" for e in dev_messages)
        assert secret not in repr(as_main)
        as_dev = await listed(gw, requester="discord:group:dev")
        assert secret in repr(as_dev)  # its own messages, as stored
    finally:
        await gw.close()


async def test_bad_arguments_are_refused(gateway: Gateway) -> None:
    for after in (-1, True, 1.5, "x", "3.", "3.0", ".2", "0.1", "-3"):
        with pytest.raises(ValueError, match="after must be"):
            gateway.subscribe(after=after)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid session key"):
        gateway.subscribe(session_key="agent:")


async def test_a_subscriber_that_never_reads_does_not_stall_the_writer(
    gateway: Gateway,
) -> None:
    idle = [gateway.subscribe() for _ in range(50)]
    reading = gateway.subscribe()
    for n in range(300):
        await gateway.record_message("main", role="user", content=f"m{n}")
    # Nothing was read for the idle ones: each holds a cursor and no page.
    assert all(s.position == 0 and not s._page for s in idle)
    got = await take(reading, 301)
    assert got[-1]["position"] == store_of(gateway).sealed_position()
    # A late reader gets everything, from where it stood.
    late = [event async for event in idle[0].recorded()]
    assert len(late) == 301


async def test_resume_across_a_gateway_close_and_reopen(
    tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    for url in (f"sqlite:///{tmp_path}/s.db", request.getfixturevalue("postgres_url")):
        clock = VirtualClock()
        gw = await Gateway.open(config=GatewayConfig.load(before_scopes()), store=url, clock=clock)
        for n in range(3):
            await gw.record_message("main", role="user", content=f"a{n}")
        subscription = gw.subscribe()
        got = await take(subscription, 2)
        resume_at = got[-1]["position"]
        await gw.close()
        gw = await Gateway.open(config=GatewayConfig.load(before_scopes()), store=url, clock=clock)
        try:
            for n in range(2):
                await gw.record_message("main", role="user", content=f"b{n}")
            rest = await take(gw.subscribe(after=resume_at), 4)
            texts = [e["data"]["message"]["content"][0]["text"] for e in rest]
            assert texts == ["a1", "a2", "b0", "b1"]
            positions = [e["position"] for e in got + rest]
            assert positions == list(range(1, 7))
        finally:
            await gw.close()


async def test_two_postgres_gateways_see_each_others_events(postgres_url: str) -> None:
    # Real time: the other gateway's commits are found by the poll (every 0.25 s).
    writer = await Gateway.open(config=GatewayConfig.load(before_scopes()), store=postgres_url)
    follower = await Gateway.open(config=GatewayConfig.load(before_scopes()), store=postgres_url)
    try:
        subscription = follower.subscribe()
        waiting = asyncio.ensure_future(take(subscription, 3))
        await writer.record_message("main", role="user", content="from the writer")
        await writer.record_message("main", role="user", content="again")
        got = await waiting
        assert [e["type"] for e in got] == ["SessionOpened", "MessageAppended", "MessageAppended"]
        # And back: the writer follows the follower's events.
        back = writer.subscribe(after=got[-1]["position"])
        waiting = asyncio.ensure_future(take(back, 1))
        await follower.record_message("other", role="user", content="hello")
        (event,) = await waiting
        assert event["sessionKey"] == "agent:main:other"
    finally:
        await writer.close()
        await follower.close()


async def test_subscribers_following_the_same_positions_share_each_page(
    gateway: Gateway,
) -> None:
    reads = 0
    records_after = store_of(gateway).records_after

    def counted(position: int, limit: int) -> Any:
        nonlocal reads
        reads += 1
        return records_after(position, limit)

    store_of(gateway).records_after = counted  # type: ignore[method-assign]
    await gateway.record_message("main", role="user", content="first")
    store_of(gateway).seal()
    start = store_of(gateway).sealed_position()
    followers = [gateway.subscribe(after=start) for _ in range(20)]
    waiting = [asyncio.ensure_future(take(f, 5)) for f in followers]
    await asyncio.sleep(0)
    for n in range(5):
        await gateway.record_message("main", role="user", content=f"m{n}")
        store_of(gateway).seal()  # PostgreSQL: sealed now, not by its sealer thread later
        # Every follower takes this event before the next one is recorded.
        while any(f.position < start + n + 1 for f in followers):
            await asyncio.sleep(0)
    got = await asyncio.gather(*waiting)
    assert all(g == got[0] for g in got)
    assert [e["position"] for e in got[0]] == list(range(start + 1, start + 6))
    # Unshared, each of the 20 reads twice per event (the event, then nothing more):
    # 200 reads; shared, one read of each serves them all.
    assert reads <= 30, reads


async def test_no_poll_on_a_clock_that_moves_only_when_told(postgres_url: str) -> None:
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=postgres_url, clock=VirtualClock()
    )
    try:
        waiting = asyncio.ensure_future(take(gw.subscribe(), 1))
        await asyncio.sleep(0)
        await gw.wait_idle()
        assert internals(gw).events._poller is None
        assert internals(gw).in_flight.snapshot() == []
        await gw.record_message("main", role="user", content="hi")  # woken by the sealer
        (event,) = await waiting
        assert event["type"] == "SessionOpened"
    finally:
        await gw.close()


def test_sync_gateway_subscribe_is_a_plain_iterator(tmp_path: Any) -> None:
    from sessionwire import SyncGateway

    with SyncGateway.open(config=before_scopes(), store=f"sqlite:///{tmp_path}/s.db") as gw:
        gw.record_message("main", role="user", content="one")
        events = gw.subscribe(after=0, session_key="main")
        first, second = next(events), next(events)
        assert (first["position"], first["type"]) == (1, "SessionOpened")
        assert second["summary"] == "user message: 'one'"
