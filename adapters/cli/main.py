"""The ``sessionwire`` command line: record messages, list sessions, read histories.

The store defaults to an SQLite file in the user's data directory; ``--store`` or the
SESSIONWIRE_STORE environment variable picks another ('memory', 'sqlite:///…',
'postgresql://…'). Exit codes: 0 done, 1 refused or bad input, 2 bad usage, store or
config.
"""

# Each command group lives in a module of its own and is registered with the root group.

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.cli.audit import audit
from sessionwire.adapters.cli.config import config_group
from sessionwire.adapters.cli.context import (
    EXIT_USAGE,
    CliOptions,
    CommandFailed,
    configure_logging,
    default_store,
    present,
)
from sessionwire.adapters.cli.demo.command import demo
from sessionwire.adapters.cli.imports import import_group
from sessionwire.adapters.cli.mcp import mcp_command
from sessionwire.adapters.cli.serve import serve
from sessionwire.adapters.cli.session_tools import send, spawn
from sessionwire.adapters.cli.simulate import simulate
from sessionwire.adapters.cli.terminal_views import (
    agents_view,
    history_view,
    recorded_view,
    sessions_table,
)

__all__ = ["cli", "default_store", "main"]

pass_options = click.make_pass_decorator(CliOptions)
requester_option = click.option(
    "--as", "requester", default="main", show_default=True, help="the requester session key"
)


@click.group(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", default=None, help="store URL (default: an SQLite file in the data dir)")
@click.option("--config", "config_path", default=None, help="OpenClaw-shaped JSON5 config file")
@click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")
@click.option("-v", "--verbose", is_flag=True, help="log what happens")
@click.pass_context
def cli(
    context: click.Context, store: str | None, config_path: str | None, as_json: bool, verbose: bool
) -> None:
    configure_logging(verbose)
    context.obj = CliOptions(
        store=store or default_store(), config_path=config_path, as_json=as_json, verbose=verbose
    )


@cli.command()
@click.argument("session")
@click.argument("message")
@click.option("--role", default="user", type=click.Choice(["user", "assistant", "toolResult"]))
@click.option("--channel")
@click.option("--chat-type", type=click.Choice(["direct", "dm", "group", "channel"]))
@click.option("--display-name")
@click.option("--to")
@click.option("--label")
@click.option("--owner", is_flag=True, help="the sender is the session's owner")
@pass_options
def record(options: CliOptions, /, session: str, message: str, owner: bool, **route: Any) -> int:
    """Record one message into SESSION (a key such as main or discord:group:dev)."""

    async def work(gateway: Gateway) -> int:
        recorded = await gateway.record_message(
            session, content=message, sender_is_owner=owner, **route
        )
        return options.show(recorded, recorded_view)

    return options.run(work)


@cli.group()
def sessions() -> None:
    """List sessions or read one's history."""


@sessions.command("list")
@requester_option
@click.option("--limit", type=float)
@click.option("--kinds", multiple=True, help="main, group, cron, hook, node, other (repeat)")
@click.option("--active-minutes", type=float)
@click.option("--message-limit", type=float)
@pass_options
def sessions_list(
    options: CliOptions,
    requester: str,
    limit: float | None,
    kinds: tuple[str, ...],
    active_minutes: float | None,
    message_limit: float | None,
) -> int:
    """Sessions the requester may see, newest first."""
    params = present(
        limit=limit, kinds=list(kinds), activeMinutes=active_minutes, messageLimit=message_limit
    )

    async def work(gateway: Gateway) -> int:
        result = await gateway.call_tool(requester, "sessions_list", params)
        return options.show(result, sessions_table)

    return options.run(work)


@sessions.command("history")
@click.argument("session")
@requester_option
@click.option("--limit", type=float)
@click.option("--include-tools", is_flag=True)
@pass_options
def sessions_history(
    options: CliOptions, session: str, requester: str, limit: float | None, include_tools: bool
) -> int:
    """One session's messages (SESSION is a key or a sessionId)."""
    params = present(sessionKey=session, limit=limit, includeTools=include_tools or None)

    async def work(gateway: Gateway) -> int:
        result = await gateway.call_tool(requester, "sessions_history", params)
        return options.show(result, history_view)

    return options.run(work)


@cli.group()
def agents() -> None:
    """Agents a session may spawn into."""


@agents.command("list")
@requester_option
@pass_options
def agents_list(options: CliOptions, requester: str) -> int:
    """The agent ids the requester may pass to sessions_spawn."""

    async def work(gateway: Gateway) -> int:
        return options.show(await gateway.call_tool(requester, "agents_list", {}), agents_view)

    return options.run(work)


cli.add_command(audit)
cli.add_command(mcp_command)
cli.add_command(serve)
cli.add_command(demo)
cli.add_command(config_group)
sessions.add_command(send)
sessions.add_command(spawn)
cli.add_command(import_group)
cli.add_command(simulate)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the console script's entry point)."""
    try:
        args = list(argv) if argv is not None else None
        result = cli.main(args=args, standalone_mode=False, prog_name="sessionwire")
    except CommandFailed as error:
        error.show()
        return error.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as error:
        error.show()
        return EXIT_USAGE
    except click.exceptions.Exit as exit_:
        return exit_.exit_code
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
