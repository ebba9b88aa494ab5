"""The sessionwire command line: record messages, list sessions, read histories.

The store defaults to an SQLite file in the user's data directory; --store or the
SESSIONWIRE_STORE environment variable picks another ('memory', 'sqlite:///…',
'postgresql://…'). Exit codes: 0 done, 1 refused or bad input, 2 bad usage, store or
config.
"""

# Each command group lives in a module of its own and is registered with the root group
# by name, imported only when it runs (lazy_group.py): the servers' and the demo's imports
# never slow down a listing or a history.

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
from sessionwire.adapters.cli.context import (
    CONFIG_HELP,
    CREATE_HELP,
    EXIT_REFUSED,
    EXIT_USAGE,
    JSON_HELP,
    STORE_HELP,
    VERBOSE_HELP,
    CliOptions,
    CommandFailed,
    accept_global_options,
    configure_logging,
    default_store,
    fail,
    present,
)
from sessionwire.adapters.cli.lazy_group import LazyCommand, LazyGroup, PipeClosed
from sessionwire.adapters.cli.terminal_views import (
    agents_view,
    fork_view,
    history_view,
    recorded_view,
    sessions_table,
)

if TYPE_CHECKING:
    from sessionwire.application.gateway import GatewayService
    from sessionwire.application.read_tools import ReadTools

__all__ = ["cli", "default_store", "entry_point", "main"]

pass_options = click.make_pass_decorator(CliOptions)
requester_option = click.option(
    "--as", "requester", default="main", show_default=True, help="the requester session key"
)


CLI = "sessionwire.adapters.cli"
COMMANDS = {
    "audit": LazyCommand(
        f"{CLI}.audit:audit", "Replay, export and verify what the store recorded."
    ),
    "config": LazyCommand(
        f"{CLI}.config:config_group", "Check an OpenClaw-shaped JSON5 config file."
    ),
    "console": LazyCommand(
        f"{CLI}.console_command:console_command",
        "Serve the read-only web console alone, on loopback (operator token required).",
    ),
    "demo": LazyCommand(
        f"{CLI}.demo.command:demo",
        "Play a scripted team of agents on the store and show each event as it is recorded.",
    ),
    "events": LazyCommand(
        f"{CLI}.events_command:events",
        "The recorded events after a position; --follow shows each new one as it comes.",
    ),
    "import": LazyCommand(
        f"{CLI}.imports:import_group", "Import sessions recorded by another gateway."
    ),
    "mcp": LazyCommand(
        f"{CLI}.mcp:mcp_command",
        "Serve the session tools (sessions_*, agents_list, subagents, session_status) "
        "over MCP, every call made by the session --session.",
    ),
    "policy": LazyCommand(
        f"{CLI}.policy:policy_group",
        "Check what a config change would do before making it.",
    ),
    "runs": LazyCommand(f"{CLI}.runs:runs_group", "List, show, cancel and answer agent runs."),
    "schedules": LazyCommand(
        f"{CLI}.schedules:schedules_group",
        "Add, list and remove schedules: a message sent into a session at each due time.",
    ),
    "serve": LazyCommand(
        f"{CLI}.serve:serve",
        "Serve the session tools and gateway methods over HTTP (bearer token required).",
    ),
    "simulate": LazyCommand(
        f"{CLI}.simulate:simulate",
        "Play seeded random workloads and check the gateway's invariants.",
    ),
}
SESSION_COMMANDS = {
    "send": LazyCommand(
        f"{CLI}.session_tools:send",
        "Send MESSAGE into SESSION (sessions_send) and run the agent-to-agent exchange.",
    ),
    "spawn": LazyCommand(
        f"{CLI}.session_tools:spawn",
        "Spawn a sub-agent for TASK (sessions_spawn); it reports back when its run ends.",
    ),
}


def show_version(context: click.Context, _: click.Parameter, value: bool) -> None:
    if not value or context.resilient_parsing:
        return
    import sessionwire

    click.echo(f"sessionwire {sessionwire.__version__}")
    context.exit()


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    # The global options are accepted after a subcommand's name too (context.py).
    prepare=accept_global_options,
    help=__doc__,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--store", default=None, help=STORE_HELP)
