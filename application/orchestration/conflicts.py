"""Retrying a save that lost a race with another writer on the same stream."""

from __future__ import annotations

import asyncio
import random
import time

MAX_SAVE_ATTEMPTS = 50


async def back_off(attempt: int) -> None:
    """Wait a little, longer each time and at random, so two writers stop colliding.

    Real time on purpose: this spaces out database writes, it is not gateway time. A
    blocking sleep (milliseconds, on a rare path) because event-loop timers stop under
    freezegun's frozen time, and tests freeze time.
    """
    time.sleep(random.uniform(0, 0.002 * min(attempt, 10)))
    await asyncio.sleep(0)
