"""``sessionwire schedules add|list|remove``: schedules (decision 36, docs/schedules.md).

Adding and removing record the change in the store; the gateways serving it fire the
schedule (on PostgreSQL a serving gateway finds a schedule added here within half a
minute; an SQLite file has one writer, so while a gateway serves it a change from here
is refused, naming that gateway). Listing only reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
from rich.console import RenderableType
from rich.table import Table
from sessionwire.adapters.cli.context import CliOptions, accept_global_options, console, fail
from sessionwire.adapters.cli.lazy_group import LazyGroup

if TYPE_CHECKING:
    from sessionwire.application.gateway import GatewayService

pass_options = click.make_pass_decorator(CliOptions)


def _time(value: str | None) -> str:
    return "-" if not value else value.replace("T", " ").rstrip("Z")[:19]


def schedules_table(schedules: list[dict[str, Any]]) -> RenderableType:
    table = Table(title=f"{len(schedules)} schedule(s)", title_justify="left")
    table.add_column("ID", overflow="fold")
    table.add_column("WHEN")
    table.add_column("SESSION", overflow="fold")
    table.add_column("NEXT DUE (UTC)")
    table.add_column("FIRED", justify="right")
    table.add_column("LATE", justify="right")
    table.add_column("REFUSED", justify="right")
    for schedule in schedules:
        when = (
            f"{schedule['cron']} ({schedule['tz']})"
            if schedule["cron"]
            else f"every {schedule['everySeconds']}s"
        )
        table.add_row(
            schedule["id"],
            when,
            schedule["sessionKey"],
            _time(schedule["nextDueAt"]),
            str(schedule["fired"]),
            str(schedule["late"]),
            str(schedule["refused"]),
        )
    return table


def _echo(options: CliOptions, result: Any, render: Any) -> None:
    if options.as_json:
        import json

        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        console().print(render(result))


# The global options (--json, --store, ...) are accepted after a subcommand's name too.
@click.group("schedules", cls=LazyGroup, prepare=accept_global_options)
def schedules_group() -> None:
    """Add, list and remove schedules: a message sent into a session at each due time."""


@schedules_group.command("add")
@click.argument("schedule_id")
@click.argument("message")
@click.option("--cron", help='a five-field cron expression, e.g. "0 9 * * 1-5"')
@click.option("--every", "every_seconds", type=float, help="every N seconds from now")
@click.option("--session", "session_key", help="send into this session (default cron:ID)")
@click.option("--tz", default="UTC", show_default=True, help="the cron expression's time zone")
@pass_options
def schedules_add(
    options: CliOptions,
    schedule_id: str,
    message: str,
    cron: str | None,
    every_seconds: float | None,
    session_key: str | None,
    tz: str,
) -> int:
    """Define schedule SCHEDULE_ID sending MESSAGE (give --cron or --every).

    Adding an id again replaces its definition; the same definition again changes
    nothing. A bad cron expression, interval or time zone is refused with the reason."""
    from sessionwire.application.ports.store import StoreInUse
    from sessionwire.domain.schedule import InvalidSchedule

    async def work(gateway: GatewayService) -> int:
        try:
            defined = await gateway.schedule(
                schedule_id,
                message=message,
                cron=cron,
                every_seconds=every_seconds,
                session_key=session_key,
                tz=tz,
            )
        except InvalidSchedule as refused:
            fail(str(refused))
        except StoreInUse as refused:
            fail(f"{refused} (add the schedule to that gateway's config instead)")
        _echo(options, defined, lambda found: schedules_table([found]))
        return 0

    return options.run(work)


@schedules_group.command("list")
@pass_options
def schedules_list(options: CliOptions) -> int:
    """The active schedules, oldest first, with each one's next due time."""

    async def work(gateway: GatewayService) -> int:
        _echo(options, await gateway.list_schedules(), schedules_table)
        return 0

    return options.run(work, existing=True)


@schedules_group.command("remove")
@click.argument("schedule_id")
@pass_options
def schedules_remove(options: CliOptions, schedule_id: str) -> int:
    """Remove schedule SCHEDULE_ID: it fires no more."""
    from sessionwire.application.ports.store import StoreInUse

    async def work(gateway: GatewayService) -> int:
        try:
            removed = await gateway.unschedule(schedule_id)
        except StoreInUse as refused:
            fail(f"{refused} (remove the schedule through that gateway's config instead)")
        if removed is None:
            fail(f"no active schedule {schedule_id!r}")
        if options.as_json:
            _echo(options, removed, None)
        else:
            console().print(f"removed schedule {schedule_id}")
        return 0

    return options.run(work)
