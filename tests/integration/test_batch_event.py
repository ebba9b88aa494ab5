"""``Session.MessagesAppended``: a batch of messages is one domain event that takes one
stream version per message, and every reader treats its messages exactly as single
appends (histories, transcript seq numbers, replay at any version, timelines, audit
verify, bundles).

Storage v3 (ADR 0036) stores a batch one row per message, as its single appends; a store
upgraded from v2 (and a v2 export) still holds batches stored as one record, which the
audit section below writes the v2 way (``BATCHES_AS_ROWS`` off) and checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from audit_rig import RawStore, run_cli, verify_json
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock

SINGLE = "agent:main:discord:group:single"
BATCH = "agent:main:discord:group:batch"
ROUTING = {"channel": "discord", "chat_type": "group", "display_name": "#dev"}

V2_BATCHES = "sessionwire.adapters.store.event_store.BATCHES_AS_ROWS"
"""Patched off: a batch stored as one record, as v2 stored it (an upgraded store holds
these; storage v3 writes one row per message, whose positions are each their own)."""


def messages(count: int) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    for n in range(count):
        if n % 3 == 2:
            made.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"answer {n}"}],
                    "usage": {"input": n, "output": 2 * n},
                    "model": f"model-{n}",
                }
            )
        else:
            made.append({"role": "user", "content": f"line {n}"})
    return made


async def record_singly(gateway: Gateway, key: str, batch: list[dict[str, Any]]) -> None:
    for item in batch:
        await gateway.record_message(
            key,
            role=item["role"],
            content=item["content"],
            usage=item.get("usage"),
            model=item.get("model"),
            **ROUTING,
        )


async def history(gateway: Gateway, key: str) -> list[dict[str, Any]]:
    result = await gateway.call_tool(
        "main", "sessions_history", {"sessionKey": key, "limit": 1000, "includeTools": True}
    )
    return list(result["messages"])


def transcript_seqs(gateway: Gateway, key: str) -> list[tuple[int, str, str]]:
    snapshot = store_of(gateway).read_model_snapshot()  # type: ignore[attr-defined]
    session = session_uuid(key).hex
    return [
        (seq, role, message) for s, seq, role, message in snapshot["transcript"] if s == session
    ]


async def test_a_batch_reads_exactly_like_the_same_single_appends(gateway: Gateway) -> None:
    batch = messages(9)
    await record_singly(gateway, SINGLE, batch)
    await gateway.record_many(BATCH, batch, **ROUTING)
    await gateway.record_message(SINGLE, role="user", content="after")
    await gateway.record_message(BATCH, role="user", content="after")

    assert await history(gateway, BATCH) == await history(gateway, SINGLE)
    # The same transcript rows, at the same seq numbers (the versions single appends take).
    assert transcript_seqs(gateway, BATCH) == transcript_seqs(gateway, SINGLE)
    assert [seq for seq, _, _ in transcript_seqs(gateway, BATCH)] == list(range(2, 12))
    single, batched = store_of(gateway).session(SINGLE), store_of(gateway).session(BATCH)
    assert single is not None
    assert batched is not None
    assert batched.version == single.version == 11
    differs = {"key", "session_id", "display_name"}
    assert batched.state.model_dump(exclude=differs) == single.state.model_dump(exclude=differs)
    assert batched.state.message_count == 10
    assert batched.state.total_tokens == sum(3 * n for n in range(2, 9, 3))
    # Storage v3: the batch is stored as its single appends, one row per message.
    assert [type(e).__name__ for e in store_of(gateway).stream(session_uuid(BATCH))] == [
        "SessionOpened",
        *["MessageAppended"] * 10,
    ]

    async def lines(key: str) -> list[tuple[int, str, str, dict[str, Any]]]:
        return [
            (e.version, e.event, e.summary, e.data)
            for e in (await gateway.timeline(key)).entries
            if e.kind == "session" and e.version > 1
        ]

    assert await lines(BATCH) == await lines(SINGLE)


async def test_replay_at_every_version_inside_and_after_a_batch(gateway: Gateway) -> None:
    batch = messages(6)
    await record_singly(gateway, SINGLE, batch)
    await gateway.record_message(SINGLE, role="user", content="after")
    await gateway.record_many(BATCH, batch, **ROUTING)
    await gateway.record_message(BATCH, role="user", content="after")
    for version in range(1, 10):
        single = await gateway.session_as_of(SINGLE, version=version)
        batched = await gateway.session_as_of(BATCH, version=version)
        assert batched.version == single.version == min(version, 8)
        assert batched.transcript == single.transcript
        assert len(batched.transcript) == min(version, 8) - 1
        differs = {"key", "session_id", "display_name"}
        assert batched.row.model_dump(exclude=differs) == single.row.model_dump(exclude=differs)


async def test_a_bad_message_anywhere_writes_none_of_the_batch(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="before")
    batch = [{"role": "user", "content": f"line {n}"} for n in range(1000)]
    batch[500] = {"role": "user", "content": [{"type": "text", "text": 5}]}
    with pytest.raises(ValueError, match=r"^message 500: invalid message: .*text"):
        await gateway.record_many("main", batch)
    batch[500] = {"role": "user", "content": [{"text": "untyped"}]}
    with pytest.raises(ValueError, match=r"^message 500: invalid message: content block 0"):
        await gateway.record_many("main", batch)
    batch[500] = {"role": "user", "content": "x", "usage": {"input": -1}}
    with pytest.raises(ValueError, match=r"^message 500: invalid message: usage.input"):
        await gateway.record_many("main", batch)
    assert [m["content"][0]["text"] for m in await history(gateway, "main")] == ["before"]
    stored = store_of(gateway).session("agent:main:main")
    assert stored is not None
    assert stored.version == 2
    assert store_of(gateway).session(BATCH) is None


def test_a_batch_event_refuses_to_apply_out_of_its_place() -> None:
    from datetime import UTC, datetime

    from eventsourcing.domain import OriginatorVersionError
    from sessionwire.domain.session import Session
    from sessionwire.domain.transcript import TranscriptMessage

    at = datetime(2026, 1, 1, tzinfo=UTC)
    session = Session.open(key=BATCH, session_id=session_uuid("x"), agent_id="main", at=at)
    line = TranscriptMessage(role="user", content=[{"type": "text", "text": "a"}], timestamp=0)
    session.append_messages([line, line, line], at=at)
    (_, event) = session.collect_events()
    assert isinstance(event, Session.MessagesAppended)
    assert (event.first_version, event.originator_version, session.version) == (2, 4, 4)
    with pytest.raises(OriginatorVersionError):
        event.mutate(session)  # already applied: its first version is not the next one


# Audit: verify, export, bundles ----------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def raw(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> RawStore:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/batched.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    # The batch stored as one record, as v2 stored it (an upgraded store holds these).
    monkeypatch.setattr(V2_BATCHES, False)
    gateway = await Gateway.open(config=GatewayConfig(), store=url, clock=clock)
    try:
        await gateway.record_message("main", role="user", content="first")
        await gateway.record_many("main", [{"role": "user", "content": f"m{n}"} for n in range(8)])
        await gateway.record_message("main", role="assistant", content="last")
    finally:
        await gateway.close()
    return RawStore(url)


def main_events(raw: RawStore) -> list[tuple[int, int, str, bytes]]:
    """(position, version, topic, state) of main's events, in version order."""
    found = []
    for position in raw.positions():
        originator, version, topic, state = raw.event(position)
        if originator.replace("-", "") == session_uuid("agent:main:main").hex:
            found.append((position, version, topic, state))
    return found


