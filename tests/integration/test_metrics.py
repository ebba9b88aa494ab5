"""Prometheus metrics on the HTTP gateway's /metrics (issue 16, finding 15; ADR 0019).

A workload moves the metrics as it should: a run holding its lane slot shows as in use,
and the slot is free again at idle; a failed announce shows in the outbox depth and its
attempts; runs, tool calls, HTTP requests and appends are counted. Only an operator token
reads /metrics. docs/operations.md's sample queries name only metrics that exist.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.telemetry.prometheus import METRIC_NAMES, PrometheusTelemetry
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.runtime import ChannelDelivery, Delivery
from sessionwire.testing import ScriptedRuntime, VirtualClock

OPERATOR = "operator-token-for-metrics-0123456789"
MAIN_TOKEN = "main-token-for-metrics-0123456789abcd"
MAIN = "agent:main:main"
SLOTS = 3
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = {
    "rules": [
        {"step": "subagent_task", "reply": "found it", "delaySeconds": 5},
        {"step": "subagent_announce", "reply": "the report"},
    ]
}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class FlakyChannel(ChannelDelivery):
    """Down for its first call."""

    def __init__(self) -> None:
        self.calls = 0

    async def deliver(self, delivery: Delivery) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("channel unreachable")


@pytest.fixture
async def rig(
    store_url: str, clock: VirtualClock
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient, PrometheusTelemetry]]:
    metrics = PrometheusTelemetry()
    gateway = await Gateway.open(
        config=GatewayConfig.load({"agents": {"defaults": {"maxConcurrent": SLOTS}}}),
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        delivery=FlakyChannel(),
        telemetry=metrics,
    )
    tokens = TokenSet.from_data(
        {
            "tokens": [
                {"token": OPERATOR, "role": "operator"},
                {"token": MAIN_TOKEN, "session": MAIN},
            ]
        }
    )
    app = create_app(gateway, tokens, metrics=metrics)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield gateway, http, metrics
    await gateway.close()


async def scrape(http: httpx.AsyncClient) -> Samples:
    answer = await http.get("/metrics", headers={"Authorization": f"Bearer {OPERATOR}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_follow_a_workload(rig: Any, clock: VirtualClock) -> None:
    gateway, http, _ = rig
    idle = await scrape(http)
    assert value(idle, "sessionwire_lane_slots", state="free") == SLOTS
    assert value(idle, "sessionwire_lane_slots", state="in_use") == 0

    await gateway.record_message(MAIN, role="user", content="hi", channel="whatsapp", to="+1555")
    spawned = await http.post(
        "/v1/tools/sessions_spawn",
        json={"task": "research"},
        headers={"Authorization": f"Bearer {OPERATOR}", "X-Sessionwire-Session": MAIN},
    )
    assert spawned.json()["status"] == "accepted"
    await gateway.wait_idle()  # the sub-agent's run waits 5 s on the clock, in its slot

    busy = await scrape(http)
    assert value(busy, "sessionwire_lane_slots", state="in_use") == 1
    assert value(busy, "sessionwire_lane_slots", state="free") == SLOTS - 1
    assert value(busy, "sessionwire_runs_pending", status="running") == 1
    assert value(busy, "sessionwire_tool_calls_total", tool="sessions_spawn", status="accepted")
    assert (
        value(
            busy, "sessionwire_http_requests_total", route="/v1/tools/sessions_spawn", status="200"
        )
        == 1
    )
    assert value(busy, "sessionwire_append_seconds_count") > value(
        idle, "sessionwire_append_seconds_count"
    )

    await clock.advance(5)  # the task ends, its report is announced: the channel is down
    await gateway.wait_idle()
    failed = await scrape(http)
    assert value(failed, "sessionwire_lane_slots", state="in_use") == 0
    assert value(failed, "sessionwire_lane_slots", state="free") == SLOTS
    assert value(failed, "sessionwire_runs_pending", status="running") == 0
    assert value(failed, "sessionwire_runs_ended_total", status="ok") == 2
    assert value(failed, "sessionwire_outbox_pending") == 1
    assert value(failed, "sessionwire_outbox_attempts_total", outcome="failed") == 1

    await clock.advance(10)  # the outbox retries: delivered
    await gateway.wait_idle()
    delivered = await scrape(http)
    assert value(delivered, "sessionwire_outbox_pending") == 0
    assert value(delivered, "sessionwire_outbox_attempts_total", outcome="delivered") == 1


@pytest.mark.parametrize("store_url", ["memory"], indirect=False)
async def test_refusals_are_counted_and_only_an_operator_reads_metrics(rig: Any) -> None:
    _, http, _ = rig
    bad = await http.post(
        "/v1/tools/sessions_list", json={}, headers={"Authorization": "Bearer wrong-guess-123"}
    )
    assert bad.status_code == 401
    await http.get("/no/such/path/" + "x" * 50, headers={"Authorization": f"Bearer {OPERATOR}"})
    as_session = await http.get("/metrics", headers={"Authorization": f"Bearer {MAIN_TOKEN}"})
    assert as_session.status_code == 403
    unauthenticated = await http.get("/metrics")
    assert unauthenticated.status_code == 401
    samples = await scrape(http)
    requests = "sessionwire_http_requests_total"
    assert value(samples, requests, route="/v1/tools/sessions_list", status="401") == 1
    assert value(samples, requests, route="other", status="404") == 1
    assert value(samples, requests, route="/metrics", status="403") == 1
    assert not [key for key in samples if "x" * 50 in str(key)]


@pytest.mark.parametrize("store_url", ["memory"], indirect=False)
async def test_a_retried_conflict_is_counted(rig: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway, http, _ = rig
    await gateway.record_message("main", role="user", content="one")
    save = store_of(gateway).save
    conflicts = iter([True])

    def conflicting_once(*aggregates: Any) -> None:
        if next(conflicts, False):
            raise StoreConflict("another writer moved it on")
        save(*aggregates)

    monkeypatch.setattr(store_of(gateway), "save", conflicting_once)
    await gateway.record_message("main", role="user", content="two")
    assert value(await scrape(http), "sessionwire_conflicts_retried_total") == 1


@pytest.mark.parametrize("store_url", ["memory"], indirect=False)
async def test_the_operations_page_queries_only_metrics_that_exist(rig: Any) -> None:
    _, http, _ = rig
    answer = await http.get("/metrics", headers={"Authorization": f"Bearer {OPERATOR}"})
    families = list(text_string_to_metric_families(answer.text))
    exposed = {f.name + ("_total" if f.type == "counter" else "") for f in families}
    assert exposed == set(METRIC_NAMES)
    page = (ROOT / "docs" / "operations.md").read_text()
    queries = "\n".join(re.findall(r"```promql\n(.*?)```", page, flags=re.DOTALL))
    named = set(re.findall(r"\bsessionwire_[a-z_]+", queries))
    assert named, "docs/operations.md has sample PromQL queries"
    unknown = {name for name in named if re.sub(r"_(bucket|count|sum)$", "", name) not in exposed}
    assert not unknown, f"queries name metrics that do not exist: {sorted(unknown)}"
    # Every metric is on the page.
    assert not [name for name in METRIC_NAMES if name not in page]
