"""Retrying a save that lost a race with another writer on the same stream."""

from __future__ import annotations

import asyncio
import random

MAX_SAVE_ATTEMPTS = 50


async def back_off(attempt: int) -> None:
    """Wait a little, longer each time and at random, so two writers stop colliding.

    Real time on purpose: this spaces out database writes, it is not gateway time.
    """
    await asyncio.sleep(random.uniform(0, 0.002 * min(attempt, 10)))
