"""PostgreSQL restarted under load (issue 22, "Bad input and faults"): the gateway
reconnects, nothing is lost or doubled, and its runs resume.

The server is the test's own (a restart of the shared one would cut every other
test's connections): a fast shutdown cuts every connection the gateway's pool, reader
threads, lease keeper and listener hold, in the middle of writes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from private_postgres import PrivatePostgres, private_postgres, private_postgres_problem
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.testing import ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
RUNS = 12
WRITERS = 4
MESSAGES_EACH = 25
RUN_SECONDS = 60
SCRIPT = {
    "rules": [
        {"step": "primary", "reply": "done", "delaySeconds": RUN_SECONDS},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
CONFIG = {
    "session": {"agentToAgent": {"maxPingPongTurns": 0}},
    "agents": {"defaults": {"maxConcurrent": 40}},
}
# Only a bound on a broken test: a gateway that never reconnects fails, not hangs.
HANG_SECONDS = 120


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    problem = private_postgres_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL restart test, but {problem}")
        pytest.skip(problem)
    # Not under pytest's tmp_path: the server's user must reach the folder.
    folder = Path(tempfile.mkdtemp(prefix="sessionwire-pg-"))
    try:
        with private_postgres(folder) as running:
            yield running
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_a_restart_under_load_loses_nothing_doubles_nothing_and_runs_resume(
    server: PrivatePostgres,
) -> None:
    clock = VirtualClock()
    gateway = await Gateway.open(
        config=GatewayConfig.load(CONFIG),
        store=f"{server.url}?schema=restart",
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    try:
        targets = [f"agent:main:group:g{index}" for index in range(RUNS)]
        for key in (MAIN, *targets):
            await gateway.record_message(key, role="user", content="(opened)")
        run_ids = []
        for key in targets:
            sent = await gateway.call_tool(
                MAIN, "sessions_send", {"sessionKey": key, "message": "go", "timeoutSeconds": 0}
            )
            assert sent["status"] == "accepted", sent
            run_ids.append(str(sent["runId"]))
        await asyncio.wait_for(gateway.wait_idle(), HANG_SECONDS)  # every run at its agent

        acknowledged: list[str] = []
        refused: list[BaseException] = []
        a_quarter_written = asyncio.Event()

        async def writer(number: int) -> None:
            for index in range(MESSAGES_EACH):
                content = f"w{number}-{index}"
                # The store retries a dropped connection for a while; a write the
                # restart outlasts may fail, and is then written again (what a caller
                # does): either way it must be in the history once.
                while True:
                    try:
                        await gateway.record_message(MAIN, role="user", content=content)
                    except (OSError, psycopg.Error, StoreConflict) as error:
                        refused.append(error)
                        continue
                    acknowledged.append(content)
                    break
                if len(acknowledged) >= WRITERS * MESSAGES_EACH // 4:
                    a_quarter_written.set()

        writing = [asyncio.create_task(writer(number)) for number in range(WRITERS)]
        await asyncio.wait_for(a_quarter_written.wait(), HANG_SECONDS)
        # Mid-writes: every connection the gateway holds is cut.
        await asyncio.to_thread(server.restart)
        await asyncio.wait_for(asyncio.gather(*writing), HANG_SECONDS)
        assert len(acknowledged) == WRITERS * MESSAGES_EACH
        # The restart was felt (connections came back bad and were replaced) ...
        stats = store_of(gateway).datastore.pool.get_stats()
        assert stats.get("returns_bad", 0) + stats.get("connections_errors", 0) > 0, stats
        # ... and no save that had committed was reported as a conflict.
        assert not [error for error in refused if isinstance(error, StoreConflict)]

        # The runs, leased before the restart, finish on the reconnected gateway.
        await clock.advance(RUN_SECONDS)
        await asyncio.wait_for(gateway.wait_idle(), HANG_SECONDS)
        statuses = [await gateway.run(run_id) for run_id in run_ids]
        assert [run and run["status"] for run in statuses] == ["ok"] * RUNS

        # Every acknowledged message is in the history exactly once.
        history = await gateway.call_tool(
            MAIN, "sessions_history", {"sessionKey": MAIN, "limit": 1000}
        )
        texts = [part["text"] for message in history["messages"] for part in message["content"]]
        written = Counter(text for text in texts if text.startswith("w"))
        assert set(written) == set(acknowledged)
        assert max(written.values()) == 1
    finally:
        await gateway.close()
