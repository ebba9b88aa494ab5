"""A CLI that starts fast (issue 11): commands load only what they need.

The behaviour checked here is which modules a real process imports, not how long it
takes (the figures are in benchmarks/bench_cli_startup.py and docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = {"fastapi", "starlette", "uvicorn", "mcp", "httpx", "psycopg"}

# What `sessions list` needs none of (issue 38 item 7): the schedule aggregate and
# croniter's calendar (a config checks its schedules without them), and the other read
# tools' handlers (the history's fork reads, the audit state under them, the search).
NOT_FOR_A_LISTING = {
    "croniter",
    "dateutil",
    "sessionwire.domain.schedule",
    "sessionwire.application.forks",
    "sessionwire.application.audit.state",
    "sessionwire.application.tools.sessions_history",
    "sessionwire.application.tools.sessions_search",
}

# Runs the CLI's entry point in a fresh interpreter, then writes the modules it imported
# to the file named by the first argument.
PROBE = """
import json, sys
out, args = sys.argv[1], sys.argv[2:]
code = 0
if args != ["--import-only"]:
    from sessionwire.adapters.cli.main import main
    code = main(args)
else:
    import sessionwire
with open(out, "w") as file:
    json.dump({"code": code, "modules": sorted(sys.modules)}, file)
"""


def loaded(tmp_path: Path, *args: str) -> set[str]:
    """The top-level packages a process running the CLI with ``args`` imported."""
    return {module.split(".")[0] for module in modules_loaded(tmp_path, *args)}


def modules_loaded(tmp_path: Path, *args: str) -> set[str]:
    """Every module a process running the CLI with ``args`` imported."""
    out = tmp_path / "modules.json"
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SESSIONWIRE_STORE": f"sqlite:///{tmp_path}/default.db"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["code"] == 0, result.stderr
    return set(report["modules"])


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/small.db"
    from sessionwire.adapters.cli.main import main

    assert main(["--store", url, "record", "main", "hello"]) == 0
    return url


def test_importing_the_package_loads_no_server_client_or_driver(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--import-only")
    assert modules & HEAVY == set()
    assert "pydantic" not in modules  # the public names load on first use


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["sessions", "--help"],
        ["STORE", "sessions", "list"],
        ["STORE", "sessions", "history", "main"],
        ["STORE", "record", "main", "again"],
        ["STORE", "agents", "list"],
    ],
    ids=" ".join,
)
def test_light_commands_load_no_server_client_or_driver(
    tmp_path: Path, store: str, args: list[str]
) -> None:
    argv = [part for arg in args for part in (["--store", store] if arg == "STORE" else [arg])]
    assert loaded(tmp_path, *argv) & HEAVY == set()


def test_a_listing_loads_no_schedule_calendar_or_other_read_tool(
    tmp_path: Path, store: str
) -> None:
    modules = modules_loaded(tmp_path, "--store", store, "sessions", "list")
    assert modules & NOT_FOR_A_LISTING == set()
    # Still the same path as before: the listing's own handler and the config are there.
    assert {
        "sessionwire.application.tools.sessions_list",
        "sessionwire.application.config.gateway_config",
    } <= modules


def test_a_config_with_a_cron_schedule_still_checks_it(tmp_path: Path, store: str) -> None:
    # The calendar loads when a config has a schedule to check, and refuses a bad one.
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "schedules": [
                    {"id": "nightly", "sessionKey": "main", "message": "go", "cron": "0 0 31 2 *"}
                ]
            }
        )
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionwire.adapters.cli.main",
            "--store",
            store,
            "--config",
            str(config),
            "sessions",
            "list",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "0 0 31 2 *" in result.stderr


def test_help_loads_no_domain(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--help")
    assert {"pydantic", "eventsourcing"} & modules == set()


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    # The check above can fail: a command that needs the web server does load it.
    assert {"fastapi", "uvicorn"} <= loaded(tmp_path, "serve", "--help")