@click.option("--config", "config_path", default=None, help=CONFIG_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
@click.option("--create", is_flag=True, help=CREATE_HELP)
@click.option(
    "--version",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=show_version,
    help="print the version and exit",
)
@click.pass_context
def cli(
    context: click.Context,
    store: str | None,
    config_path: str | None,
    as_json: bool,
    verbose: bool,
    create: bool,
) -> None:
    configure_logging(verbose)
    context.obj = CliOptions(
        store=store or default_store(),
        config_path=config_path,
        as_json=as_json,
        verbose=verbose,
        create=create,
        store_given=store is not None,
    )


@cli.command()
@click.argument("session")
@click.argument("message")
@click.option(
    "--role",
    default="user",
    show_default=True,
    type=click.Choice(["user", "assistant", "toolResult"]),
    help="who wrote the message",
)
@click.option("--channel", help="the channel it came in on (whatsapp, discord, webchat, …)")
@click.option(
    "--chat-type",
    type=click.Choice(["direct", "dm", "group", "channel"]),
    help="the kind of chat the session is",
)
@click.option("--display-name", help="the session's name for people (e.g. #dev)")
@click.option("--to", help="where replies go on the channel (e.g. user:kim, channel:ops)")
@click.option("--label", help="a label to find the session by")
@click.option("--owner", is_flag=True, help="the sender is the session's owner")
@pass_options
def record(options: CliOptions, /, session: str, message: str, owner: bool, **route: Any) -> int:
    """Record one message into SESSION (a key such as main or discord:group:dev)."""

    async def work(gateway: GatewayService) -> int:
        recorded = await gateway.record_message(
            session, content=message, sender_is_owner=owner, **route
        )
        return options.show(recorded, recorded_view)

    return options.run(work)


@cli.group(cls=LazyGroup, lazy=SESSION_COMMANDS, prepare=accept_global_options)
def sessions() -> None:
    """List sessions or read one's history."""


@sessions.command("list")
@requester_option
@click.option("--limit", type=int, help="at most this many sessions (tool default 50, max 200)")
@click.option(
    "--kinds",
    multiple=True,
    # The tool's session kinds (domain.keys.SESSION_KINDS; a test keeps them equal),
    # written out so that --help does not import the domain.
    type=click.Choice(["main", "group", "cron", "hook", "node", "other"]),
    help="only sessions of this kind (repeat for several)",
)
@click.option("--active-minutes", type=int, help="only sessions active in the last N minutes")
@click.option("--message-limit", type=int, help="include each session's last N messages (max 20)")
@click.option("--label", help="only sessions with exactly this label")
@click.option("--agent-id", help="only sessions of this agent")
@click.option("--search", help="only sessions whose key, sessionId, label or name contains TEXT")
@click.option("--archived", is_flag=True, help="list archived sessions instead of active ones")
@pass_options
def sessions_list(
    options: CliOptions,
    requester: str,
    limit: int | None,
    kinds: tuple[str, ...],
    active_minutes: int | None,
    message_limit: int | None,
    label: str | None,
    agent_id: str | None,
    search: str | None,
    archived: bool,
) -> int:
    """Sessions the requester may see, newest first."""
    params = present(
        limit=limit,
        kinds=list(kinds),
        activeMinutes=active_minutes,
        messageLimit=message_limit,
        label=label,
        agentId=agent_id,
        search=search,
        archived=archived or None,
    )

    async def work(tools: ReadTools) -> int:
        result = await tools.call_tool(requester, "sessions_list", params)
        return options.show(result, sessions_table)

    return options.read(work)


@sessions.command("history")
@click.argument("session")
@requester_option
@click.option("--limit", type=int, help="the last N messages (tool default 200, max 1000)")
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    help="page back: skip the newest N messages (0 = the newest page; see nextOffset)",
)
@click.option("--include-tools", is_flag=True, help="include tool calls and tool results")
@pass_options
def sessions_history(
    options: CliOptions,
    session: str,
    requester: str,
    limit: int | None,
    offset: int | None,
    include_tools: bool,
) -> int:
    """One session's messages (SESSION is a key or a sessionId)."""
    params = present(
        sessionKey=session, limit=limit, offset=offset, includeTools=include_tools or None
    )

    async def work(tools: ReadTools) -> int:
        result = await tools.call_tool(requester, "sessions_history", params)
        return options.show(result, history_view)

    return options.read(work)


