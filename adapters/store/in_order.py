"""Store calls whose results reach the event loop where they were asked: a replayable order.

Off the loop (decision 23), a store call's result reaches the loop whenever its thread is
done, between any two of the loop's steps: which waiting task resumes first, and so what
is recorded first, follows the threads' timing. Even one store thread taking calls in
order is not enough (the loop runs on while it works). A deterministic simulation needs
the same order on every run of a seed: under ``in_submission_order()`` the stores opened
run each call on a thread of their own while the caller waits, so its result is queued
on the loop at the point it was asked for, as a call on the loop would be, and still no
database connection is taken on the loop's thread (the loop guard holds).

For the simulator only (adapters/testkit/simulator): the loop waits for every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_IN_ORDER: ContextVar[bool] = ContextVar("sessionwire_store_calls_in_order", default=False)


class InOrderExecutor(Executor):
    """Runs each call on its one thread and returns its future once done."""

    def __init__(self, thread_name_prefix: str) -> None:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=thread_name_prefix)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future = self._thread.submit(fn, *args, **kwargs)
        wait([future])
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._thread.shutdown(wait, cancel_futures=cancel_futures)


@contextmanager
def in_submission_order() -> Iterator[None]:
    """Stores opened inside (in this context, its tasks and their store-opening threads)
    complete their calls in the order asked."""
    token = _IN_ORDER.set(True)
    try:
        yield
    finally:
        _IN_ORDER.reset(token)


def calls_in_order() -> bool:
    return _IN_ORDER.get()


def store_executor(threads: int, thread_name_prefix: str) -> Executor:
    """The threads a store runs its calls on: ``threads`` of them, or one in order."""
    if calls_in_order():
        return InOrderExecutor(thread_name_prefix)
    return ThreadPoolExecutor(threads, thread_name_prefix=thread_name_prefix)


__all__ = ["InOrderExecutor", "calls_in_order", "in_submission_order", "store_executor"]
