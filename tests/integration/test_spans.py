"""OpenTelemetry spans (issue 16, finding 15; ADR 0019), read from the SDK's in-memory
exporter: one span per run and per tool call with the GenAI attributes, every run of a
chain in the one OTel trace derived from our traceId, a tool call made during a run's
turn a child of the run's span. Without telemetry nothing of OpenTelemetry or Prometheus
is imported (a plain gateway; the HTTP server's FastAPI brings the OTel API itself)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.telemetry.otel import OpenTelemetry, otel_trace_id
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import VirtualClock

CONFIG = {"session": {"agentToAgent": {"maxPingPongTurns": 1}}}


class ListingAgent(AgentRuntime):
    """cron:job lists the sessions during its turn; every other turn ends the exchange."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None

    async def run(self, request: RunRequest) -> RunReply:
        assert self.gateway is not None
        if request.step == "primary":
            listed = await self.gateway.call_tool(request.session_key, "sessions_list", {})
            assert "sessions" in listed
            return RunReply(text="done")
        if request.step == "announce":
            return RunReply(text="ANNOUNCE_SKIP")
        return RunReply(text="REPLY_SKIP")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    yield memory
    memory.clear()


async def test_runs_and_tool_calls_are_spans_of_one_trace(
    store_url: str, clock: VirtualClock, exporter: InMemorySpanExporter
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = ListingAgent()
    gateway = await Gateway.open(
        config=GatewayConfig.load(CONFIG),
        store=store_url,
        clock=clock,
        runtime=agent,
        telemetry=OpenTelemetry(provider),
    )
    agent.gateway = gateway
    try:
        await gateway.record_message("main", role="user", content="hi")
        await gateway.record_message("cron:job", role="user", content="hi")
        sent = await gateway.call_tool(
            "main", "sessions_send", {"sessionKey": "cron:job", "message": "status?"}
        )
        assert sent["status"] == "ok", sent
        await gateway.wait_idle()
    finally:
        await gateway.close()

    spans: list[ReadableSpan] = list(exporter.get_finished_spans())
    runs = [
        s for s in spans if s.attributes and s.attributes["gen_ai.operation.name"] == "invoke_agent"
    ]
    tools = [
        s for s in spans if s.attributes and s.attributes["gen_ai.operation.name"] == "execute_tool"
    ]
    steps = sorted(str(s.attributes["sessionwire.run.step"]) for s in runs if s.attributes)
    assert steps == ["announce", "primary", "reply_back"]

    (trace_id,) = {s.attributes["sessionwire.trace_id"] for s in runs if s.attributes}
    assert isinstance(trace_id, str)
    assert {s.context.trace_id for s in runs if s.context} == {otel_trace_id(trace_id)}
    primary = next(
        s for s in runs if s.attributes and s.attributes["sessionwire.run.step"] == "primary"
    )
    assert primary.name == "invoke_agent main"
    assert primary.attributes is not None
    assert primary.attributes["gen_ai.agent.id"] == "main"
    assert primary.attributes["gen_ai.conversation.id"] == "agent:main:cron:job"
    assert primary.attributes["sessionwire.run.status"] == "ok"
    assert primary.status.status_code is not StatusCode.ERROR

    (inner,) = [s for s in tools if s.name == "execute_tool sessions_list"]
    assert inner.attributes is not None
    assert primary.context is not None
    assert inner.attributes["gen_ai.tool.name"] == "sessions_list"
    assert inner.attributes["sessionwire.trace_id"] == trace_id
    assert inner.attributes["sessionwire.run_id"] == primary.attributes["sessionwire.run_id"]
    assert inner.parent is not None
    assert inner.parent.span_id == primary.context.span_id
    assert inner.context is not None
    assert inner.context.trace_id == otel_trace_id(trace_id)

    (outer,) = [s for s in tools if s.name == "execute_tool sessions_send"]
    assert outer.attributes is not None
    assert outer.attributes["sessionwire.requester"] == "main"
    assert outer.attributes["sessionwire.tool.status"] == "ok"


async def test_a_failed_run_and_a_refused_call_are_errors(
    clock: VirtualClock, exporter: InMemorySpanExporter
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    class Failing(AgentRuntime):
        async def run(self, request: RunRequest) -> RunReply:
            raise RuntimeError("the model is down")

    gateway = await Gateway.open(
        store="memory", clock=clock, runtime=Failing(), telemetry=OpenTelemetry(provider)
    )
    try:
        await gateway.record_message("main", role="user", content="hi")
        await gateway.record_message("cron:job", role="user", content="hi")
        await gateway.call_tool(
            "main", "sessions_send", {"sessionKey": "cron:job", "message": "x", "timeoutSeconds": 0}
        )
        await gateway.call_tool("main", "sessions_history", {"sessionKey": "nowhere:x"})
        await gateway.wait_idle()
    finally:
        await gateway.close()
    by_name: dict[str, Any] = {s.name: s for s in exporter.get_finished_spans()}
    run = by_name["invoke_agent main"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["error.type"] == "error"
    refused = by_name["execute_tool sessions_history"]
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.attributes["sessionwire.tool.status"] == "error"


def test_without_telemetry_neither_library_is_imported() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from sessionwire import Gateway

        async def main():
            gateway = await Gateway.open(store="memory")
            await gateway.record_message("main", role="user", content="hi")
            await gateway.call_tool("main", "sessions_list", {})
            await gateway.close()

        asyncio.run(main())
        loaded = sorted(
            name for name in sys.modules
            if name.split(".")[0] in ("opentelemetry", "prometheus_client")
        )
        print(loaded)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


def test_serve_otel_without_the_extra_exits_2_saying_what_to_install(tmp_path: Any) -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry.sdk"] = None  # as if sessionwire[otel] were not installed
        from sessionwire.adapters.cli.main import main
        sys.argv = ["sessionwire", "--store", sys.argv[1], "serve", "--otel"]
        raise SystemExit(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, f"sqlite:///{tmp_path}/s.db"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "SESSIONWIRE_TOKEN": "a-token-for-the-otel-test-0123456789"},
    )
    assert result.returncode == 2, result.stderr
    assert "--otel needs the OpenTelemetry SDK and OTLP exporter: pip install" in result.stderr


def test_otlp_spans_name_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    from sessionwire.adapters.telemetry.otel import otlp_telemetry

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    default = otlp_telemetry()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gateway-eu")
    named = otlp_telemetry()
    try:
        assert default.provider.resource.attributes["service.name"] == "sessionwire"  # type: ignore[union-attr]
        assert named.provider.resource.attributes["service.name"] == "gateway-eu"  # type: ignore[union-attr]
    finally:
        default.shutdown()
        named.shutdown()
