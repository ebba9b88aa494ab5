"""A method a store layer answers as it is, by the layer below it: named, not forwarded.

``OffLoopStore`` hands the calls it answers on the loop (``on_log_grew``, the lock's) to
the blocking store, and ``EventSourcedStore`` hands the lock's to its backend, unchanged.
Written out, each was a method restating the port's signature to call the same name one
attribute down. Here it is one line, ``name = delegated(Port.name, to="_store")``, whose
type the checker reads from the port's declaration (ADR 0044).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from sessionwire.application.ports.generated_methods import GeneratedMethod

P = ParamSpec("P")
T = TypeVar("T")


class Delegated(GeneratedMethod[P, T]):
    """``instance.<to>.<name>``, for the method ``name`` declared as ``method``."""

    def __init__(self, method: Callable[Concatenate[Any, P], T], *, to: str) -> None:
        self.method = method.__name__
        super().__init__(self.method)
        self.to = to

    def bind(self, instance: Any) -> Callable[P, T]:
        answered: Callable[P, T] = getattr(getattr(instance, self.to), self.method)
        return answered


def delegated(method: Callable[Concatenate[Any, P], T], *, to: str) -> Delegated[P, T]:
    """The method ``method`` names, answered by the object in attribute ``to``."""
    return Delegated(method, to=to)
