"""Telemetry: what the gateway tells an operator's metrics and traces (ADR 0019).

The application reports through this port only; adapters turn the reports into Prometheus
metrics (adapters/telemetry/prometheus.py) or OpenTelemetry spans
(adapters/telemetry/otel.py). The default, ``NO_TELEMETRY``, does nothing and imports
nothing, so an embedding program that asks for neither pays for neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class RunSpan:
    """What a run's span says about it (GenAI semantic conventions: ``invoke_agent``)."""

    run_id: str
    session_key: str
    agent_id: str
    step: str
    trace_id: str | None
    """Our ``traceId`` (the id of the message that started the chain), if the run has one."""
    parent_run_id: str | None


@dataclass(frozen=True)
class ToolSpan:
    """What a tool call's span says about it (GenAI semantic conventions: ``execute_tool``)."""

    tool: str
    requester: str
    run_id: str | None
    """The run making the call, when it is made from inside a run's turn."""
    trace_id: str | None


class SpanOutcome:
    """Set by the instrumented code before its span ends: how it ended."""

    def __init__(self) -> None:
        self.status: str | None = None
        self.error: str | None = None


@dataclass(frozen=True)
class GatewayGauges:
    """Readings taken when metrics are collected, not on every change."""

    free_slots: Callable[[], int]
    slots: int
    pending_runs: Callable[[], dict[str, int]]
    outbox_depth: Callable[[], int]


class Telemetry:
    """The no-op telemetry; adapters override what they record."""

    def watch(self, gauges: GatewayGauges) -> None:
        """The gateway's live readings (lane slots, pending runs, outbox depth)."""

    def run_ended(self, status: str) -> None:
        """A run ended (ok, error, timeout)."""

    def delivery_attempted(self, outcome: str) -> None:
        """An outbox delivery attempt: delivered, failed or abandoned."""

    def appended(self, seconds: float, events: int) -> None:
        """The store appended ``events`` events in one transaction taking ``seconds``."""

    def conflict_retried(self) -> None:
        """A save conflicted with another writer and is retried on fresh state."""

    @contextmanager
    def run_span(self, run: RunSpan) -> Iterator[SpanOutcome]:
        """Around one run's turn (the runtime call)."""
        yield SpanOutcome()

    @contextmanager
    def tool_span(self, call: ToolSpan) -> Iterator[SpanOutcome]:
        """Around one tool call."""
        yield SpanOutcome()


NO_TELEMETRY = Telemetry()


class FanOut(Telemetry):
    """Several telemetries at once (Prometheus metrics and OpenTelemetry spans, say)."""

    def __init__(self, telemetries: Sequence[Telemetry]) -> None:
        self.telemetries = tuple(telemetries)

    def watch(self, gauges: GatewayGauges) -> None:
        for telemetry in self.telemetries:
            telemetry.watch(gauges)

    def run_ended(self, status: str) -> None:
        for telemetry in self.telemetries:
            telemetry.run_ended(status)

    def delivery_attempted(self, outcome: str) -> None:
        for telemetry in self.telemetries:
            telemetry.delivery_attempted(outcome)

    def appended(self, seconds: float, events: int) -> None:
        for telemetry in self.telemetries:
            telemetry.appended(seconds, events)

    def conflict_retried(self) -> None:
        for telemetry in self.telemetries:
            telemetry.conflict_retried()

    @contextmanager
    def run_span(self, run: RunSpan) -> Iterator[SpanOutcome]:
        with self._spans(lambda telemetry: telemetry.run_span(run)) as shared:
            yield shared

    @contextmanager
    def tool_span(self, call: ToolSpan) -> Iterator[SpanOutcome]:
        with self._spans(lambda telemetry: telemetry.tool_span(call)) as shared:
            yield shared

    @contextmanager
    def _spans(
        self, span_of: Callable[[Telemetry], AbstractContextManager[SpanOutcome]]
    ) -> Iterator[SpanOutcome]:
        """One span in each telemetry; the caller's outcome is copied to all of them."""
        with ExitStack() as stack:
            outcomes = [stack.enter_context(span_of(t)) for t in self.telemetries]
            shared = SpanOutcome()
            try:
                yield shared
            finally:
                for outcome in outcomes:
                    outcome.status, outcome.error = shared.status, shared.error


def combined(*telemetries: Telemetry | None) -> Telemetry:
    """One telemetry for all those given (None and no-ops left out)."""
    chosen = [t for t in telemetries if t is not None and t is not NO_TELEMETRY]
    if not chosen:
        return NO_TELEMETRY
    return chosen[0] if len(chosen) == 1 else FanOut(chosen)
