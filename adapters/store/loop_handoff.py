"""Saves settled by a writer thread, handed back to the event loop one per loop turn.

A group commit settles many saves at once (44 per commit with 50 writers). Handed back
one wake-up each, they all ran in the loop's next turn, and each woke a caller that
prepared its next save: a burst of about 10 ms in which the loop polled no socket, so a
request that arrived meanwhile waited for all of it (``sessions_list`` over HTTP, p99
4× its idle p99 under 50 writers). Here the thread wakes the loop once per batch, and the
loop settles one save per turn, in commit order: between two, it polls its sockets and
runs what became ready, the woken caller included.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

Outcome = BaseException | None


class Settles(Protocol):
    """What a save hands to the loop: its outcome, set on the writer's thread, and what
    runs with it."""

    outcome: Outcome

    def settled(self, outcome: Outcome) -> None:
        """Runs on the loop: what follows the commit (or the failure) there."""

    def abandoned(self) -> None:
        """Runs on the writer's thread instead, when the loop has closed: nothing will run."""


class Settlement:
    """A ``Settles`` made of two callables (the store's own saves are ``Settles``
    themselves: one object per save, no closures)."""

    __slots__ = ("_abandoned", "_settled", "outcome")

    def __init__(
        self, settled: Callable[[Outcome], None], abandoned: Callable[[], None], outcome: Outcome
    ) -> None:
        self._settled = settled
        self._abandoned = abandoned
        self.outcome = outcome

    def settled(self, outcome: Outcome) -> None:
        self._settled(outcome)

    def abandoned(self) -> None:
        self._abandoned()


class LoopHandoff:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: deque[Settles] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def put(self, settlement: Settles) -> None:
        """From the writer's thread: ``settlement`` runs on the loop after those put before
        (inside ``settling_together``: when its block ends)."""
        held = getattr(_together, "held", None)
        if held is not None:
            held.append((self, settlement))
            return
        self.put_many((settlement,))

    def put_many(self, settlements: Iterable[Settles]) -> None:
        """From the writer's thread: each of ``settlements`` runs on the loop, in order,
        after those put before; the loop is woken once for them all."""
        with self._lock:
            self._pending.extend(settlements)
            if self._scheduled and not self.loop.is_closed():
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._settle_one)
        except RuntimeError:  # the loop closed: whatever waits here never runs
            with self._lock:
                dropped, self._pending = list(self._pending), deque()
                self._scheduled = False
            for lost in dropped:
                lost.abandoned()

    def _settle_one(self) -> None:
        with self._lock:
            if not self._pending:
                self._scheduled = False
                return
            settlement = self._pending.popleft()
            more = bool(self._pending)
            self._scheduled = more
        try:
            settlement.settled(settlement.outcome)
        finally:
            if more:
                # The next turn, behind what this one woke (the caller whose save it
                # was); the loop polls its sockets before that turn.
                self.loop.call_soon(self._settle_one)


_together = threading.local()


@contextmanager
def settling_together() -> Iterator[None]:
    """Settlements put on this thread meanwhile reach their loops when the block ends,
    each loop woken once for them all (a batch committed together).

    Put one by one, each found the loop's queue emptied by the loop meanwhile (it settles
    as the writer puts), and woke it again: up to one wake-up per save of a batch instead
    of one per batch."""
    held: list[tuple[LoopHandoff, Settles]] = []
    _together.held = held
    try:
        yield
    finally:
        _together.held = None
        by_loop: dict[LoopHandoff, list[Settles]] = {}
        for handoff, settlement in held:
            by_loop.setdefault(handoff, []).append(settlement)
        for handoff, settlements in by_loop.items():
            handoff.put_many(settlements)
