"""The gateway's in-flight work: every task it runs, who it is for, and what it waits on.

Each run's session actor, runtime call, exchange or spawn driver, timer and delivery
attempt is a task started here (or, for a tool call, the caller's task entered here),
mapped to its work: an owner (kind and id) and a state. Work is runnable unless it waits
through one of this module's primitives: on the clock until a due time, on a future
(another work's outcome), or on a lock. Work waiting on a future that is done, on a lock
that is free, or on the clock at a due time that has come is runnable again.

``wait_idle()`` returns exactly when no work is runnable before the clock's next due
time; on a clock that moves by itself it also waits for every clock wait but parked
timers (archive timers, delivery back-offs), which end on their own schedule. No
loop-turn counting, no real-time quiet period: a change of state wakes the waiter.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import Context
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypeVar

from sessionwire.application.ports.clock_and_ids import Clock

T = TypeVar("T")


class HoldsSessionLocks(Protocol):
    """What hands out session locks (the store, blocking or awaited)."""

    def session_lock(self, key: str) -> AbstractAsyncContextManager[None]: ...


WaitKind = Literal["clock", "work", "lock"]


@dataclass(frozen=True)
class Owner:
    """Whom a piece of work is for: ``Owner("run", run_id)``, ``Owner("spawn", id)``..."""

    kind: str
    id: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class Wait:
    """What non-runnable work waits on."""

    kind: WaitKind
    due: datetime | None = None
    future: asyncio.Future[Any] | None = None
    ready: Callable[[], bool] | None = None
    parked: bool = False
    """A timer that ends on its own schedule: a real clock's ``wait_idle`` skips it."""


@dataclass
class Work:
    owner: Owner
    task: asyncio.Task[Any]
    wait: Wait | None = None

    def runnable(self, now: datetime) -> bool:
        wait = self.wait
        if wait is None:
            return not self.task.done()
        if wait.future is not None and wait.future.done():
            return True
        if wait.due is not None and wait.due <= now:
            return True
        return wait.ready is not None and wait.ready()

    def busy(self, now: datetime, *, real_time: bool) -> bool:
        """Runnable, or (on a clock that moves by itself) waiting for a due time."""
        if self.runnable(now):
            return True
        wait = self.wait
        return real_time and wait is not None and wait.due is not None and not wait.parked

    def describe(self) -> str:
        wait = self.wait
        if wait is None:
            return f"{self.owner} runnable"
        due = f" until {wait.due.isoformat()}" if wait.due is not None else ""
        parked = " (parked)" if wait.parked else ""
        return f"{self.owner} waiting on {wait.kind}{due}{parked}"


# Session locks held by work in this process, by (store location, session key): a wait
# for one is runnable once no work here holds it (the next poll takes it). Every
# registry of the process is woken when one is given back.
_held_here: Counter[tuple[str, str]] = Counter()
_registries: weakref.WeakSet[InFlight] = weakref.WeakSet()


