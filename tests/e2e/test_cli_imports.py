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
from typing import Any

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
    # The session aggregate: a listing reads its rows' columns, never a row whole.
    "sessionwire.domain.session",
    # The audit port's records and the checkpoints' code (no record is read).
    "sessionwire.application.ports.audit_log",
    "sessionwire.domain.checkpoint",
    "sessionwire.domain.merkle",
}

# The parameter models a listing may build: the reading tools' (one module), not those of
# the tools that start or steer runs.
READING_TOOLS_PARAMS = {
    "SessionsListParams",
    "SessionsHistoryParams",
    "SessionsSearchParams",
    "AgentsListParams",
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
params = sys.modules.get("sessionwire.application.tools.params")
built = [model.__name__ for model in params.ToolParams.__subclasses__()] if params else []
with open(out, "w") as file:
    json.dump({"code": code, "modules": sorted(sys.modules), "params": built}, file)
"""

# Runs the installed console script's entry point (as `sessionwire` does) with the
# arguments after the first, and writes, when the process exits, whether pydantic
# scanned the installed distributions for plugins and the variable that says not to.
CONSOLE_PROBE = """
import atexit, json, os, sys
from importlib.metadata import entry_points
out, sys.argv = sys.argv[1], ["sessionwire", *sys.argv[2:]]

def report():
    loader = sys.modules.get("pydantic.plugin._loader")
    with open(out, "w") as file:
        json.dump(
            {
                "scanned": loader is not None and loader._plugins is not None,
                "variable": os.environ.get("PYDANTIC_DISABLE_PLUGINS"),
            },
            file,
        )

atexit.register(report)
entry_points(group="console_scripts")["sessionwire"].load()()
"""


def loaded(tmp_path: Path, *args: str) -> set[str]:
    """The top-level packages a process running the CLI with ``args`` imported."""
    return {module.split(".")[0] for module in modules_loaded(tmp_path, *args)}


def modules_loaded(tmp_path: Path, *args: str) -> set[str]:
    """Every module a process running the CLI with ``args`` imported."""
    return set(probed(tmp_path, *args)["modules"])


def probed(tmp_path: Path, *args: str) -> dict[str, Any]:
    """What a process running the CLI's ``main`` with ``args`` imported (``modules``) and
    which tool parameter models it built (``params``)."""
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
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["code"] == 0, result.stderr
    return report


def console_run(tmp_path: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run the console script's entry point with ``args``: its pydantic plugin state."""
    out = tmp_path / "console.json"
    result = subprocess.run(
        [sys.executable, "-c", CONSOLE_PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        # Not the checkout: its build metadata (``*.egg-info``) would be found first.
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def without_plugin_variable() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}


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


def test_a_listing_builds_only_the_reading_tools_parameters(tmp_path: Path, store: str) -> None:
    # The registry names every tool's parameter model by topic (issue 38 item 7): the
    # send, spawn, yield, sub-agents, status and run-input models are built on use.
    built = set(probed(tmp_path, "--store", store, "sessions", "list")["params"])
    assert "SessionsListParams" in built
    assert built <= READING_TOOLS_PARAMS


def test_the_console_script_looks_for_no_pydantic_plugin(tmp_path: Path, store: str) -> None:
    # PYDANTIC_DISABLE_PLUGINS, set by the CLI's own process: no scan of the installed
    # distributions' entry points at the first validator (issue 38 item 7).
    env = without_plugin_variable()
    report = console_run(tmp_path, env, "--store", store, "sessions", "list")
    assert report == {"scanned": False, "variable": "__all__"}


def test_a_users_plugin_variable_is_kept(tmp_path: Path, store: str) -> None:
    # Empty: every plugin loads, so pydantic looks for them.
    env = {**without_plugin_variable(), "PYDANTIC_DISABLE_PLUGINS": ""}
    report = console_run(tmp_path, env, "--store", store, "sessions", "list")
    assert report == {"scanned": True, "variable": ""}


def test_main_called_by_a_host_leaves_its_plugins_alone(tmp_path: Path, store: str) -> None:
    # ``main`` in someone else's process (a test, an embedding platform): the variable is
    # not set, and pydantic looks for plugins as it would without sessionwire.
    probe = (
        "import json, os, sys\n"
        "from sessionwire.adapters.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "loader = sys.modules.get('pydantic.plugin._loader')\n"
        "print(json.dumps([code, loader is not None and loader._plugins is not None,"
        " os.environ.get('PYDANTIC_DISABLE_PLUGINS')]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, "--store", store, "sessions", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env=without_plugin_variable(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [0, True, None]


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
