"""A method a class names instead of writing out: its signature read from a declaration.

The store's layers serve each port query by naming it (ADR 0044): ``AsyncStore``'s
``awaited``, ``EventSourcedStore``'s ``read_model_query`` and the adapters' ``delegated``
each make a ``GeneratedMethod`` whose ``bind`` says what a call does; the type checker
reads the method's parameters from the declaration it was made from (``ParamSpec``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class GeneratedMethod(ABC, Generic[P, R]):
    """A non-data descriptor (an instance attribute still shadows it, as it does a
    method): ``instance.name`` is ``bind(instance)``."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        """The name it must be served under (it runs the method of that name), if any."""

    def __set_name__(self, owner: type, name: str) -> None:
        if self.name is not None and name != self.name:
            raise TypeError(f"{owner.__name__}.{name} would run {self.name}")
        self.attribute = name
        """The name it is served under (what a bound call says it is)."""

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> GeneratedMethod[P, R]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(
        self, instance: object | None, owner: type | None = None
    ) -> GeneratedMethod[P, R] | Callable[P, R]:
        if instance is None:
            return self
        return self.bind(instance)

    @abstractmethod
    def bind(self, instance: Any) -> Callable[P, R]:
        """What calling the method on ``instance`` runs."""
