"""Retrying a save that lost a race with another writer on the same stream."""

from __future__ import annotations

import asyncio
import random
import time

MAX_SAVE_ATTEMPTS = 50


async def back_off(attempt: int) -> None:
    """Wait a little, longer each time and at random, so two writers stop colliding.

    Real time on purpose: this spaces out database writes, it is not gateway time. The
    pause is taken in a worker thread, so the event loop runs on meanwhile (issue 12:
    nothing blocks it), and not on an event-loop timer, which stops under freezegun's
    frozen time (tests freeze time).
    """
    pause = random.uniform(0, 0.002 * min(attempt, 10))
    if pause > 0:
        await asyncio.to_thread(time.sleep, pause)
    else:
        await asyncio.sleep(0)
