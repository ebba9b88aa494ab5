"""The read models are a pure function of the event log: a rebuild equals the live rows."""

from __future__ import annotations

from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import VirtualClock


async def test_rebuilt_read_models_equal_the_live_ones(
    gateway: Gateway, clock: VirtualClock
) -> None:
    await gateway.record_message("main", role="user", content="hi", channel="whatsapp", to="+1")
    await gateway.record_message(
        "main", role="assistant", content="yo", usage={"input": 2, "output": 3}
    )
    await gateway.record_message("main", role="toolResult", content="out")
    await clock.advance(30)
    await gateway.record_message(
        "discord:group:dev", role="user", content="a", channel="discord", chat_type="group"
    )
    await gateway.patch_session("discord:group:dev", label="dev room", thinkingLevel="high")
    await gateway.record_message("cron:nightly", role="user", content="tick")
    stored = store_of(gateway).session("agent:main:cron:nightly")
    assert stored is not None
    aggregate = stored.to_aggregate()
    aggregate.archive(reason="test", at=clock.now())
    store_of(gateway).save(aggregate)

    live = store_of(gateway).read_model_snapshot()
    store_of(gateway).rebuild_read_models()
    rebuilt = store_of(gateway).read_model_snapshot()

    assert len(live["sessions"]) == 3
    assert len(live["transcript"]) == 5
    assert rebuilt == live


async def test_the_log_holds_every_event_in_order(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="one")
    await gateway.patch_session("main", label="home")
    await gateway.record_message("main", role="assistant", content="two")
    names = [type(event).__name__ for _, event in store_of(gateway).events()]
    assert names == ["SessionOpened", "MessageAppended", "SessionPatched", "MessageAppended"]
    positions = [position for position, _ in store_of(gateway).events()]
    assert positions == sorted(positions)
    assert (
        list(store_of(gateway).events(start=positions[2])) == list(store_of(gateway).events())[2:]
    )
