"""OpenTelemetry spans (ADR 0019), for ``pip install sessionwire[otel]``.

One span per run (``invoke_agent``) and one per tool call (``execute_tool``), named and
described after the GenAI semantic conventions. A run's span belongs to the OTel trace
derived from our ``traceId`` (the id of the message that started the chain): every run of
a chain, in this process or another, lands in one OTel trace, under a parent that stands
for that message (it is never exported itself). A tool call made during a run's turn is a
child of the run's span.

This module imports OpenTelemetry; nothing imports it unless telemetry is asked for
(``Gateway.open(telemetry=OpenTelemetry())``, ``serve --otel``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from sessionwire.application.ports.telemetry import RunSpan, SpanOutcome, Telemetry, ToolSpan

FAILED = frozenset({"error", "timeout", "forbidden", "cancelled"})


def otel_trace_id(trace_id: str) -> int:
    """The 128-bit OTel trace id of our ``traceId`` (the same everywhere it is derived)."""
    return int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:16], "big") or 1


def _message_span_id(trace_id: str) -> int:
    return int.from_bytes(hashlib.sha256(b"message:" + trace_id.encode()).digest()[:8]) or 1


class OpenTelemetry(Telemetry):
    """Spans through ``tracer_provider`` (the global one when None)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.provider = tracer_provider
        self.tracer = trace.get_tracer("sessionwire", tracer_provider=tracer_provider)

    def shutdown(self) -> None:
        """Export what is left (a provider of our own: ``otlp_telemetry``)."""
        shutdown = getattr(self.provider, "shutdown", None)
        if shutdown is not None:
            shutdown()

    def _parent(self, trace_id: str | None) -> Context | None:
        """The context a span starts in: the current span when it is of the same trace
        (a tool call inside its run), else the stand-in for the chain's first message."""
        if trace_id is None:
            return None
        wanted = otel_trace_id(trace_id)
        if trace.get_current_span().get_span_context().trace_id == wanted:
            return None
        message = SpanContext(
            trace_id=wanted,
            span_id=_message_span_id(trace_id),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        return trace.set_span_in_context(NonRecordingSpan(message))

    @contextmanager
    def run_span(self, run: RunSpan) -> Iterator[SpanOutcome]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": run.agent_id,
            "gen_ai.conversation.id": run.session_key,
            "sessionwire.session_key": run.session_key,
            "sessionwire.run_id": run.run_id,
            "sessionwire.run.step": run.step,
        }
        if run.trace_id is not None:
            attributes["sessionwire.trace_id"] = run.trace_id
        if run.parent_run_id is not None:
            attributes["sessionwire.parent_run_id"] = run.parent_run_id
        with self.tracer.start_as_current_span(
            f"invoke_agent {run.agent_id}",
            context=self._parent(run.trace_id),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        ) as span:
            outcome = SpanOutcome()
            yield outcome
            _finish(span, outcome, "sessionwire.run.status")

    @contextmanager
    def tool_span(self, call: ToolSpan) -> Iterator[SpanOutcome]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "sessionwire.requester": call.requester,
        }
        if call.run_id is not None:
            attributes["sessionwire.run_id"] = call.run_id
        if call.trace_id is not None:
            attributes["sessionwire.trace_id"] = call.trace_id
        with self.tracer.start_as_current_span(
            f"execute_tool {call.tool}",
            context=self._parent(call.trace_id),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        ) as span:
            outcome = SpanOutcome()
            yield outcome
            _finish(span, outcome, "sessionwire.tool.status")


def _finish(span: trace.Span, outcome: SpanOutcome, status_attribute: str) -> None:
    if outcome.status is not None:
        span.set_attribute(status_attribute, outcome.status)
    if outcome.status in FAILED:
        span.set_attribute("error.type", outcome.status or "error")
        span.set_status(Status(StatusCode.ERROR, outcome.error))


def otlp_telemetry() -> OpenTelemetry:
    """Spans exported over OTLP/HTTP, configured by the standard ``OTEL_*`` variables
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, …): what ``serve --otel``
    uses."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = os.environ.get("OTEL_SERVICE_NAME")
    provider = TracerProvider(
        resource=Resource.create({} if named else {"service.name": "sessionwire"})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return OpenTelemetry(provider)
