"""A gateway opened with ``resume=False`` on an SQLite file writes only while it holds
the file's one writer's lock (decision 20, ADR 0012): it takes the lock at its first write,
and while another gateway holds it the write is refused with StoreInUse, before anything
is stored."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from sessionwire import Gateway
from sessionwire.application.ports.store import StoreInUse


async def test_a_reader_beside_the_writer_cannot_write(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/one.db"
    writer = await Gateway.open(store=store)
    reader = await Gateway.open(store=store, resume=False)
    try:
        await writer.record_message("main", role="user", content="the writer's")
        with pytest.raises(StoreInUse, match="one writer per SQLite file"):
            await reader.record_message("main", role="user", content="the reader's")
        history = await writer.call_tool("main", "sessions_history", {"sessionKey": "main"})
        assert [m["content"][0]["text"] for m in history["messages"]] == ["the writer's"]
    finally:
        await reader.close()
        await writer.close()


async def test_a_reader_takes_the_lock_at_its_first_write(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/one.db"
    reader = await Gateway.open(store=store, resume=False)
    try:
        await reader.record_message("main", role="user", content="first")
        with pytest.raises(StoreInUse):
            await Gateway.open(store=store)  # the reader writes now: it is the writer
    finally:
        await reader.close()
    again = await Gateway.open(store=store)  # closing let the lock go
    await again.close()


async def test_a_refused_read_beside_the_writer_still_answers(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/one.db"
    writer = await Gateway.open(store=store)
    reader = await Gateway.open(store=store, resume=False)
    try:
        await writer.record_message("agent:other:main", role="user", content="hidden")
        refused = await reader.call_tool(
            "agent:main:main", "sessions_history", {"sessionKey": "agent:other:main"}
        )
        assert refused["status"] == "forbidden"
    finally:
        await reader.close()
        await writer.close()


async def test_a_tool_call_beside_the_writer_names_no_path_host_or_pid(tmp_path: Path) -> None:
    """Issue 27 finding 8: the agent's error quoted StoreInUse whole: the store's path,
    the host's name and the writer's pid. The operator's log keeps them; the caller
    gets what happened and what to do."""
    store = f"sqlite:///{tmp_path}/one.db"
    writer = await Gateway.open(store=store)
    reader = await Gateway.open(store=store, resume=False)
    try:
        await writer.record_message("main", role="user", content="the writer's")
        await writer.record_message("discord:group:dev", role="user", content="standup")
        answer = await reader.call_tool(
            "main", "sessions_send", {"sessionKey": "discord:group:dev", "message": "hi"}
        )
    finally:
        await reader.close()
        await writer.close()
    assert answer["status"] == "error"
    error = answer["error"]
    assert error.startswith("the store is held by another gateway")
    for leaked in (str(tmp_path), "one.db", socket.gethostname(), f"pid {os.getpid()}"):
        assert leaked not in error, leaked
