"""Folding an aggregate's events into a fresh aggregate, with no store: what a gateway
that reloads the stream would hold. The state-machine unit tests check, after each
example, that the state a command left equals the state its events rebuild."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sessionwire.domain.base import Aggregate

A = TypeVar("A", bound=Aggregate)


def replayed(events: Sequence[Any], cls: type[A]) -> A:
    """The aggregate the events make, from its Created event on."""
    aggregate = None
    for event in events:
        aggregate = event.mutate(aggregate)
    assert isinstance(aggregate, cls)
    return aggregate


def event_names(events: Sequence[Any]) -> list[str]:
    return [type(event).__name__ for event in events]
