"""Group commit on an SQLite file (ADR 0020): saves queued while the writer thread commits
are written together, each durable when its caller goes on, in order per session, and a
failing member fails alone.

The writer thread is held on its first batch by a gate (a threading.Event), so which saves
share a batch is decided by the test, not by timing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import READ_MODEL_KEY, EventSourcedStore, PendingSave
from sessionwire.adapters.store.sqlite_writer import SQLiteWriter
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.audit.verify import verify
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.domain.session import Session, session_uuid
from sessionwire.testing import VirtualClock

AT = datetime(2026, 1, 1, tzinfo=UTC)
SPIN_LIMIT = 100_000


class Gate:
    """Holds the writer thread inside its first batch until ``open``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        original = SQLiteWriter._write_batch

        def gated(writer: SQLiteWriter, connection: Any, batch: Any) -> None:
            if not self.entered.is_set():
                self.entered.set()
                self.released.wait()
            original(writer, connection, batch)

        monkeypatch.setattr(SQLiteWriter, "_write_batch", gated)

    def open(self) -> None:
        self.released.set()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate(monkeypatch)
    yield held
    held.open()  # never leave the writer thread parked


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


def writer_of(store: EventSourcedStore) -> SQLiteWriter:
    assert isinstance(store.writer, SQLiteWriter)
    return store.writer


