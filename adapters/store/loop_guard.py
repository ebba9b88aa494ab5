"""The guard that catches database work on an event loop's thread (decision 23).

Every connection the store takes passes ``check_off_loop``. With the guard armed
(``SESSIONWIRE_LOOP_GUARD=raise``, as the test suite and the simulator run), taking one
on a thread that is running an event loop raises ``SqlOnLoopThread`` naming the call,
so a store call that slipped back onto the loop fails the test that made it, on every
store. Unarmed (the default in production) the check is one environment lookup at
import and a global read per connection.

A test's own blocking calls are not the gateway's: a connection taken under a frame of
a ``tests/`` or ``benchmarks/`` file, with no coroutine of the product's in between,
passes, so a test may check what was recorded with the blocking store (or run an audit,
or open a store) from its loop thread; a product coroutine that blocks still fails.
``blocking_access_allowed`` lifts the guard for one block of the product's own test kit
(the simulator's observer, a scenario's given history), which reads on purpose.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sessionwire.domain.errors import SessionwireError

ENV = "SESSIONWIRE_LOOP_GUARD"


class SqlOnLoopThread(SessionwireError, AssertionError):
    """A database connection was taken on the event loop's thread."""


class _Guard(threading.local):
    allowed = 0


_guard = _Guard()
_armed = os.environ.get(ENV, "") == "raise"
# Lists that each hear of every SqlOnLoopThread raised (``watching``): product code that
# catches broad exceptions cannot hide one from the simulator.
_watchers: list[list[str]] = []
_watchers_lock = threading.Lock()


def arm(armed: bool = True) -> None:
    """Arm (or disarm) the guard in this process."""
    global _armed
    _armed = armed


def armed() -> bool:
    return _armed


# Frames of these files are the store's own machinery, not its caller.
_MACHINERY = (
    f"{os.sep}adapters{os.sep}store{os.sep}",
    f"{os.sep}eventsourcing{os.sep}",
    f"{os.sep}psycopg{os.sep}",
    f"{os.sep}psycopg_pool{os.sep}",
    f"{os.sep}contextlib.py",
    f"{os.sep}functools.py",
)
_TESTS = (f"{os.sep}tests{os.sep}", f"{os.sep}benchmarks{os.sep}")
# asyncio's Handle._run: every callback and task step the loop runs passes through it.
_LOOP_CALLBACKS = f"asyncio{os.sep}events.py"


# A coroutine's or an async generator's frame: code that runs on the loop as a task.
_ASYNC = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _called_by_a_test() -> bool:
    """Did a test call blocking code itself? Up from the connection, past the store's
    machinery and any plain functions: a test's frame before any coroutine of the
    product's is a test calling a blocking function (an audit, an import, opening a
    store) on purpose; a product coroutine first is the product blocking the loop."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if any(part in name for part in _TESTS):
            return True
        if code.co_flags & _ASYNC and not any(part in name for part in _MACHINERY):
            return False
        if code.co_name == "_run" and name.endswith(_LOOP_CALLBACKS):
            # A plain callback the loop runs (a settled save's, say): the product's,
            # even when a test or a benchmark started the loop further up.
            return False
        frame = frame.f_back  # type: ignore[assignment]
    return False


def check_off_loop(what: str) -> None:
    if not _armed or _guard.allowed:
        return
    if asyncio._get_running_loop() is not None and not _called_by_a_test():
        message = (
            f"{what} on the event loop's thread (from {_first_caller()}): store work "
            "must be awaited through the AsyncStore port (decision 23)"
        )
        with _watchers_lock:
            for seen in _watchers:
                seen.append(message)
        raise SqlOnLoopThread(message)


def _first_caller() -> str:
    """The first frame outside the store's machinery: who asked for the connection."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not any(part in name for part in _MACHINERY):
            return f"{os.path.basename(name)}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


@contextmanager
def watching() -> Iterator[list[str]]:
    """Every SqlOnLoopThread raised meanwhile (anywhere in the process), in a list, even
    one that the code it interrupted caught and swallowed."""
    seen: list[str] = []
    with _watchers_lock:
        _watchers.append(seen)
    try:
        yield seen
    finally:
        with _watchers_lock:
            _watchers.remove(seen)


@contextmanager
def blocking_access_allowed() -> Iterator[None]:
    _guard.allowed += 1
    try:
        yield
    finally:
        _guard.allowed -= 1
