"""The pause between two tries of a save that lost a race (found by mutation testing,
docs/testing.md "What mutation testing left": one writer never loses a race, so neither
the simulator nor the unit tier took this pause). The pause is recorded, not taken."""

from __future__ import annotations

import random

import pytest
from sessionwire.application.orchestration import conflicts


async def test_the_pause_is_random_up_to_two_milliseconds_a_try_capped_at_ten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(conflicts.time, "sleep", pauses.append)
    monkeypatch.setattr(conflicts, "random", random.Random(28))

    for attempt in range(1, 13):
        for _ in range(20):
            await conflicts.back_off(attempt)

    assert len(pauses) == 12 * 20
    for attempt in range(1, 13):
        mine = pauses[(attempt - 1) * 20 : attempt * 20]
        assert all(0 < pause <= 0.002 * min(attempt, 10) for pause in mine)
    # Longer each time (at random): the tenth try's pauses reach past the first try's bound.
    assert max(pauses[9 * 20 : 10 * 20]) > 0.002
