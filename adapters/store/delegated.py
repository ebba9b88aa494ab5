"""A method a store layer answers as it is, by the layer below it: named, not forwarded.

``OffLoopStore`` hands the calls it answers on the loop (``on_log_grew``, the lock's) to
the blocking store, and ``EventSourcedStore`` hands the lock's to its backend, unchanged.
Written out, each was a method restating the port's signature to call the same name one
attribute down. Here it is one line, ``name = delegated(Port.name, to="_store")``, whose
type the checker reads from the port's declaration (ADR 0044).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
T = TypeVar("T")


class Delegated(Generic[P, T]):
    """``instance.<to>.<name>``, for the method ``name`` declared as ``method``."""

    def __init__(self, method: Callable[Concatenate[Any, P], T], *, to: str) -> None:
        self.name = method.__name__
        self.to = to

    def __set_name__(self, owner: type, name: str) -> None:
        # Served under another name, it would call the wrong method below.
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} delegates {self.name}")

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Delegated[P, T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Callable[P, T]: ...

    def __get__(
        self, instance: object | None, owner: type | None = None
    ) -> Delegated[P, T] | Callable[P, T]:
        if instance is None:
            return self
        answered: Callable[P, T] = getattr(getattr(instance, self.to), self.name)
        return answered


def delegated(method: Callable[Concatenate[Any, P], T], *, to: str) -> Delegated[P, T]:
    """The method ``method`` names, answered by the object in attribute ``to``."""
    return Delegated(method, to=to)
