"""``sessionwire import openclaw DIR``: bring OpenClaw's recorded sessions into the store,
so their histories can be listed, read and audited.

Malformed stores, entries and transcript lines are reported with file and line and
skipped; paths leading out of the directory are reported and not followed. Sessions
already in the store are skipped too, so importing again is safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from sessionwire.adapters.cli.audit_integrity import progress_bar
from sessionwire.adapters.cli.audit_replay import store_alone
from sessionwire.adapters.cli.context import CliOptions, collector_paused, fail
from sessionwire.adapters.importers.history_import import import_sessions
from sessionwire.adapters.importers.openclaw import AGENT_DATABASE, STORE_FILE, read_state_dir
from sessionwire.application.ports.clock_and_ids import RandomIds

pass_options = click.make_pass_decorator(CliOptions)


@click.group("import")
def import_group() -> None:
    """Import sessions recorded by another gateway."""


@import_group.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")
@pass_options
def openclaw(options: CliOptions, directory: Path, as_json: bool) -> int:
    """Import an OpenClaw state DIRECTORY: sessions.json stores with their <sessionId>.jsonl
    transcripts, and newer releases' agents/<id>/agent/openclaw-agent.sqlite databases.

    Nothing outside DIRECTORY is read; every bad line is reported with file and line."""
    options.as_json = options.as_json or as_json
    with collector_paused():
        return _import_openclaw(options, directory)


def _import_openclaw(options: CliOptions, directory: Path) -> int:
    if not directory.is_dir():
        fail(f"{directory} is not a directory")
    with progress_bar(options, None, "reading") as reached:
        read = 0

        def lines_read(count: int) -> None:
            nonlocal read
            read += count
            reached(read)

        sessions, problems = read_state_dir(directory, progress=lines_read)
    if not sessions and not problems:
        fail(f"no {STORE_FILE} found under {directory} (nor any {AGENT_DATABASE})")
    total = sum(len(session.messages) for session in sessions)
    with (
        store_alone(options, existing=False) as (store, config),
        progress_bar(options, total, "importing") as progress,
    ):
        report = import_sessions(
            store,
            config.key_rules,
            RandomIds(),
            sessions,
            source="openclaw",
            problems=problems,
            progress=progress,
        )
    return options.show(report.model_dump(mode="json"), import_view)


def import_view(result: dict[str, Any]) -> RenderableType:
    lines: list[RenderableType] = [
        Text(
            f"imported {len(result['imported'])} session(s) with {result['messages']} "
            f"message(s); {len(result['skipped'])} already in the store",
            style="bold",
        )
    ]
    for key in result["imported"]:
        lines.append(Text(f"  + {key}"))
    for key in result["skipped"]:
        lines.append(Text(f"  = {key} (already imported)", style="dim"))
    if result["problems"]:
        table = Table(title=f"{len(result['problems'])} problem(s), skipped", title_justify="left")
        # A file name folded over lines, never cut: its uuid is what finds the file.
        table.add_column("FILE", overflow="fold")
        table.add_column("LINE", justify="right", no_wrap=True)
        table.add_column("REASON")
        for problem in result["problems"]:
            line = str(problem["line"]) if problem["line"] else "-"
            table.add_row(Text(problem["file"]), line, Text(problem["reason"]))
        lines.append(table)
    return Group(*lines)
