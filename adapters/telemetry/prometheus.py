"""Prometheus metrics for ``serve``'s ``/metrics`` (ADR 0019; docs/operations.md).

Each ``PrometheusTelemetry`` has its own registry (several gateways in one process, as in
tests, never collide). Counters and the append histogram move as things happen; lane
slots, pending runs and the outbox depth are read from the gateway when scraped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sessionwire.application.ports.telemetry import (
    GatewayGauges,
    RunSpan,
    SpanOutcome,
    Telemetry,
    ToolSpan,
)
from sessionwire.application.tools.registry import REGISTRY

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Appends take a fraction of a millisecond on memory, milliseconds on a database.
APPEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

METRIC_NAMES = (
    "sessionwire_runs_ended_total",
    "sessionwire_runs_pending",
    "sessionwire_lane_slots",
    "sessionwire_outbox_pending",
    "sessionwire_outbox_attempts_total",
    "sessionwire_append_seconds",
    "sessionwire_conflicts_retried_total",
    "sessionwire_tool_calls_total",
    "sessionwire_http_requests_total",
)
"""Every metric family (docs/operations.md names them; a test checks the list)."""

# No `_created` series beside each counter: a start time per series that no dashboard
# here needs, doubling what a scrape carries (prometheus_client's switch is process-wide).
disable_created_metrics()  # type: ignore[no-untyped-call]


class GatewayReadings(Collector):
    """Lane slots, pending runs and the outbox depth, read when scraped."""

    def __init__(self) -> None:
        self.gauges: GatewayGauges | None = None

    def collect(self) -> Iterable[Metric]:
        gauges = self.gauges
        if gauges is None:
            return
        slots = GaugeMetricFamily(
            "sessionwire_lane_slots",
            "Lane slots (agents.defaults.maxConcurrent) by state: in_use or free",
            labels=["state"],
        )
        free = gauges.free_slots()
        slots.add_metric(["free"], free)
        slots.add_metric(["in_use"], gauges.slots - free)
        yield slots
        pending = GaugeMetricFamily(
            "sessionwire_runs_pending", "Runs not ended, by status", labels=["status"]
        )
        for status, count in sorted(gauges.pending_runs().items()):
            pending.add_metric([status], count)
        yield pending
        yield GaugeMetricFamily(
            "sessionwire_outbox_pending",
            "Outbox deliveries waiting for a retry",
            value=gauges.outbox_depth(),
        )


class PrometheusTelemetry(Telemetry):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.readings = GatewayReadings()
        self.registry.register(self.readings)
        self.runs_ended = Counter(
            "sessionwire_runs_ended",
            "Runs ended, by status (ok, error, timeout)",
            ["status"],
            registry=self.registry,
        )
        self.outbox_attempts = Counter(
            "sessionwire_outbox_attempts",
            "Outbox delivery attempts, by outcome (delivered, failed, abandoned)",
            ["outcome"],
            registry=self.registry,
        )
        self.append_seconds = Histogram(
            "sessionwire_append_seconds",
            "Time to append one transaction of events (with its read-model rows)",
            buckets=APPEND_BUCKETS,
            registry=self.registry,
        )
        self.conflicts = Counter(
            "sessionwire_conflicts_retried",
            "Saves that met another writer's change and were retried on fresh state",
            registry=self.registry,
        )
        self.tool_calls = Counter(
            "sessionwire_tool_calls",
            "Tool calls, by tool and status (ok, accepted, error, forbidden, timeout, …)",
            ["tool", "status"],
            registry=self.registry,
        )
        self.http_requests = Counter(
            "sessionwire_http_requests",
            "HTTP requests, by route and status code",
            ["route", "status"],
            registry=self.registry,
        )

    def watch(self, gauges: GatewayGauges) -> None:
        self.readings.gauges = gauges

    def run_ended(self, status: str) -> None:
        self.runs_ended.labels(status).inc()

    def delivery_attempted(self, outcome: str) -> None:
        self.outbox_attempts.labels(outcome).inc()

    def appended(self, seconds: float, events: int) -> None:
        self.append_seconds.observe(seconds)

    def conflict_retried(self) -> None:
        self.conflicts.inc()

    @contextmanager
    def run_span(self, run: RunSpan) -> Iterator[SpanOutcome]:
        yield SpanOutcome()  # runs are counted by run_ended

    @contextmanager
    def tool_span(self, call: ToolSpan) -> Iterator[SpanOutcome]:
        outcome = SpanOutcome()
        try:
            yield outcome
        finally:
            # Only known tools name a series: a client's made-up names would grow it forever.
            known = call.tool if call.tool in REGISTRY else "other"
            self.tool_calls.labels(known, outcome.status or "error").inc()

    def http_request(self, route: str, status: int) -> None:
        self.http_requests.labels(route, str(status)).inc()

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
