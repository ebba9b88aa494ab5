"""``sessionwire demo``: a scripted team of agents plays a scenario on a real store.

Every event the store records is shown as it is recorded; the demo ends with the
sessions_list table, where the store lives and commands to look around in it.

The demo plays in a store of its own, one per scenario (``demo.db`` in the data
directory for the built-in team, ``demo-<name>.db`` for a scenario file), unless
``--store`` names one; ``--fresh`` empties the demo's own store first. The config it
played with is saved beside the store, and the closing commands pass it, so they see
what the demo showed. Time is simulated (a virtual clock), so the hour before a finished
sub-agent is archived passes at once; the clock starts far enough back that no event is
stamped after the real time. Nothing leaves the machine (no network, announces are
recorded rather than posted).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.text import Text
from sessionwire.adapters.cli.context import (
    EXIT_OK,
    EXIT_USAGE,
    CliOptions,
    console,
    data_dir_store,
    fail,
)
from sessionwire.adapters.cli.demo.runner import (
    DemoPlayer,
    DemoReport,
    DemoView,
    StepOutcome,
    describe_step,
    start_after_the_log,
)
from sessionwire.adapters.cli.demo.scenario import Scenario, ScenarioError, Step, load_scenario
from sessionwire.adapters.cli.event_lines import EventLine, call_summary
from sessionwire.adapters.cli.runtime_option import (
    chosen_runtime,
    connect_runtime,
    runtime_option,
)
from sessionwire.adapters.cli.terminal_views import sessions_table
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime
from sessionwire.adapters.testkit.virtual_clock import VirtualClock
from sessionwire.application.gateway import GatewayService

pass_options = click.make_pass_decorator(CliOptions)


class TerminalView(DemoView):
    """Rich lines for people, with a progress bar over the steps while they play."""

    def __init__(self, out: Console, total_steps: int) -> None:
        self.out = out
        self.progress = Progress(
            TextColumn("[bold]playing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            console=out,
            transient=True,
        )
        self.task: TaskID = self.progress.add_task("", total=total_steps)

    def step_started(self, number: int, step: Step, now: datetime) -> None:
        title = Text(f"\n{number}. ", style="bold")
        title.append(step.note or describe_step(step), style="bold")
        title.append(f"   [{describe_step(step)}]", style="dim")
        self.out.print(title)
        self.progress.update(self.task, description=f"simulated {now:%H:%M:%S} UTC")

    def event_recorded(self, line: EventLine) -> None:
        self.out.print(line.as_text(self.out.width))
        self.progress.update(self.task, description=f"simulated {line.time:%H:%M:%S} UTC")

    def step_finished(self, number: int, step: Step, outcome: StepOutcome) -> None:
        if outcome.failure:
            self.out.print(Text(f"  ✗ {outcome.failure}", style="bold red"))
        elif outcome.kind == "call" and outcome.result is not None:
            self.out.print(Text(f"  → {call_summary(outcome.result)}", style="bold"))
        self.progress.advance(self.task)


class JsonView(DemoView):
    """Collects what happened for one JSON document at the end."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []

    def step_started(self, number: int, step: Step, now: datetime) -> None:
        return None

    def event_recorded(self, line: EventLine) -> None:
        self.events.append(line.to_json())

    def step_finished(self, number: int, step: Step, outcome: StepOutcome) -> None:
        self.steps.append(outcome.to_json(number, step))


@click.command()
@click.option(
    "--scenario",
    "scenario_path",
    type=click.Path(dir_okay=False),
    help="a scenario file (YAML or JSON5) to play instead of the built-in team",
)
@click.option(
    "--pace",
    type=click.FloatRange(min=0),
    default=None,
    help="real seconds between steps (default 0.3 on a terminal, 0 otherwise)",
)
@click.option(
    "--fresh", is_flag=True, help="empty the demo's own store (and its config) before playing"
)
# Taken here, hidden, so the global --config (which the demo does not use: its scenario
# holds its config) is not listed in `demo --help`.
@click.option("--config", "config_after", hidden=True)
@runtime_option
@pass_options
def demo(
    options: CliOptions,
    scenario_path: str | None,
    pace: float | None,
    fresh: bool,
    config_after: str | None,
    runtime_file: Path | None,
) -> int:
    """Play a scripted team of agents on the store and show each event as it is recorded.

    The built-in scenario: a user message, a sessions_send with its ping-pong loop and
    announce, a sessions_spawn whose child reports back, and the child archived after a
    simulated hour. Each scenario plays in a store of its own (--fresh empties it first)
    with the config it holds. --runtime FILE answers the runs with other agents than the
    scenario's scripted ones.
    """
    try:
        scenario = load_scenario(scenario_path)
    except ScenarioError as error:
        fail(str(error), EXIT_USAGE)
    if options.config_path or config_after:
        click.echo("note: the demo uses its scenario's config; --config is not used", err=True)
    for key in scenario.config.unknown_keys():
        click.echo(f"note: scenario config key {key} is not one sessionwire uses", err=True)
    own_store = not options.store_given
    if own_store:
        # Its own store per scenario, not the user's, nor another scenario's (whose config
        # beside it the closing commands pass).
        options.store = data_dir_store(demo_store_name(scenario_path, scenario))
        options.create = True
    elif fresh:
        fail("--fresh empties the demo's own store; it never empties a --store", EXIT_USAGE)
    if fresh:
        empty_demo_store(options.store)
    config_file = save_config(options.store, scenario)
    interactive = sys.stdout.isatty() and not options.as_json
    pace_seconds = (0.3 if interactive else 0.0) if pace is None else pace
    now = real_now()
    # Started back by the most the play can take, so it ends before the real time.
    clock = VirtualClock(start=scenario.start or now - timedelta(seconds=scenario.span_seconds))
    runtime = chosen_runtime(runtime_file, scenario.config.http.egress) or ScriptedRuntime(
        scenario.replies
    )

    async def work(gateway: GatewayService) -> int:
        connect_runtime(runtime, gateway)
        await start_after_the_log(gateway, clock)
        if scenario.start is None and clock.now() + timedelta(seconds=scenario.span_seconds) > now:
            # After the store's last event, the play would stamp events after the real
            # time (a demo played on this store less than its span ago).
            again = "demo --fresh starts it again" if own_store else "play it on its own store"
            fail(
                f"the store's events reach {clock.now():%H:%M:%S} UTC: this demo would record "
                f"events after the real time; {again}",
                EXIT_USAGE,
            )
        if options.as_json:
            return await _play_json(gateway, clock, scenario, config_file)
        hints = closing_hints(options.store, config_file, scenario)
        return await _play_terminal(gateway, clock, scenario, pace_seconds, hints)

    return options.run(work, config=scenario.config, runtime=runtime, clock=clock)


