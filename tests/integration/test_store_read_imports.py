"""A store opened to read sessions imports the session aggregate and nothing of the
others (issue 23 item 4, ADR 0036): the projection, which imports every aggregate, loads
with the first write or replay; and the CLI's reads (``sessions list``, ``sessions
history``, ``agents list``) answer without a gateway, so without the orchestration
drivers either. Checked in a fresh interpreter, by what it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sessionwire.adapters.cli.main import main

# Opens the store at argv[1], lists its sessions (and, with "write", records a message
# first), then prints the sessionwire modules it imported and how many sessions it saw.
PROBE = """
import json, sys
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.ports.session_read_model import SessionQuery
store = EventSourcedStore(sys.argv[1], kind_of=lambda state: "main")
if sys.argv[2:] == ["write"]:
    from datetime import UTC, datetime
    from uuid import uuid4
    from sessionwire.domain.session import Session
    at = datetime.now(UTC)
    store.save(Session.open(key="other", session_id=uuid4(), agent_id="main", at=at))
listed = store.list_sessions(SessionQuery(limit=50))
store.close()
modules = sorted(m for m in sys.modules if m.startswith("sessionwire."))
print(json.dumps({"listed": len(listed), "modules": modules}))
"""

OTHER_AGGREGATES = {
    "sessionwire.domain.exchange",
    "sessionwire.domain.outbox",
    "sessionwire.domain.run",
    "sessionwire.domain.spawn",
    "sessionwire.application.projection",
}


def probe(url: str, *args: str) -> tuple[int, set[str]]:
    """How many sessions the probe listed, and the sessionwire modules it imported."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, url, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    return int(report["listed"]), set(report["modules"])


@pytest.fixture
def url(tmp_path: Path) -> str:
    store = f"sqlite:///{tmp_path}/small.db"
    assert main(["--store", store, "record", "main", "hello"]) == 0
    return store


def test_listing_sessions_imports_no_other_aggregate(url: str) -> None:
    listed, modules = probe(url)
    assert listed == 1
    assert "sessionwire.domain.session" in modules
    assert modules & OTHER_AGGREGATES == set()


def test_the_probe_sees_the_projection_a_write_loads(url: str) -> None:
    # The check above can fail: a save projects, and so loads the projection.
    listed, modules = probe(url, "write")
    assert listed == 2
    assert "sessionwire.application.projection" in modules


# Runs the CLI's entry point with argv[1:] in a fresh interpreter, then prints its exit
# code, the sessionwire modules it imported, whether it built the config's schema and
# the tool result models it defined, and whether it imported the JSON5 parser.
CLI_PROBE = """
import json, sys
from sessionwire.adapters.cli.main import main
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.tools.results import ToolResult
code = main(sys.argv[1:])
modules = sorted(m for m in sys.modules if m.startswith("sessionwire."))
built = GatewayConfig.__pydantic_complete__
results, found = [], [ToolResult]
while found:
    results.append(found.pop())
    found.extend(results[-1].__subclasses__())
print(json.dumps({"code": code, "modules": modules, "config_built": built,
                  "results": sorted(model.__name__ for model in results),
                  "json5": "json5" in sys.modules}))
"""


def cli_report(*args: str) -> dict[str, Any]:
    """What a fresh process that ran ``sessionwire ARGS`` reports (see CLI_PROBE)."""
    result = subprocess.run(
        [sys.executable, "-c", CLI_PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    assert report["code"] == 0, result.stderr
    return report


RESULT_MODELS_READS_LEAVE = {
    "sessionwire.application.tools.run_results",
    "sessionwire.application.tools.read_result_models",
}


def write_path(modules: set[str]) -> set[str]:
    """The aggregates and orchestration modules among ``modules``: a gateway's, not a
    reader's."""
    return {
        m
        for m in modules
        if m in OTHER_AGGREGATES or m.startswith("sessionwire.application.orchestration")
    }


@pytest.mark.parametrize(
    "command",
    [["sessions", "list"], ["sessions", "history", "main"], ["agents", "list"]],
    ids=["sessions list", "sessions history", "agents list"],
)
def test_the_cli_reads_without_the_gateways_drivers_and_aggregates(
    url: str, command: list[str]
) -> None:
    # Without a gateway (ADR 0036): the read tools over the store, no orchestration.
    report = cli_report("--store", url, "--json", *command)
    modules = set(report["modules"])
    assert write_path(modules) == set()
    assert "sessionwire.application.read_tools" in modules
    assert "sessionwire.application.gateway" not in modules
    # Nor the models of the other tools' results, each built at import (issue 23).
    assert modules & RESULT_MODELS_READS_LEAVE == set()
    assert report["results"] == ["AgentsListResult", "ToolError", "ToolResult"]


def test_the_cli_probe_sees_the_drivers_a_write_loads(url: str) -> None:
    # The check above can fail: `record` opens a gateway, which wires every driver.
    report = cli_report("--store", url, "record", "main", "again")
    modules = set(report["modules"])
    assert {"sessionwire.domain.run", "sessionwire.application.orchestration.runs"} <= (
        write_path(modules)
    )
    assert "sessionwire.application.tools.run_results" in modules
    assert "SendResult" in report["results"]


def test_a_listing_without_a_config_file_builds_no_config_schema(url: str) -> None:
    # The defaults need no validation (issue 23): building the config's schema, section
    # by section, cost a listing some 40 M instructions (2.4% of its start-up).
    report = cli_report("--store", url, "sessions", "list")
    assert report["config_built"] is False
    assert report["json5"] is False  # parsed only for a file that is not plain JSON


def test_the_cli_probe_sees_a_config_file_validated(url: str, tmp_path: Path) -> None:
    # The check above can fail: a config file is validated, so the schema is built.
    config = tmp_path / "config.json5"
    config.write_text("{ session: { mainKey: 'main' } }")
    report = cli_report("--store", url, "--config", str(config), "sessions", "list")
    assert report["config_built"] is True
    assert report["json5"] is True
