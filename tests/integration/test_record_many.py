"""``record_many``: a batch of messages into one session, checked first, saved all or nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire import Gateway, SyncGateway
from sessionwire.adapters.testkit.internals import store_of


async def history(gateway: Gateway, key: str) -> list[tuple[str, str]]:
    result = await gateway.call_tool("main", "sessions_history", {"sessionKey": key, "limit": 50})
    return [(m["role"], m["content"][0]["text"]) for m in result["messages"]]


async def test_a_batch_lands_in_order_with_the_session_opened(gateway: Gateway) -> None:
    batch = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"line {n}"} for n in range(6)
    ]
    recorded = await gateway.record_many(
        "discord:group:dev", batch, channel="discord", chat_type="group"
    )
    assert recorded["recorded"] == 6
    key = recorded["sessionKey"]
    assert await history(gateway, key) == [(m["role"], m["content"]) for m in batch]
    listed = await gateway.call_tool("main", "sessions_list", {})
    row = next(r for r in listed["sessions"] if r["key"] == key)
    assert row["channel"] == "discord"
    # The batch continues an existing session after its last message.
    await gateway.record_many(key, [{"role": "user", "content": "after"}])
    assert (await history(gateway, key))[-1] == ("user", "after")


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"role": "robot", "content": "x"}, "message 1: role must be one of"),
        ({"role": "user", "content": [{"text": "untyped"}]}, "message 1: invalid message"),
        ({"role": "user", "content": "x", "label": "no"}, "message 1: unknown fields label"),
        ("just text", "message 1: not an object"),
    ],
)
async def test_one_bad_message_records_none_of_the_batch(
    gateway: Gateway, bad: Any, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        await gateway.record_many("main", [{"role": "user", "content": "fine"}, bad])
    assert store_of(gateway).session("agent:main:main") is None


async def test_a_failed_write_records_none_of_the_batch(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On PostgreSQL this failed while eventsourcing's insert caught the error inside its
    # transaction (which then committed the events); the save is one transaction now.
    # A message's save there is one statement with no BEGIN, so the failure is made where
    # every save stands last before its commit (``before_commit``), the events and rows
    # queued; the other stores fail in the read model's write, the save's last step.
    await gateway.record_message("main", role="user", content="before")
    store: Any = store_of(gateway)
    recorder = getattr(store, "recorder", None)
    owner, name = (
        (recorder, "before_commit")
        if hasattr(recorder, "before_commit")
        else (store.read_model, "write")
    )
    original = getattr(owner, name)
    calls = 0

    def failing(cursor: Any, changes: Any, *rest: Any) -> None:
        nonlocal calls
        calls += 1
        original(cursor, changes, *rest)  # the events and rows are written ... then the save fails
        raise RuntimeError("disk full")

    monkeypatch.setattr(owner, name, failing)
    with pytest.raises(RuntimeError, match="disk full"):
        await gateway.record_many("main", [{"role": "user", "content": f"{n}"} for n in range(5)])
    # A single message too: on PostgreSQL its save is the one statement alone.
    with pytest.raises(RuntimeError, match="disk full"):
        await gateway.record_message("main", role="user", content="one")
    monkeypatch.undo()
    assert calls == 2
    assert await history(gateway, "agent:main:main") == [("user", "before")]
    stored = store_of(gateway).session("agent:main:main")
    assert stored is not None
    assert stored.state.message_count == 1


async def test_too_large_a_batch_is_refused(gateway: Gateway) -> None:
    with pytest.raises(ValueError, match="at most 10000 messages"):
        await gateway.record_many("main", [{"role": "user", "content": "x"}] * 10_001)


def test_sync_gateway_records_a_batch(store_url: str) -> None:
    with SyncGateway.open(store=store_url) as gateway:
        recorded = gateway.record_many("main", [{"role": "user", "content": "a"}] * 3)
        assert recorded["recorded"] == 3
