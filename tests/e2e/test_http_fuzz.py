"""Schemathesis fuzzes the live HTTP gateway from its own OpenAPI document.

Every operation gets valid and invalid requests; no answer may be a 5xx, and every
answer must match the document (status codes, content type, body schema). The tool
routes hand any well-formed JSON to the tool, which answers with an error *result*
(200), so for them schema-invalid bodies are not expected to get a 4xx.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from live_http import LiveServer, scripted_server
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection

EXAMPLES_PER_OPERATION = 60


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/sessions.db") as live:
        yield live


# A schema-valid body may still name no session or a bad key: 400 and 404 are answers;
# a well-formed X-Sessionwire-Run token of no run in flight is refused with 403.
CONFIG = schemathesis.Config.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404"]}
        }
    }
)


# GET /v1/events is an endless Server-Sent Events stream: schemathesis reads a response
# to its end, so every call would hang. The route has its own tests, through a real
# server (tests/e2e/test_http_events.py), bad input included.
ENDLESS = {"GET /v1/events"}


def operations(server: LiveServer) -> list[Any]:
    document = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=CONFIG)
    found = [result.ok() for result in document.get_all_operations()]
    return [operation for operation in found if operation.label not in ENDLESS]


def fuzz(operation: Any, mode: GenerationMode, headers: dict[str, str]) -> None:
    excluded = [negative_data_rejection] if operation.path.startswith("/v1/tools/") else []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def exchange(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=headers, excluded_checks=excluded, timeout=60)

    exchange()


# One test per generation mode, looping over the operations: schemathesis' own pytest
# plugin does not run under pytest 9 yet.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_operation_fails_or_leaves_its_document(
    fuzzed_server: LiveServer, mode: GenerationMode
) -> None:
    headers = {"Authorization": f"Bearer {fuzzed_server.token}"}
    tested = []
    for operation in operations(fuzzed_server):
        try:
            fuzz(operation, mode, headers)
        except Unsatisfiable:
            # GET /healthz and friends take nothing, so there is nothing to get wrong.
            assert mode is GenerationMode.NEGATIVE, operation.label
            continue
        tested.append(operation.label)
    assert "POST /v1/tools/sessions_send" in tested
    assert "POST /v1/methods/agent.wait" in tested
