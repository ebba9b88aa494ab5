"""The unit of work: one attempt per conflict, each on fresh state, saved together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.off_loop import OffLoopStore, open_off_loop
from sessionwire.application.ports.store import StoreConflict
from sessionwire.application.unit_of_work import Attempts, retrying
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "agent:main:main"


def _message(text: str) -> TranscriptMessage:
    return TranscriptMessage(role="user", content=[{"type": "text", "text": text}], timestamp=0)


@pytest.fixture
async def store(store_url: str, config: GatewayConfig) -> AsyncIterator[OffLoopStore]:
    """The store as the gateway awaits it; the test's own reads and the writes behind
    the unit of work's back go to the blocking store underneath."""
    opened = await open_off_loop(lambda: open_event_store(store_url, config))
    await opened.save(Session.open(key=KEY, session_id=uuid4(), agent_id="main", at=NOW))
    yield opened
    await opened.close()


def _texts(offloop: OffLoopStore) -> list[str]:
    store = offloop.event_store
    stored = store.session(KEY)
    assert stored is not None
    return store.transcript(stored.id, limit=10, include_tools=False)


def _write_behind_its_back(offloop: OffLoopStore, text: str) -> None:
    store = offloop.event_store
    stored = store.session(KEY)
    assert stored is not None
    other = stored.to_aggregate()
    other.append_message(_message(text), at=NOW)
    store.save(other)


async def test_a_conflict_runs_the_block_again_on_fresh_state(store: OffLoopStore) -> None:
    seen_versions = []
    async for uow in retrying(store, f"session {KEY}"):
        with uow:
            session = await uow.session(KEY)
            assert session is not None
            seen_versions.append(session.version)
            if uow.attempt == 0:
                _write_behind_its_back(store, "other writer")
            session.append_message(_message("mine"), at=NOW)
            await uow.commit()
    assert seen_versions == [1, 2]
    first, second = _texts(store)
    assert "other writer" in first
    assert "mine" in second


async def test_it_gives_up_after_its_attempts_naming_the_change(store: OffLoopStore) -> None:
    attempts: list[int] = []

    async def always_overtaken() -> None:
        async for uow in Attempts(store, "session x", limit=3):
            with uow:
                attempts.append(uow.attempt)
                session = await uow.session(KEY)
                assert session is not None
                _write_behind_its_back(store, f"other writer {uow.attempt}")
                session.append_message(_message("never saved"), at=NOW)
                await uow.commit()

    with pytest.raises(StoreConflict, match="session x kept changing under 3 attempts"):
        await always_overtaken()
    assert attempts == [0, 1, 2]
    assert not any("never saved" in text for text in _texts(store))


async def test_a_block_left_without_commit_saves_nothing(store: OffLoopStore) -> None:
    before = store.event_store.log_position()
    runs = 0
    async for uow in retrying(store, "session"):
        with uow:
            runs += 1
            session = await uow.session(KEY)
            assert session is not None
            session.append_message(_message("dropped"), at=NOW)
    assert runs == 1
    assert store.event_store.log_position() == before


async def test_a_conflict_from_outside_its_commit_is_not_retried(store: OffLoopStore) -> None:
    attempts: list[int] = []

    async def failing_elsewhere() -> None:
        async for uow in retrying(store, "session"):
            with uow:
                attempts.append(uow.attempt)
                raise StoreConflict("not this commit's")

    with pytest.raises(StoreConflict, match="not this commit's"):
        await failing_elsewhere()
    assert attempts == [0]


async def test_aggregates_are_saved_together_and_only_when_changed(store: OffLoopStore) -> None:
    before = store.event_store.log_position()
    async for uow in retrying(store, "two sessions"):
        with uow:
            unchanged = await uow.session(KEY)
            assert unchanged is not None
            other = uow.add(
                Session.open(key="agent:main:other", session_id=uuid4(), agent_id="main", at=NOW)
            )
            other.append_message(_message("hello"), at=NOW)
            await uow.commit()
    assert store.event_store.log_position() == before + 2
    stored = store.event_store.session(KEY)
    assert stored is not None
    assert stored.version == 1
    assert store.event_store.session("agent:main:other") is not None
