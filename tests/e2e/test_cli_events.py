"""``sessionwire events``: a listing, --json lines, filters, and --follow as a real process
following what another process records, ended by Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from command_line import run_in_process
from hang_bounds import HANG_SECONDS
from live_http import cli_env


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/cli.db"
    for session, text in (("main", "hello"), ("discord:group:dev", "standup"), ("main", "again")):
        assert run_in_process("--store", url, "record", session, text).returncode == 0
    return url


def test_events_lists_the_log_as_a_table_and_as_json_lines(store: str) -> None:
    table = run_in_process("--store", store, "events")
    assert table.returncode == 0, table.stderr
    assert "5 event(s)" in table.stdout
    assert "user message: 'again'" in table.stdout
    lines = run_in_process("--store", store, "events", "--json", "--after", "2").stdout
    events = [json.loads(line) for line in lines.splitlines()]
    assert [e["position"] for e in events] == [3, 4, 5]
    assert events[0]["sessionKey"] == "agent:main:discord:group:dev"
    main_only = run_in_process("--store", store, "events", "--session", "main", "--json")
    assert [json.loads(line)["position"] for line in main_only.stdout.splitlines()] == [1, 2, 5]


def test_bad_options_exit_2(store: str) -> None:
    assert run_in_process("--store", store, "events", "--after", "-1").returncode == 2
    bad_key = run_in_process("--store", store, "events", "--session", "agent:")
    assert bad_key.returncode == 1
    assert "invalid session key" in bad_key.stderr


def ctrl_c_as_at_a_terminal() -> None:
    """In the child, before exec: SIGINT at its default, whatever the test runner had.

    A runner started as a background job of a script (``./run tests &``) ignores SIGINT,
    and a child inherits an ignored signal: Python then keeps it ignored, and asyncio.run
    takes no Ctrl-C; the follow would never end."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def ctrl_c_ignored_here() -> Iterator[None]:
    """This process ignores SIGINT meanwhile: the runner's worst case, made every run's."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def stopped_by_ctrl_c(process: asyncio.subprocess.Process) -> tuple[int, str]:
    """Ctrl-C, then the exit status and stderr; a child still there after HANG_SECONDS
    hangs: it is aborted, printing every thread's stack (PYTHONFAULTHANDLER), into the
    failure, and is not left running."""
    assert process.stderr is not None
    process.send_signal(signal.SIGINT)
    try:
        code = await asyncio.wait_for(process.wait(), timeout=HANG_SECONDS)
    except TimeoutError:
        process.send_signal(signal.SIGABRT)
        await process.wait()
        stacks = (await process.stderr.read()).decode()
        pytest.fail(f"Ctrl-C did not end the follow in {HANG_SECONDS} s; its threads:\n{stacks}")
    return code, (await process.stderr.read()).decode()


async def follow_and_stop(store: str) -> tuple[list[dict[str, object]], int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessionwire.adapters.cli.main",
        "--store",
        store,
        "events",
        "--follow",
        "--after",
        "0",
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(PYTHONFAULTHANDLER="1"),
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    assert process.stdout is not None
    try:
        seen = []
        for _ in range(5):
            line = await asyncio.wait_for(process.stdout.readline(), timeout=HANG_SECONDS)
            seen.append(json.loads(line))
        # Recorded by another process while this one follows: it finds it by its poll.
        writer = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sessionwire.adapters.cli.main",
            "--store",
            store,
            "record",
            "main",
            "live",
            stdout=asyncio.subprocess.DEVNULL,
            env=cli_env(),
        )
        assert await writer.wait() == 0
        line = await asyncio.wait_for(process.stdout.readline(), timeout=HANG_SECONDS)
        seen.append(json.loads(line))
    finally:
        code, stderr = await stopped_by_ctrl_c(process)
    return seen, code, stderr


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_follow_shows_another_processs_events_and_ctrl_c_ends_it_cleanly(store: str) -> None:
    with ctrl_c_ignored_here():
        seen, code, stderr = asyncio.run(follow_and_stop(store))
    assert [e["position"] for e in seen] == [1, 2, 3, 4, 5, 6]
    assert seen[-1]["summary"] == "user message: 'live'"
    assert code == 0, stderr
    assert "Traceback" not in stderr
