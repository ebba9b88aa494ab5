"""Closing the awaited store (``OffLoopStore``) while its reader threads still read.

A gateway's close cancels its tasks, but a read already on a reader thread runs on; the
store closed under it closed the connection that read was using (the pool closes its
connections in use too), and on SQLite the driver crashed the process (SIGSEGV, the
suite exiting with 139) when that happened mid-statement.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.off_loop import StoreClosed, open_off_loop

# Only the old behaviour's chance to fail: a close that does not wait for the read is
# called at once; one that waits is never called in it.
CLOSE_CALLED_WITHIN = 0.5


async def test_a_close_waits_for_the_reads_in_progress_then_refuses_new_ones(
    store_url: str, config: GatewayConfig
) -> None:
    store = await open_off_loop(lambda: open_event_store(store_url, config))
    blocking = store.event_store
    reading, close_called = threading.Event(), threading.Event()
    real_close = blocking.close
    read_running = False
    closed_under_the_read: list[bool] = []

    def recorded_close() -> None:
        closed_under_the_read.append(read_running)
        close_called.set()
        real_close()

    blocking.close = recorded_close  # type: ignore[method-assign]

    def slow_read(store: EventSourcedStore) -> Any:
        nonlocal read_running
        with store.reading() as cursor:  # a pooled connection, held
            read_running = True
            reading.set()
            close_called.wait(CLOSE_CALLED_WITHIN)
            cursor.execute("SELECT 1")
            found = cursor.fetchall()
            read_running = False
        return found

    read = asyncio.ensure_future(store.read(slow_read))
    await asyncio.to_thread(reading.wait)
    await store.close()
    assert closed_under_the_read == [False]
    assert len(await read) == 1  # the read finished on its own connection
    with pytest.raises(StoreClosed):
        await store.read(slow_read)
    await store.close()  # closing again is closing once
    assert closed_under_the_read == [False]