def real_now() -> datetime:
    """The real time the play must end before (a test moves it)."""
    return datetime.now(tz=UTC).replace(microsecond=0)


def demo_store_name(scenario_path: str | None, scenario: Scenario) -> str:
    """The demo's own store file: ``demo.db`` for the built-in team, ``demo-<name>.db``
    for a scenario file (its name, made a file name)."""
    if scenario_path is None:
        return "demo.db"
    slug = re.sub(r"[^a-z0-9]+", "-", scenario.name.lower()).strip("-") or "scenario"
    return f"demo-{slug[:60]}.db"


def empty_demo_store(store: str) -> None:
    """Remove the demo's SQLite file, its WAL, lock and saved config (``--fresh``)."""
    from sessionwire.adapters.store.sqlite import sqlite_file

    database = sqlite_file(store)
    for path in (
        database,
        *(database.with_name(database.name + tail) for tail in ("-wal", "-shm", ".writer")),
        database.with_suffix(".config.json"),
    ):
        path.unlink(missing_ok=True)


def save_config(store: str, scenario: Scenario) -> Path | None:
    """Write the scenario's config beside an SQLite store (``<name>.config.json``), so the
    commands the demo suggests can pass it; None for a store that is not a file."""
    from sessionwire.adapters.store.event_store import StoreURLError
    from sessionwire.adapters.store.sqlite import sqlite_file

    if not store.startswith("sqlite:"):
        return None
    try:
        path = sqlite_file(store).with_suffix(".config.json")
        path.parent.mkdir(parents=True, exist_ok=True)
    except (StoreURLError, OSError):
        return None  # opening the store reports it
    config = scenario.config.model_dump(mode="json", by_alias=True, exclude_unset=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


def closing_hints(store: str, config_file: Path | None, scenario: Scenario) -> list[str]:
    """Commands to look around the store the demo used, exactly as they can be run.
    ``./run`` sets SESSIONWIRE_PROG so they read ``./run sessionwire …`` there."""
    if store == "memory":
        return []  # gone when the demo ends
    prog = os.environ.get("SESSIONWIRE_PROG", "sessionwire")
    base = f"{prog} --store {shlex.quote(store)}"
    if config_file is not None:
        base += f" --config {shlex.quote(str(config_file))}"
    as_option = "" if scenario.listAs == "main" else f" --as {shlex.quote(scenario.listAs)}"
    return [
        f"{base} sessions list{as_option}",
        f"{base} sessions history main",
        f"{base} audit verify",
    ]


async def _play_terminal(
    gateway: GatewayService,
    clock: VirtualClock,
    scenario: Scenario,
    pace_seconds: float,
    hints: list[str],
) -> int:
    out = console()
    out.print(Text(f"sessionwire demo: {scenario.name}", style="bold"))
    if scenario.description:
        out.print(Text(" ".join(scenario.description.split()), style="dim"))
    earlier = await gateway.store.read(lambda store: store.log_position())
    if earlier:
        out.print(
            Text(
                f"(the store already holds {earlier} events; this run adds to them)",
                style="dim",
            )
        )
    view = TerminalView(out, len(scenario.steps))
    player = DemoPlayer(gateway, clock, scenario, view, pace_seconds=pace_seconds)
    with view.progress:
        report = await player.play()
    out.print()
    out.print(sessions_table(report.sessions, width=out.width))
    out.print(f"\nstore: {gateway.store.location}")
    if hints:
        out.print("look around (copy a line):")
        # Plain echo, not rich: a command must stay on one line to be copied whole.
        for hint in hints:
            click.echo(f"  {hint}")
    return _exit(report)


async def _play_json(
    gateway: GatewayService, clock: VirtualClock, scenario: Scenario, config_file: Path | None
) -> int:
    view = JsonView()
    report = await DemoPlayer(gateway, clock, scenario, view).play()
    document = {
        "scenario": scenario.name,
        "store": gateway.store.location,
        "config": None if config_file is None else str(config_file),
        "steps": view.steps,
        "events": view.events,
        "sessions": report.sessions,
        "failure": report.failure,
    }
    click.echo(json.dumps(document, indent=2))
    return _exit(report)


def _exit(report: DemoReport) -> int:
    if report.failure:
        fail(report.failure)
    return EXIT_OK