def test_a_store_with_a_batch_verifies_clean(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    versions = [(v, topic.rsplit(".", 1)[-1]) for _, v, topic, _ in main_events(raw)]
    assert versions == [
        (1, "SessionOpened"),
        (2, "Msg"),  # a message's compact record (ADR 0036 §2 amendment)
        (10, "MessagesAppended"),
        (11, "Msg"),
    ]
    code, report = verify_json(capsys, raw.url)
    assert (code, report["findings"]) == (0, [])


def test_an_edited_message_inside_a_batch_is_found_and_located(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    position, _, _, state = main_events(raw)[2]
    assert b'"m5"' in state
    raw.run(
        (
            "UPDATE stored_events SET state = ? WHERE {pos} = ?",
            (state.replace(b'"m5"', b'"m6"'), position),
        )
    )
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    [finding] = report["findings"]
    assert finding["kind"] == "altered"
    assert finding["stream"]["session_key"] == "agent:main:main"
    assert finding["position"] == {"version": 10, "notification_id": position}
    assert "versions 3-10" in finding["detail"]
    # Storage v3 (ADR 0036): the message is stored once, in the event; no transcript
    # copy is left to name the edited message by, so the finding names the batch.
    assert "differ from the transcript" not in finding["detail"]


def test_an_edit_that_breaks_a_batch_s_json_is_still_located_to_the_batch(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    position, _, _, state = main_events(raw)[2]
    raw.run(("UPDATE stored_events SET state = ? WHERE {pos} = ?", (state[:-40], position)))
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    assert [(f["kind"], f["position"]["version"]) for f in report["findings"]] == [("altered", 10)]


def test_an_event_removed_before_a_batch_is_named_as_the_version_before_it(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    removed, batch = main_events(raw)[1][0], main_events(raw)[2][0]
    raw.run(("DELETE FROM stored_events WHERE {pos} = ?", (removed,)))
    code, report = verify_json(capsys, raw.url)
    assert code == 1
    assert ("deleted", 2, batch) in {
        (f["kind"], f["position"]["version"], f["position"]["notification_id"])
        for f in report["findings"]
    }


def test_a_bundle_with_a_batch_verifies_alone_and_an_edit_in_it_is_found(
    capsys: pytest.CaptureFixture[str], raw: RawStore, tmp_path: Path
) -> None:
    bundle = tmp_path / "main.jsonl"
    code, _, err = run_cli(
        capsys, "--store", raw.url, "audit", "export", "--session", "main", "-o", str(bundle)
    )
    assert code == 0, err
    code, out, _ = run_cli(capsys, "--json", "audit", "verify", str(bundle))
    assert (code, json.loads(out)["findings"]) == (0, [])

    edited = tmp_path / "edited.jsonl"
    lines = bundle.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "MessagesAppended" in line)
    lines[at] = lines[at].replace("m5", "m6")
    assert lines[at] != bundle.read_text().splitlines()[at]
    edited.write_text("\n".join(lines) + "\n")
    code, out, _ = run_cli(capsys, "--json", "audit", "verify", str(edited))
    report = json.loads(out)
    assert code == 1
    assert [(f["kind"], f["version"]) for f in report["findings"]] == [("altered", 10)]


def test_a_whole_export_with_a_batch_imports_into_a_copy_that_verifies(
    capsys: pytest.CaptureFixture[str], raw: RawStore, tmp_path: Path
) -> None:
    whole, copy = tmp_path / "all.jsonl", f"sqlite:///{tmp_path}/copy.db"
    code, _, err = run_cli(capsys, "--store", raw.url, "audit", "export", "-o", str(whole))
    assert code == 0, err
    code, _, err = run_cli(capsys, "--store", copy, "audit", "import", str(whole))
    assert code == 0, err
    code, report = verify_json(capsys, copy)
    assert (code, report["findings"]) == (0, [])
    code, out, _ = run_cli(
        capsys, "--store", copy, "--json", "sessions", "history", "main", "--limit", "50"
    )
    assert code == 0
    texts = [m["content"][0]["text"] for m in json.loads(out)["messages"]]
    assert texts == ["first", *[f"m{n}" for n in range(8)], "last"]


async def test_the_live_event_stream_publishes_a_batch_as_its_single_appends(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(V2_BATCHES, False)
    batch = messages(5)
    await record_singly(gateway, SINGLE, batch)
    await gateway.record_many(BATCH, batch, **ROUTING)
    store_of(gateway).seal()
    published = [event async for event in gateway.subscribe().recorded()]

    def of(key: str) -> list[tuple[str, int, str, Any]]:
        return [
            (e["type"], e["version"], e["summary"], e["data"])
            for e in published
            if e["sessionKey"] == key and e["version"] > 1
        ]

    assert of(BATCH) == of(SINGLE)
    assert [e["type"] for e in published if e["sessionKey"] == BATCH] == [
        "SessionOpened",
        *["MessageAppended"] * 5,
    ]
    # One record: its messages share the batch's position, and a subscriber after it
    # gets none of them again.
    positions = {e["position"] for e in published if e["sessionKey"] == BATCH and e["version"] > 1}
    [position] = positions
    assert [event async for event in gateway.subscribe(after=position).recorded()] == []


async def test_a_subscriber_resumed_inside_a_batch_misses_none_of_it(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(V2_BATCHES, False)
    await gateway.record_many(BATCH, messages(4), **ROUTING)
    await gateway.record_message(SINGLE, role="user", content="after the batch")
    store_of(gateway).seal()
    published = [event async for event in gateway.subscribe().recorded()]
    summaries = [e["summary"] for e in published]
    cursors = [e["cursor"] for e in published]
    # Inside the batch an event's cursor names how many of the batch's events are
    # passed; its last event, like any other, has its position alone.
    batch_position = published[1]["position"]
    assert cursors[1:5] == [f"{batch_position}.{k}" for k in (1, 2, 3)] + [str(batch_position)]
    assert len(set(cursors)) == len(cursors)
    for index, cursor in enumerate(cursors):
        rest = [e["summary"] async for e in gateway.subscribe(after=cursor).recorded()]
        assert rest == summaries[index + 1 :], cursor
    # A subscription says where it stands, whether or not it yielded there.
    subscription = gateway.subscribe(session_key=SINGLE)
    assert [e["summary"] async for e in subscription.recorded()][-1] == summaries[-1]
    assert subscription.cursor == str(published[-1]["position"])


async def test_storage_v3_stores_a_batch_one_row_per_message(gateway: Gateway) -> None:
    # Each message its own record, at its own position, as its single append would be.
    await gateway.record_many(BATCH, messages(4), **ROUTING)
    store_of(gateway).seal()
    published = [e async for e in gateway.subscribe().recorded() if e["sessionKey"] == BATCH]
    assert [(e["type"], e["version"]) for e in published] == [
        ("SessionOpened", 1),
        *[("MessageAppended", version) for version in range(2, 6)],
    ]
    assert len({e["position"] for e in published}) == 5
    assert [e["cursor"] for e in published] == [str(e["position"]) for e in published]
