"""Schemathesis fuzzes the live HTTP gateway from its own OpenAPI document.

Every operation gets valid and invalid requests; no answer may be a 5xx, and every
answer must match the document (status codes, content type, body schema). The tool
routes hand any well-formed JSON to the tool, which answers with an error *result*
(200), so for them schema-invalid bodies are not expected to get a 4xx.

The suite's run is the same every time (``derandomize``): a failure is a change in the
code, never a roll of the dice. ``SESSIONWIRE_FUZZ=explore`` draws new examples each run
instead (docs/testing.md); a failure found so is kept in tests/fixtures/http_fuzz_corpus.json,
whose cases every run sends first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis.errors import Unsatisfiable
from live_http import LiveServer, scripted_server
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection

FIXED = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
# Exploring: a fresh seed each run (printed on failure; `--hypothesis-seed=N` replays it),
# more examples, and hypothesis' own database (.hypothesis/) to replay what failed.
EXPLORE = settings(FIXED, max_examples=300, derandomize=False, database=settings.default.database)
MODES = {"fixed": FIXED, "explore": EXPLORE}
FUZZ = os.environ.get("SESSIONWIRE_FUZZ", "fixed")
if FUZZ not in MODES:
    raise ValueError(f"SESSIONWIRE_FUZZ={FUZZ!r}: one of {', '.join(MODES)}")
PROFILE = MODES[FUZZ]

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "http_fuzz_corpus.json").read_text()
)
# The seed that found the corpus' first case, when the document said a query parameter
# might be null (issue 24); replayed as it was, on GET /v1/runs in negative mode.
ONCE_FAILING_SEED = 21013536058293015915158971830839704626


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


def kept_cases(operation: Any) -> list[Any]:
    """The corpus' cases for ``operation``, as requests to send whatever hypothesis draws."""
    return [
        operation.Case(
            query=entry.get("query"),
            headers=entry.get("headers"),
            path_parameters=entry.get("path_parameters"),
            **({"body": entry["body"]} if "body" in entry else {}),
        )
        for entry in CORPUS
        if entry["operation"] == operation.label
    ]


def fuzz(
    operation: Any,
    mode: GenerationMode,
    headers: dict[str, str],
    *,
    replay_seed: int | None = None,
) -> None:
    """Fuzz one operation in one mode. Under ``derandomize`` hypothesis seeds from the
    source of ``exchange`` below, the same for every operation: editing it changes the
    examples of all of them; calling fuzz() from anywhere else does not."""
    excluded = [negative_data_rejection] if operation.path.startswith("/v1/tools/") else []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(PROFILE)
    def exchange(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=headers, excluded_checks=excluded, timeout=60)

    for case in kept_cases(operation):
        exchange = example(case=case)(exchange)
    if replay_seed is not None:
        exchange = seed(replay_seed)(exchange)
    exchange()


# The document's operations, in its order, less ENDLESS; a test below keeps this list equal
# to the document. One test item per operation and mode (not one per mode looping over all
# of them) lets xdist spread the fuzz over its workers; each worker starts one server.
OPERATIONS = (
    "GET /healthz",
    "GET /readyz",
    "GET /v1/tools",
    "POST /v1/tools/sessions_list",
    "POST /v1/tools/sessions_history",
    "POST /v1/tools/sessions_search",
    "POST /v1/tools/sessions_send",
    "POST /v1/tools/sessions_spawn",
    "POST /v1/tools/sessions_yield",
    "POST /v1/tools/agents_list",
    "POST /v1/tools/subagents",
    "POST /v1/tools/session_status",
    "POST /v1/tools/run_input",
    "POST /v1/methods/sessions.list",
    "POST /v1/methods/sessions.resolve",
    "POST /v1/methods/sessions.patch",
    "POST /v1/methods/chat.history",
    "POST /v1/methods/agent.wait",
    "GET /v1/runs/{run_id}",
    "GET /v1/runs",
    "POST /v1/runs/{run_id}/cancel",
    "POST /v1/runs/{run_id}/input",
)
# They take nothing, so negative mode has nothing to get wrong (hypothesis: Unsatisfiable).
NOTHING_TO_BREAK = {"GET /healthz", "GET /readyz"}


@pytest.fixture(scope="module")
def fuzzed_operations(fuzzed_server: LiveServer) -> dict[str, Any]:
    return {operation.label: operation for operation in operations(fuzzed_server)}


def test_the_fuzzed_operations_are_the_documents(fuzzed_operations: dict[str, Any]) -> None:
    assert tuple(fuzzed_operations) == OPERATIONS


# Parametrized by hand: schemathesis' own pytest plugin does not run under pytest 9 yet.
@pytest.mark.parametrize("label", OPERATIONS)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_operation_fails_or_leaves_its_document(
    fuzzed_server: LiveServer,
    fuzzed_operations: dict[str, Any],
    mode: GenerationMode,
    label: str,
) -> None:
    headers = {"Authorization": f"Bearer {fuzzed_server.token}"}
    try:
        fuzz(fuzzed_operations[label], mode, headers)
    except Unsatisfiable:
        assert mode is GenerationMode.NEGATIVE, label
        assert label in NOTHING_TO_BREAK, label
        return
    # Any other operation has something to get wrong in both modes.
    assert label not in NOTHING_TO_BREAK or mode is GenerationMode.POSITIVE, label


def test_no_parameter_of_the_document_may_be_null(fuzzed_server: LiveServer) -> None:
    # A query string or header has no null: an optional parameter is one left out. The
    # null branch FastAPI writes let a fuzzer send what the server reads as a valid value.
    document = schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json").raw_schema
    nullable = [
        f"{method.upper()} {path} {parameter['in']} {parameter['name']}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for parameter in operation.get("parameters", [])
        if '"null"' in json.dumps(parameter["schema"])
    ]
    assert nullable == []


def test_the_seed_that_once_failed_passes(fuzzed_server: LiveServer) -> None:
    runs = next(op for op in operations(fuzzed_server) if op.label == "GET /v1/runs")
    assert kept_cases(runs), "the corpus keeps the request that seed sent"
    headers = {"Authorization": f"Bearer {fuzzed_server.token}"}
    fuzz(runs, GenerationMode.NEGATIVE, headers, replay_seed=ONCE_FAILING_SEED)
