"""One writer per SQLite file (contract §6 decision 20, issue 12 situation 6), with two
real processes: a second gateway is refused with the holder named, readers work beside
the writer, and the lock of a killed writer is taken over."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from command_line import run_process
from sessionwire import Gateway
from sessionwire.application.ports.store import StoreInUse
from store_holder import holding

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    store = f"sqlite:///{tmp_path}/held.db"
    with holding(store) as process:
        yield store, process


async def test_a_second_gateway_is_refused_naming_the_holder(
    holder: tuple[str, subprocess.Popen[str]],
) -> None:
    store, process = holder
    with pytest.raises(StoreInUse) as refused:
        await Gateway.open(store=store)
    message = str(refused.value)
    assert f"pid {process.pid} on host {socket.gethostname()}, since 20" in message
    assert "held.db" in message
    assert "one writer per SQLite file" in message


async def test_readers_work_beside_the_writer(holder: tuple[str, subprocess.Popen[str]]) -> None:
    store, _ = holder
    reader = await Gateway.open(store=store, resume=False)
    try:
        listed = await reader.call_tool("main", "sessions_list", {})
        assert [row["key"] for row in listed["sessions"]] == ["main"]
        history = await reader.call_tool("main", "sessions_history", {"sessionKey": "main"})
        assert [m["content"][0]["text"] for m in history["messages"]] == ["held"]
    finally:
        await reader.close()


async def test_the_lock_of_a_killed_writer_is_taken_over(
    holder: tuple[str, subprocess.Popen[str]],
) -> None:
    store, process = holder
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)

    gateway = await Gateway.open(store=store)
    try:
        await gateway.record_message("main", role="user", content="mine now")
        with pytest.raises(StoreInUse, match=f"pid {os.getpid()} "):
            await Gateway.open(store=store)  # and it is ours: a third one is refused
    finally:
        await gateway.close()
    again = await Gateway.open(store=store)  # closing let it go
    await again.close()


def test_record_beside_a_live_writer_is_one_line_and_exit_1(
    holder: tuple[str, subprocess.Popen[str]],
) -> None:
    """Issue 24: ``record`` beside a running ``serve`` printed a 60-line StoreInUse
    traceback; it is one line naming the holder (exit 1, docs/cli.md)."""
    store, process = holder
    answer = run_process("--store", store, "record", "main", "not while held")
    assert answer.returncode == 1
    assert answer.stdout == ""
    assert "Traceback" not in answer.stderr
    [line] = answer.stderr.splitlines()
    assert line.startswith("sessionwire: SQLite store ")
    assert f"held by another gateway (pid {process.pid} on host" in line
    assert "one writer per SQLite file" in line