async def until(condition: Any) -> None:
    """Turn the event loop until ``condition()`` holds (no real-time wait)."""
    for _ in range(SPIN_LIMIT):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def stored_messages(db: Path, key: str) -> list[str]:
    """The session's transcript as another connection sees it: committed rows only."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? ORDER BY originator_version",
            (session_uuid(key).hex,),
        ).fetchall()
    texts = []
    for (state,) in rows:
        message = json.loads(state).get("message")
        if message is not None:
            texts.append(message["content"][0]["text"])
    return texts


async def test_saves_queued_behind_a_commit_share_one_and_are_durable_on_return(
    db: Path, gate: Gate
) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{db}")
    try:
        store = store_of(gateway)
        assert isinstance(store, EventSourcedStore)
        seen_on_return: dict[str, list[str]] = {}

        async def send(key: str) -> None:
            await gateway.record_message(key, role="user", content=f"to {key}")
            # Durable when it returns: another connection reads it at once.
            seen_on_return[key] = stored_messages(db, internals(gateway).rules.canonical(key))

        first = asyncio.create_task(send("discord:group:first"))
        await until(gate.entered.is_set)
        others = [asyncio.create_task(send(f"discord:group:g{n}")) for n in range(50)]
        await until(lambda: store.writes_in_flight() == 51)
        gate.open()
        await asyncio.gather(first, *others)

        assert seen_on_return == {
            key: [f"to {key}"]
            for key in ["discord:group:first"] + [f"discord:group:g{n}" for n in range(50)]
        }
        writer = writer_of(store)
        assert (writer.saves, writer.commits) == (51, 2)  # 50 saves, one fsync
    finally:
        await gateway.close()


async def test_a_conflicting_member_fails_alone_and_the_chain_stays_whole(
    db: Path, gate: Gate
) -> None:
    store = open_event_store(f"sqlite:///{db}", GatewayConfig())
    try:

        def opened(key: str) -> Session:
            return Session.open(key=key, session_id=uuid4(), agent_id="main", at=AT)

        holding = asyncio.create_task(store.save_async(opened("agent:main:a")))
        await until(gate.entered.is_set)
        members = [
            asyncio.create_task(store.save_async(opened("agent:main:b"))),
            # The same stream at the same version: conflicts with the member before it.
            asyncio.create_task(store.save_async(opened("agent:main:b"))),
            asyncio.create_task(store.save_async(opened("agent:main:c"))),
        ]
        await until(lambda: store.writes_in_flight() == 4)
        gate.open()
        outcomes = await asyncio.gather(holding, *members, return_exceptions=True)

        assert [type(outcome) for outcome in outcomes] == [
            type(None),
            type(None),
            StoreConflict,
            type(None),
        ]
        assert writer_of(store).commits == 2
        assert [store.session(f"agent:main:{name}") is not None for name in "abc"] == [True] * 3
        report = verify(StoreAuditLog(store))
        assert report.clean, report.findings
        assert report.checked == 3
        assert report.unchained == 0
    finally:
        store.close()


async def test_each_session_keeps_its_order_under_concurrent_writers(db: Path) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{db}")
    try:

        async def producer(key: str) -> None:
            for n in range(20):
                await gateway.record_message(key, role="user", content=f"{key} #{n}")

        keys = [f"discord:group:p{n}" for n in range(10)]
        # Two producers on one session too: every call still lands, none lost to a conflict.
        await asyncio.gather(*(producer(key) for key in keys), producer("discord:group:shared"))
        for key in keys:
            texts = stored_messages(db, internals(gateway).rules.canonical(key))
            assert texts == [f"{key} #{n}" for n in range(20)]
        assert writer_of(store_of(gateway)).commits < writer_of(store_of(gateway)).saves  # type: ignore[arg-type]
        report = verify(StoreAuditLog(store_of(gateway)))  # type: ignore[arg-type]
        assert report.clean, report.findings
    finally:
        await gateway.close()


@pytest.mark.parametrize("virtual", [True, False], ids=["virtual-clock", "system-clock"])
async def test_wait_idle_does_not_return_while_a_write_is_in_the_writer_thread(
    db: Path, gate: Gate, virtual: bool
) -> None:
    clock = VirtualClock(start=AT) if virtual else None
    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{db}", clock=clock)
    try:
        sending = asyncio.create_task(gateway.record_message("main", role="user", content="hi"))
        await until(lambda: store_of(gateway).writes_in_flight() == 1)
        idle = asyncio.create_task(gateway.wait_idle())
        for _ in range(1_000):
            await asyncio.sleep(0)
        assert not idle.done()
        gate.open()
        await idle
        assert store_of(gateway).writes_in_flight() == 0
        assert stored_messages(db, "agent:main:main") == ["hi"]
        await sending
    finally:
        await gateway.close()


async def test_a_commit_by_another_connection_is_chained_on_from_the_real_head(
    db: Path,
) -> None:
    """The writer's cached heads follow commits made elsewhere (PRAGMA data_version): here
    saves through the recorder's own connection, between saves through the writer."""
    store = open_event_store(f"sqlite:///{db}", GatewayConfig())
    try:
        for n in range(6):
            session = Session.open(
                key=f"agent:main:s{n}", session_id=uuid4(), agent_id="main", at=AT
            )
            if n % 2:
                prepared = store._prepare([session])
                assert prepared is not None
                with writer_of(store).paused():
                    store.recorder.insert_events(prepared[0], **{READ_MODEL_KEY: prepared[1]})
            else:
                await store.save_async(session)
        report = verify(StoreAuditLog(store))
        assert report.clean, report.findings
        assert report.checked == 6
    finally:
        store.close()


