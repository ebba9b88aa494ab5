"""Tasks started outside any run carry none of the run's context variables, those an
adapter declares included (the PostgreSQL store's held leases, ADR 0028)."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar

from sessionwire.application.orchestration.run_scope import outside_any_run, run_scoped

_held: ContextVar[tuple[str, ...]] = run_scoped(ContextVar("test_held", default=()), ())
_elsewhere: ContextVar[str] = ContextVar("test_not_the_runs", default="outside")


async def test_a_task_started_outside_any_run_sees_no_run_scoped_value() -> None:
    async def seen() -> tuple[tuple[str, ...], str]:
        return _held.get(), _elsewhere.get()

    held, elsewhere = _held.set(("the run's lease",)), _elsewhere.set("the caller's")
    try:
        loop = asyncio.get_running_loop()
        assert await loop.create_task(seen(), context=outside_any_run()) == ((), "the caller's")
        assert await loop.create_task(seen()) == (("the run's lease",), "the caller's")
    finally:
        _held.reset(held)
        _elsewhere.reset(elsewhere)