@sessions.command("fork")
@click.argument("session")
@click.option(
    "--at", "at_version", type=int, help="fork at this stream version of SESSION (default: now)"
)
@click.option("--new-key", help="the fork's session key (default agent:<id>:fork:<uuid>)")
@click.option(
    "--as",
    "requester",
    default=None,
    help="fork as this session: SESSION must be one it may read; the fork joins its tree",
)
@pass_options
def sessions_fork(
    options: CliOptions,
    session: str,
    at_version: int | None,
    new_key: str | None,
    requester: str | None,
) -> int:
    """A new session whose history is SESSION's up to --at (by reference, docs/fork.md)."""

    async def work(gateway: GatewayService) -> int:
        from sessionwire.application.forks import ForkRefused
        from sessionwire.application.gateway import SessionNotFound

        try:
            forked = await gateway.fork_session(
                session, new_key=new_key, at_version=at_version, requester=requester
            )
        except (SessionNotFound, ForkRefused) as refused:
            fail(str(refused))
        return options.show(forked, fork_view)

    return options.run(work)


@cli.group()
def agents() -> None:
    """Agents a session may spawn into."""


@agents.command("list")
@requester_option
@pass_options
def agents_list(options: CliOptions, requester: str) -> int:
    """The agent ids the requester may pass to sessions_spawn."""

    async def work(tools: ReadTools) -> int:
        return options.show(await tools.call_tool(requester, "agents_list", {}), agents_view)

    return options.read(work)


COMPLETE_VAR = "_SESSIONWIRE_COMPLETE"


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    Load it for this shell with eval "$(sessionwire completion bash)", or save it where
    your shell reads completions (e.g. ~/.local/share/bash-completion/completions/sessionwire).
    """
    from click.shell_completion import get_completion_class

    complete = get_completion_class(shell)
    assert complete is not None  # the Choice above names only supported shells
    click.echo(complete(cli, {}, "sessionwire", COMPLETE_VAR).source())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the console script's entry point)."""
    try:
        args = list(argv) if argv is not None else None
        result = cli.main(
            args=args,
            standalone_mode=False,
            prog_name="sessionwire",
            complete_var=COMPLETE_VAR,
        )
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
    except PipeClosed:
        # ``audit export | head -1``: what was read was what was wanted. Whatever is
        # left in stdout's buffer goes nowhere, so the interpreter's flush at exit does
        # not fail again on the closed pipe.
        _discard_stdout()
        return 0
    except Exception as error:
        # A damaged SQLite file reached outside the commands' own check (CliOptions):
        # still one line. Imported here, as below.
        from sessionwire.adapters.store.damage import WHAT_TO_DO, store_damage

        damage = store_damage(error)
        if damage is not None:
            click.echo(f"sessionwire: the store is damaged ({damage}): {WHAT_TO_DO}", err=True)
            return EXIT_USAGE
        if not isinstance(error, RuntimeError):
            raise
        # A write beside the SQLite file's live writer (``record`` while ``serve`` runs,
        # an import, a checkpoint): its message names the holder and what to do, so one
        # line, not a traceback through click and asyncio. Imported here: the module is
        # the store's port, which a listing never needs.
        from sessionwire.application.ports.store import StoreInUse

        if not isinstance(error, StoreInUse):
            raise
        click.echo(f"sessionwire: {error}", err=True)
        return EXIT_REFUSED
    return result if isinstance(result, int) else 0


# What pydantic reads, at each validator it builds (``pydantic/plugin/_loader.py``, 2.x):
# "__all__", "1" or "true" loads no plugin and scans no installed distribution's entry
# points for one; a list of names skips those; unset or empty, every plugin loads.
PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
NO_PLUGINS = "__all__"


def entry_point() -> None:
    """The console script's entry point (``sessionwire``, and ``python -m
    sessionwire.adapters.cli.main``): ``main`` in a process that is the CLI's own.

    It turns pydantic's plugin discovery off for this process before any model is built
    (``PYDANTIC_DISABLE_PLUGINS``, unless it is set already: a user's value, an empty one
    included, is kept): the scan of every installed distribution's entry points was a
    listing's start-up cost, for plugins the CLI never uses (issue 38 item 7). ``main``
    itself leaves it alone: a host that calls it, or embeds sessionwire, in its own
    process (a test, a platform with a pydantic plugin) keeps its plugins."""
    os.environ.setdefault(PLUGINS_VARIABLE, NO_PLUGINS)
    sys.exit(main())


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout)
        pass


if __name__ == "__main__":
    entry_point()
