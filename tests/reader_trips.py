"""Counting a gateway's trips to its store's threads: each is a hand-off from the loop
and back, most of what a short read costs (ADR 0036 §4)."""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import internals


def count_trips(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """A list that gets each call the gateway's store runs off the loop from now on."""
    store = internals(gateway).store
    trips: list[object] = []
    off_loop = type(store)._off_loop

    async def counted(self: Any, call: Any, **options: Any) -> Any:
        trips.append(call)
        return await off_loop(self, call, **options)

    monkeypatch.setattr(type(store), "_off_loop", counted)
    return trips