class InFlight:
    """The registry of one gateway's in-flight work."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._works: dict[asyncio.Task[Any], Work] = {}
        self._change: asyncio.Future[None] | None = None
        _registries.add(self)

    # Starting and entering work ---------------------------------------------------------

    def start(
        self,
        work: Coroutine[Any, Any, T],
        owner: Owner,
        *,
        context: Context | None = None,
    ) -> asyncio.Task[T]:
        """Run ``work`` as a task registered for ``owner`` from this moment on."""
        task = asyncio.get_running_loop().create_task(work, name=str(owner), context=context)
        self._add(task, owner)
        task.add_done_callback(self._finished)
        return task

    @contextmanager
    def entered(self, owner: Owner) -> Iterator[None]:
        """Count the current task as work for ``owner`` while the block runs (a tool call
        from outside; inside registered work it is that work's)."""
        task = asyncio.current_task()
        if task is None or task in self._works:
            yield
            return
        self._add(task, owner)
        try:
            yield
        finally:
            self._remove(task)

    def release(self, task: asyncio.Task[Any]) -> None:
        """Stop counting ``task``: abandoned (a runtime cancelled at its timeout that has
        not stopped yet); its outcome is recorded without it."""
        self._remove(task)

    def cancel(self, task: asyncio.Task[Any]) -> None:
        """Cancel registered work. Until the loop has run it, it counts as runnable: the
        wait it was in ends with the CancelledError it has not seen yet."""
        task.cancel()
        work = self._works.get(task)
        if work is not None:
            work.wait = None
        self._poke()

    def owns(self, kind: str, id: str) -> None:
        """The current work is now for another owner (a session actor takes its next run)."""
        work = self.current()
        if work is not None:
            work.owner = Owner(kind, id)

    def current(self) -> Work | None:
        task = asyncio.current_task()
        return None if task is None else self._works.get(task)

    def _add(self, task: asyncio.Task[Any], owner: Owner) -> None:
        self._works[task] = Work(owner, task)
        self._poke()

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._remove(task)

    def _remove(self, task: asyncio.Task[Any]) -> None:
        if self._works.pop(task, None) is not None:
            self._poke()

    # Waiting --------------------------------------------------------------------------

    @contextmanager
    def waiting(self, wait: Wait) -> Iterator[None]:
        """The current work waits on ``wait`` while the block runs (nothing if the
        current task is not registered here, or already waits: the outer wait holds)."""
        work = self.current()
        if work is None or work.wait is not None:
            yield
            return
        work.wait = wait
        if wait.future is not None:
            wait.future.add_done_callback(self._poke_on)
        self._poke()
        try:
            yield
        finally:
            work.wait = None
            if wait.future is not None:
                wait.future.remove_done_callback(self._poke_on)

    def clock_wait(self, due: datetime, *, parked: bool = False) -> Any:
        """``waiting`` on the clock until ``due`` (what a clock's own sleep marks)."""
        return self.waiting(Wait("clock", due=due, parked=parked))

    async def sleep(self, seconds: float, *, parked: bool = False) -> None:
        """Wait ``seconds`` on the gateway clock, as the current work."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        with self.clock_wait(self.clock.now() + timedelta(seconds=seconds), parked=parked):
            await self.clock.sleep(seconds)

    async def wait_for(
        self,
        future: asyncio.Future[Any],
        *,
        due: datetime | None = None,
        kind: WaitKind = "work",
        ready: Callable[[], bool] | None = None,
        parked: bool = False,
    ) -> bool:
        """Wait until ``future`` is done (True) or the clock reaches ``due`` (False).

        ``future`` is never cancelled here: others may wait on it too. ``ready``: the
        wait counts as runnable once it says so (what ``future`` is about to be set by, in
        a callback the loop has not run yet).
        """
        with self.waiting(Wait(kind, due=due, future=future, ready=ready, parked=parked)):
            if due is None:
                await asyncio.wait({future})
                return True
            timer = asyncio.ensure_future(self._until(due))
            try:
                done, _ = await asyncio.wait({future, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
            return future in done or future.done()

    async def _until(self, due: datetime) -> None:
        """Sleep on the clock until ``due``, counted from when this first runs: a timer
        task takes its first step later than its wait began, and a virtual clock may
        have moved in between (a relative sleep would then overshoot the due time the
        wait was registered with, and the settle would wait for it for ever)."""
        while (left := (due - self.clock.now()).total_seconds()) > 0:
            await self.clock.sleep(left)

    @asynccontextmanager
    async def session_lock(
        self, store: HoldsSessionLocks, location: str, key: str
    ) -> AsyncIterator[None]:
        """Hold ``store``'s lock of session ``key``, waiting for it as a lock wait."""
        held = (location, key)
        lock = store.session_lock(key)
        with self.waiting(Wait("lock", ready=lambda: _held_here[held] == 0)):
            await lock.__aenter__()
        _held_here[held] += 1
        try:
            yield
        finally:
            _held_here[held] -= 1
            if _held_here[held] <= 0:
                del _held_here[held]
            try:
                await lock.__aexit__(None, None, None)
            finally:
                for registry in list(_registries):
                    registry._poke()

    # Idleness -------------------------------------------------------------------------

    def idle(self) -> bool:
        """No work runnable (on a clock that moves by itself: nor waiting for a due time,
        but parked timers). The calling task's own work does not count."""
        now = self.clock.now()
        real_time = self.clock.moves_by_itself
        me = asyncio.current_task()
        return not any(
            work.busy(now, real_time=real_time)
            for task, work in list(self._works.items())
            if task is not me
        )

    async def wait_idle(self) -> None:
        """Return once ``idle()``: woken by every change of state, never by a timer."""
        while not self.idle():
            if self._change is None or self._change.done():
                self._change = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._change)

    def snapshot(self) -> list[str]:
        """Each piece of work and its state, for diagnostics."""
        return [work.describe() for work in list(self._works.values())]

    def runnable(self) -> list[Work]:
        """The work runnable now (what ``idle()`` waits for), for diagnostics."""
        now = self.clock.now()
        return [work for work in list(self._works.values()) if work.runnable(now)]

    def tasks(self) -> list[asyncio.Task[Any]]:
        return [task for task in self._works if not task.done()]

    def _poke_on(self, _: object) -> None:
        self._poke()

    def _poke(self) -> None:
        change = self._change
        if change is not None and not change.done():
            change.set_result(None)


async def awaited(work: Awaitable[T]) -> T:
    """``work`` as a coroutine (for ``InFlight.start``)."""
    return await work


__all__ = ["InFlight", "Owner", "Wait", "Work", "awaited"]
