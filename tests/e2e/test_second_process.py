"""A second process on the same SQLite file or PostgreSQL database sees the same sessions.

PostgreSQL takes several writing gateways at once; an SQLite file one writer at a time
(decision 20): there the processes take turns (tests/integration/test_sqlite_reader_writes.py
shows a second writer refused)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from sessionwire import Gateway

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from sessionwire import SyncGateway
    gw = SyncGateway.open(store=sys.argv[1])
    gw.record_message("cron:from-child", role="user", content="written by the child")
    listed = gw.call_tool("main", "sessions_list", {})
    print(json.dumps(sorted(row["key"] for row in listed["sessions"])))
    gw.close()
    """
)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: object) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    return str(request.getfixturevalue("postgres_url"))


async def test_two_processes_share_one_store(shared_store: str) -> None:
    one_writer = shared_store.startswith("sqlite:")
    gateway = await Gateway.open(store=shared_store)
    try:
        await gateway.record_message("main", role="user", content="written by the parent")
        if one_writer:  # the parent lets the file go while the child writes
            await gateway.close()
        child = subprocess.run(
            [sys.executable, "-c", SCRIPT, shared_store],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout.strip().splitlines()[-1]) == [
            "agent:main:cron:from-child",
            "main",
        ]
        if one_writer:
            gateway = await Gateway.open(store=shared_store)
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "cron:from-child"}
        )
        assert history["messages"][0]["content"][0]["text"] == "written by the child"
        # The parent keeps appending to a session the child also wrote to.
        await gateway.record_message("cron:from-child", role="assistant", content="seen")
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "cron:from-child"}
        )
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
    finally:
        await gateway.close()


async def test_concurrent_writers_lose_nothing(postgres_url: str) -> None:
    """Two processes appending to one session: every message lands, none twice (PostgreSQL:
    an SQLite file has one writer at a time)."""
    shared_store = postgres_url
    writer = textwrap.dedent(
        """
        import sys
        from sessionwire import SyncGateway
        gw = SyncGateway.open(store=sys.argv[1])
        for i in range(40):
            gw.record_message("main", role="user", content=f"{sys.argv[2]}-{i}")
        gw.close()
        """
    )
    gateway = await Gateway.open(store=shared_store)
    try:
        await gateway.record_message("main", role="user", content="start")
        children = [
            subprocess.Popen(
                [sys.executable, "-c", writer, shared_store, name],
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("a", "b")
        ]
        for child in children:
            _, stderr = child.communicate(timeout=180)
            assert child.returncode == 0, stderr
        history = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "main", "limit": 1000}
        )
        texts = [m["content"][0]["text"] for m in history["messages"]]
        assert len(texts) == 81
        assert sorted(texts[1:]) == sorted(f"{n}-{i}" for n in "ab" for i in range(40))
        for name in "ab":
            mine = [t for t in texts if t.startswith(f"{name}-")]
            assert mine == [f"{name}-{i}" for i in range(40)]
    finally:
        await gateway.close()