async def test_a_cancelled_callers_save_still_commits_and_the_session_cache_follows_it(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{db}")
    gate: Gate | None = None
    try:
        store = store_of(gateway)
        key = "agent:main:main"
        await gateway.record_message("main", role="user", content="one")
        gate = Gate(monkeypatch)  # holds the next batch: the save below
        sending = asyncio.create_task(gateway.record_message("main", role="user", content="two"))
        await until(gate.entered.is_set)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        # The caller is gone; its save is still the gateway's work in progress.
        assert store.writes_in_flight() == 1
        gate.open()
        await gateway.wait_idle()

        assert store.writes_in_flight() == 0
        assert stored_messages(db, key) == ["one", "two"]
        # The session as this process last wrote it is the committed one: the next
        # append is decided on it, not on the version before the cancelled save.
        assert store.session_for_update(key) == store.session(key)
    finally:
        if gate is not None:
            gate.open()
        await gateway.close()


def test_a_save_settled_after_its_loop_closed_is_no_longer_in_flight(db: Path, gate: Gate) -> None:
    store = open_event_store(f"sqlite:///{db}", GatewayConfig())
    session = Session.open(key="agent:main:a", session_id=uuid4(), agent_id="main", at=AT)
    saving: list[asyncio.Task[None]] = []

    async def start_and_leave() -> None:
        saving.append(asyncio.create_task(store.save_async(session)))
        await until(gate.entered.is_set)
        assert store.writes_in_flight() == 1

    try:
        asyncio.run(start_and_leave())  # the loop closes while the save is in the thread
        assert saving[0].cancelled()
        gate.open()
    finally:
        store.close()  # finishes the queued save: it settles with no loop to tell
    assert store.writes_in_flight() == 0
    with sqlite3.connect(db) as connection:
        (count,) = connection.execute("SELECT count(*) FROM sw_sessions").fetchone()
    assert count == 1


async def test_callers_of_saves_committed_together_are_woken_a_loop_turn_apart(
    db: Path, gate: Gate
) -> None:
    """A commit of many saves does not wake all their callers in one loop turn: between
    two, the loop turns (and polls its sockets), so a request that arrives meanwhile waits
    for one caller's work, not for the whole batch's (issue 14, target 3)."""
    store = open_event_store(f"sqlite:///{db}", GatewayConfig())
    seen: list[str] = []
    ticking = True

    async def tick() -> None:
        while ticking:
            seen.append("turn")
            await asyncio.sleep(0)  # one loop turn, no real time

    async def save(n: int) -> None:
        session = Session.open(key=f"agent:main:s{n}", session_id=uuid4(), agent_id="main", at=AT)
        await store.save_async(session)
        seen.append(f"saved {n}")

    try:
        first = asyncio.create_task(save(0))
        await until(gate.entered.is_set)  # the writer holds s0's batch
        together = [asyncio.create_task(save(n)) for n in (1, 2, 3)]
        await until(lambda: store.writes_in_flight() == 4)  # queued: the next batch
        ticker = asyncio.create_task(tick())
        gate.open()
        await asyncio.gather(first, *together)
        ticking = False
        await ticker
        assert writer_of(store).commits == 2  # s0, then s1-s3 in one batch
        woken = [i for i, entry in enumerate(seen) if entry in ("saved 1", "saved 2", "saved 3")]
        assert len(woken) == 3
        assert all(later - earlier > 1 for earlier, later in itertools.pairwise(woken)), seen
    finally:
        gate.open()
        store.close()


class CrossThreadWakeups:
    """Counts what wakes the loop from another thread (``call_soon_threadsafe``, the
    self-pipe's writes), and what the loop hands to a thread pool (``run_in_executor``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threadsafe = 0
        self.self_pipe = 0
        self.executor = 0
        threadsafe, self_pipe = loop.call_soon_threadsafe, loop._write_to_self  # type: ignore[attr-defined]
        executor = loop.run_in_executor

        def counted_threadsafe(*args: Any, **kwargs: Any) -> Any:
            self.threadsafe += 1
            return threadsafe(*args, **kwargs)

        def counted_self_pipe() -> None:
            self.self_pipe += 1
            self_pipe()

        def counted_executor(*args: Any) -> Any:
            self.executor += 1
            return executor(*args)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counted_threadsafe)
        monkeypatch.setattr(loop, "_write_to_self", counted_self_pipe)
        monkeypatch.setattr(loop, "run_in_executor", counted_executor)


async def test_an_append_wakes_the_loop_once_and_asks_the_file_system_nothing(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 38 item 2: the writer thread settles an append with one wake-up of the loop
    # (no second one for telemetry or ordering), no thread pool is asked, and once the
    # writer's lock is held no save stats the store's directory on the loop (each did).
    gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{db}")
    try:
        for n in range(5):  # the sessions opened, their rows in the write cache
            await gateway.record_message(f"discord:group:s{n}", role="user", content="first")
        stats = 0
        is_dir = Path.is_dir

        def counted_is_dir(path: Path) -> bool:
            nonlocal stats
            stats += 1
            return is_dir(path)

        monkeypatch.setattr(Path, "is_dir", counted_is_dir)
        wakeups = CrossThreadWakeups(asyncio.get_running_loop(), monkeypatch)
        appends = 20
        for n in range(appends):
            await gateway.record_message(f"discord:group:s{n % 5}", role="user", content=f"{n}")

        assert (wakeups.threadsafe, wakeups.self_pipe, wakeups.executor) == (appends, appends, 0)
        assert stats == 0
    finally:
        await gateway.close()


async def test_saves_committed_together_wake_the_loop_once(
    db: Path, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop settles a batch's saves as the writer hands them over; handed one by one,
    # each could find the loop's queue emptied meanwhile and wake it again (a wake-up per
    # save of the batch, not per batch). Here the writer thread, once it has handed over
    # the batch's first save, waits until the loop has either settled that save or turned
    # 200 times without it: the moment the race needs, made certain.
    store = open_event_store(f"sqlite:///{db}", GatewayConfig())
    writer = writer_of(store)
    submit = writer.submit
    handed = threading.Event()
    go_on = threading.Event()

    def after_first(settle: Any) -> Any:
        def settled_then_wait(outcome: BaseException | None) -> None:
            settle(outcome)
            handed.set()
            go_on.wait()

        return settled_then_wait

    def submitted(save: PendingSave) -> None:
        if not submitted_saves:  # the second batch's first save (the first is s0's)
            save = dataclasses.replace(save, settle=after_first(save.settle))
        submitted_saves.append(save)
        submit(save)

    submitted_saves: list[PendingSave] = []
    done: list[int] = []

    async def save(n: int) -> None:
        session = Session.open(key=f"agent:main:w{n}", session_id=uuid4(), agent_id="main", at=AT)
        await store.save_async(session)
        done.append(n)

    async def watch() -> None:
        await until(handed.is_set)
        for _ in range(200):
            if 1 in done:
                break
            await asyncio.sleep(0)  # one loop turn, no real time
        go_on.set()

    try:
        first = asyncio.create_task(save(0))
        await until(gate.entered.is_set)
        monkeypatch.setattr(writer, "submit", submitted)
        together = [asyncio.create_task(save(n)) for n in range(1, 11)]
        await until(lambda: store.writes_in_flight() == 11)
        watcher = asyncio.create_task(watch())
        with pytest.MonkeyPatch.context() as patch:
            wakeups = CrossThreadWakeups(asyncio.get_running_loop(), patch)
            gate.open()
            await asyncio.gather(first, *together)
        await watcher
        assert writer.commits == 2
        # One wake-up per commit at most (the second may find the first's still due).
        assert 1 <= wakeups.threadsafe <= 2
        assert wakeups.executor == 0
    finally:
        go_on.set()
        gate.open()
        store.close()


async def test_a_save_on_sqlite_makes_no_save_id(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its one writer thread runs each save once, so nothing would read the id; making
    # one was a urandom call per save.
    store = open_event_store(f"sqlite:///{db}", GatewayConfig())
    submitted: list[Any] = []
    writer = writer_of(store)
    submit = writer.submit

    def recorded(save: Any) -> None:
        submitted.append(save)
        submit(save)

    monkeypatch.setattr(writer, "submit", recorded)
    try:
        await store.save_async(
            Session.open(key="agent:main:x", session_id=uuid4(), agent_id="main", at=AT)
        )
        assert [save.save_id for save in submitted] == [None]
    finally:
        store.close()
