"""What belongs to the run a task works for, and the context of tasks that work for none.

A task started inside a run's turn copies the turn's context: its lane slot, the turn
its tool calls are linked to and, on PostgreSQL, the session lease that fences its
saves. A task that drives work on its own (an exchange or spawn driver, a timer, a
budget's cancel) outlives the run and must carry none of them: it is started in
``outside_any_run()``. Each module whose context variable is the current run's declares
it with ``run_scoped`` (an adapter too, at its import: the application never imports
adapters), so that context resets it as well.
"""

from __future__ import annotations

import contextvars
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

# Every run-scoped variable with its value outside any run. Filled at import time.
_outside: dict[ContextVar[Any], Any] = {}


def run_scoped(variable: ContextVar[T], outside: T) -> ContextVar[T]:
    """Declare ``variable`` the current run's: ``outside_any_run()`` sets it to
    ``outside``. Returns it, to declare where it is made."""
    _outside[variable] = outside
    return variable


def outside_any_run() -> contextvars.Context:
    """A copy of the current context in which no run is current: no turn, no lane slot,
    no store lease (for tasks that drive work on their own)."""
    context = contextvars.copy_context()
    for variable, outside in list(_outside.items()):
        context.run(variable.set, outside)
    return context


__all__ = ["outside_any_run", "run_scoped"]
