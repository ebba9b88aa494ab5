"""Given / when / then for the process managers, in the spirit of Axon's aggregate test
fixtures and Temporal's time-skipping tests.

*Given* some recorded history (aggregates with pending events, or events), *when* a
command runs or some virtual time passes, *then* exactly these new events are recorded::

    async with Scenario(script={"rules": [...]}) as s:
        s.given(session, run, exchange)
        await s.when(seconds=0)                  # a restarted gateway picks the work up
        s.then(expect("RoundOneReplied", reply="pong"), expect("RunStarted"), ...)

The gateway under test is a real one (any store), on a VirtualClock with a
ScriptedRuntime and a CapturingDelivery: what the process managers do is what they do in
production, and only their recorded events are compared.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.loop_guard import blocking_access_allowed
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.adapters.testkit.deliveries import CapturingDelivery
from sessionwire.adapters.testkit.internals import internals
from sessionwire.adapters.testkit.virtual_clock import VirtualClock
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.domain.base import Aggregate, DomainEvent, event_payload
from sessionwire.domain.errors import SessionwireError

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Expected:
    """An event by class name, with the fields that must hold the given values."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)

    def matches(self, event: DomainEvent) -> bool:
        if type(event).__name__ != self.name:
            return False
        payload = event_payload(event)
        return all(payload.get(name, _MISSING) == value for name, value in self.fields.items())

    def line(self) -> str:
        return _line(self.name, self.fields)


def expect(name: str, **fields: Any) -> Expected:
    """The event ``name`` (e.g. "RunStarted"), with ``fields`` among its values."""
    return Expected(name, fields)


_MISSING = object()


def _line(name: str, fields: dict[str, Any]) -> str:
    shown = ", ".join(f"{key}={value!r}" for key, value in fields.items())
    return f"{name}({shown})"


def _actual_line(event: DomainEvent, hint: Expected | None, asked: dict[str, Expected]) -> str:
    """The event shown with the fields the expectation at its place (or, failing that,
    the first expectation of its kind) asks about, so the diff lines compare."""
    name = type(event).__name__
    if hint is None or hint.name != name:
        hint = asked.get(name)
    names = hint.fields if hint is not None else {}
    payload = event_payload(event)
    return _line(name, {key: payload.get(key, "<absent>") for key in names})


class EventsDiffer(SessionwireError, AssertionError):
    """The recorded events are not exactly the expected ones; the message is a diff."""


class Scenario:
    """A gateway to give a history, act on, and check the events it records."""

    def __init__(
        self,
        *,
        store: str = "memory",
        config: GatewayConfig | dict[str, Any] | None = None,
        script: dict[str, Any] | None = None,
        runtime: ScriptedRuntime | None = None,
        start: datetime = START,
    ) -> None:
        self.store_url = store
        self.config = config if isinstance(config, GatewayConfig) else GatewayConfig.load(config)
        self.runtime = runtime or ScriptedRuntime.from_dict(script or {"rules": []})
        self.clock = VirtualClock(start=start)
        self.delivery = CapturingDelivery()
        self._gateway: Gateway | None = None
        self._mark = 0
        self._resumed = False

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            raise RuntimeError("open the scenario first: async with Scenario(...) as s")
        return self._gateway

    async def __aenter__(self) -> Scenario:
        self._gateway = await Gateway.open(
            config=self.config,
            store=self.store_url,
            runtime=self.runtime,
            clock=self.clock,
            delivery=self.delivery,
        )
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.gateway.close()

    # Given ------------------------------------------------------------------------------

    def given(self, *history: Aggregate | DomainEvent) -> Scenario:
        """Record this history as if it had happened: aggregates' pending events, or
        events (later events of an aggregate already recorded continue its stream)."""
        store = self._store
        pending: dict[Any, list[DomainEvent]] = {}
        # Set-up before anything runs, blocking on purpose (the loop has nothing else to
        # do yet): exempt from the loop guard, as the reads ``then`` makes are.
        with blocking_access_allowed():
            for item in history:
                if isinstance(item, Aggregate):
                    store.save(item)
                else:
                    pending.setdefault(item.originator_id, []).append(item)
            for aggregate_id, events in pending.items():
                store.save(_continued(list(store.stream(aggregate_id)), events))
            self._mark = store.log_position()
        return self

    @property
    def _store(self) -> EventSourcedStore:
        opened = internals(self.gateway).store
        assert isinstance(opened, OffLoopStore)
        return opened.event_store

    # When -------------------------------------------------------------------------------

    async def when(
        self,
        command: Callable[[Gateway], Awaitable[Any]] | None = None,
        *,
        seconds: float | timedelta = 0,
    ) -> Any:
        """Run ``command`` (given the gateway) and/or let ``seconds`` of virtual time pass;
        the gateway's work settles before it returns. Returns the command's result.

        The first ``when`` also resumes the work the given history left unfinished, as
        a gateway restarted on that store would.
        """
        gateway = self.gateway
        self._mark = await internals(gateway).store.read(lambda store: store.log_position())
        if not self._resumed:
            self._resumed = True
            await internals(gateway).resume()
        result = await command(gateway) if command is not None else None
        await gateway.wait_idle()
        await self.clock.advance(seconds)
        await gateway.wait_idle()
        return result

    # Then -------------------------------------------------------------------------------

    @property
    def new_events(self) -> list[DomainEvent]:
        """The events recorded since the last ``given`` or ``when`` began."""
        with blocking_access_allowed():
            return [event for _, event in self._store.events(start=self._mark + 1)]

    def then(self, *expected: Expected) -> list[DomainEvent]:
        """Exactly these new events, in this order; EventsDiffer shows the difference."""
        actual = self.new_events
        if len(actual) == len(expected) and all(
            want.matches(got) for want, got in zip(expected, actual, strict=True)
        ):
            return actual
        raise EventsDiffer(_diff(expected, actual))

    def then_nothing(self) -> None:
        self.then()


def _continued(history: Sequence[DomainEvent], new: Sequence[DomainEvent]) -> Aggregate:
    """The aggregate after its recorded ``history``, holding ``new`` as pending events."""
    events = [*history, *new]
    first = events[0]
    if not isinstance(first, Aggregate.Created):
        raise ValueError(f"the history of {first.originator_id} does not start with its creation")
    aggregate = first.mutate(None)
    assert isinstance(aggregate, Aggregate)
    for event in events[1:]:
        assert isinstance(event, Aggregate.Event)
        event.mutate(aggregate)
    aggregate._pending_events = list(new)
    return aggregate


def _diff(expected: Sequence[Expected], actual: Sequence[DomainEvent]) -> str:
    want = [item.line() for item in expected]
    hints = list(expected) + [None] * max(0, len(actual) - len(expected))
    asked: dict[str, Expected] = {}
    for item in expected:
        asked.setdefault(item.name, item)
    got = [_actual_line(event, hint, asked) for event, hint in zip(actual, hints, strict=False)]
    diff = "\n".join(difflib.ndiff(want, got))
    return (
        f"expected {len(expected)} new event(s), got {len(actual)} "
        f"('- ' expected only, '+ ' recorded only):\n{diff}"
    )


__all__ = ["EventsDiffer", "Expected", "Scenario", "expect"]
