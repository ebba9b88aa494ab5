"""Counting a gateway's trips to its store's threads: each is a hand-off from the loop
and back, most of what a short read costs (ADR 0036 §4)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.gateway import TOOLS


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


def count_reads_of(tool: str, monkeypatch: pytest.MonkeyPatch, gateway: Gateway) -> list[list[str]]:
    """A list that gets, for each call of ``tool`` from now on (in the order they start),
    the names of the reads it makes itself: trips off the loop from the call's own task,
    saves not counted (a memory store's saves take the same trip). The runs, drivers and
    waiters a call sets going work in tasks of their own."""
    parameters, handler = TOOLS[tool]
    calls: dict[asyncio.Task[Any], list[str]] = {}
    made: list[list[str]] = []

    async def counted_call(context: Any, params: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        calls[task] = reads = []
        made.append(reads)
        try:
            return await handler(context, params)
        finally:
            del calls[task]

    monkeypatch.setitem(TOOLS, tool, (parameters, counted_call))
    _count_reads(gateway, monkeypatch, lambda: calls.get(asyncio.current_task()))  # type: ignore[arg-type]
    return made


def count_reads(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gets the name of each read the gateway makes from now on, whichever
    task makes it (saves not counted)."""
    reads: list[str] = []
    _count_reads(gateway, monkeypatch, lambda: reads)
    return reads


def _count_reads(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    reads_of_caller: Callable[[], list[str] | None],
) -> None:
    store = internals(gateway).store
    off_loop = type(store)._off_loop

    async def counted(self: Any, call: Any, **options: Any) -> Any:
        reads = reads_of_caller()
        if reads is not None and options.get("a_read", True):
            query = getattr(call, "func", call)
            reads.append(getattr(query, "__name__", repr(query)))
        return await off_loop(self, call, **options)

    monkeypatch.setattr(type(store), "_off_loop", counted)
