"""What every ``sessionwire`` command shares: global options, opening the gateway,
printing a result (rich for people, ``--json`` for scripts) and the exit codes.

Commands live in their own modules and reach these through ``click.pass_obj``.
The gateway, the store and the config are imported when a command opens them, not
when the CLI starts: ``sessionwire --help`` never loads the domain.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import structlog
from rich.console import Console, RenderableType
from sessionwire.domain.errors import SessionwireError

if TYPE_CHECKING:
    from sessionwire.adapters.store.event_store import EventSourcedStore
    from sessionwire.application.config.gateway_config import GatewayConfig
    from sessionwire.application.gateway import GatewayService
    from sessionwire.application.read_tools import ReadTools

Render = Callable[[dict[str, Any]], RenderableType]
Opened = TypeVar("Opened")

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def default_store() -> str:
    env = os.environ.get("SESSIONWIRE_STORE")
    if env:
        return env
    return data_dir_store()


def data_dir_store(name: str = "sessions.db") -> str:
    """The store used when none is chosen: an SQLite file in the user's data directory."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'sessionwire' / name}"


LOG_FORMATS = ("console", "json")


# Keys the console renderer writes as text blocks ("\n" + value): any other type there
# made the log handler itself fail (a list under `stack`: TypeError, issue 36).
_TEXT_KEYS = ("stack", "exception")


def renderable(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """A record's text-block keys as text, whatever a caller put there."""
    for key in _TEXT_KEYS:
        value = event.get(key)
        if value is not None and not isinstance(value, str):
            parts = value if isinstance(value, list | tuple) else [value]
            event[key] = "\n".join(map(str, parts))
    return event


def configure_logging(verbose: bool, log_format: str = "console") -> None:
    """The CLI's and servers' logs: the library's ``sessionwire.*`` records (and
    structlog's own) to stderr, never stdout; ``json`` for machines. Tracebacks are plain,
    never with local variables (they may hold a token or a request body)."""
    level = logging.DEBUG if verbose else logging.WARNING
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    shared: list[Any] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        renderable,
    ]
    if log_format == "json":
        shared.append(structlog.processors.format_exc_info)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.ExtraAdder(), *shared],
        )
    )
    # On the root logger, so that uvicorn's and other libraries' records come out the same
    # way; only ours follow --verbose.
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "sessionwire_cli", False)]:
        root.removeHandler(old)
    handler.sessionwire_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("sessionwire").setLevel(level)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.stdlib.LoggerFactory(),
    )


STORE_HELP = "store URL (default: an SQLite file in the data dir)"
CONFIG_HELP = "OpenClaw-shaped JSON5 config file"
JSON_HELP = "print JSON for scripts"
VERBOSE_HELP = "log what happens (to stderr)"
CREATE_HELP = "create the SQLite store's directory if it is missing"


def _override(attribute: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    # Runs while a subcommand's options are parsed, after the root group made CliOptions.
    def callback(context: click.Context, _: click.Parameter, value: Any) -> Any:
        options = context.find_object(CliOptions)
        if options is None or value in (None, False):
            return value
        setattr(options, attribute, value)
        if attribute == "store":
            options.store_given = True
        if attribute == "verbose":
            configure_logging(True)
        return value

    return callback


def subcommand_global_options() -> list[click.Option]:
    """The global options, for a subcommand to accept after its name too (``sessions
    list --json`` as well as ``--json sessions list``); given there, they win."""
    return [
        click.Option(["--store"], help=STORE_HELP, expose_value=False, callback=_override("store")),
        click.Option(
            ["--config", "config_path"],
            help=CONFIG_HELP,
            expose_value=False,
            callback=_override("config_path"),
        ),
        click.Option(
            ["--json", "as_json"],
            is_flag=True,
            help=JSON_HELP,
            expose_value=False,
            callback=_override("as_json"),
        ),
        click.Option(
            ["-v", "--verbose"],
            is_flag=True,
            help=VERBOSE_HELP,
            expose_value=False,
            callback=_override("verbose"),
        ),
        click.Option(
            ["--create"],
            is_flag=True,
            help=CREATE_HELP,
            expose_value=False,
            callback=_override("create"),
        ),
    ]


def accept_global_options(command: click.Command) -> None:
    """Give every command under ``command`` the global options it does not have yet."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            accept_global_options(sub)
        return
    taken = {opt for param in command.params for opt in param.opts}
    for option in subcommand_global_options():
        if not taken & set(option.opts):
            command.params.append(option)


# Piped output keeps long session keys on one line instead of rich's 80 columns. (Not
# COLUMNS: test runners such as pytest-xdist set it for every process they start.)
PIPED_WIDTH = 160


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a command's bulk work (an import).

    An import creates and keeps hundreds of thousands of objects (decoded events,
    messages, rows to write) that every collection would walk again to find next to no
    garbage (reference counting frees what is dropped): a fifth to a third of an
    import's CPU. The command's process is its own, so nothing else waits on it; the
    collector runs again as it did once the work is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPED_WIDTH
    # A terminal's own width, with words wrapped by rich: never cut, never split mid-word.
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


class CommandFailed(SessionwireError, click.ClickException):
    """A refusal or a bad input: printed as ``sessionwire: <reason>`` with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it per class

    def show(self, file: Any = None) -> None:
        click.echo(f"sessionwire: {self.message}", err=True)


def fail(message: str, exit_code: int = EXIT_REFUSED) -> NoReturn:
    raise CommandFailed(message, exit_code)


@dataclass
class CliOptions:
    """The global options, passed to every command as click's ``obj``."""

    store: str
    config_path: str | None
    as_json: bool
    verbose: bool
    # Create a missing SQLite directory: a mistyped --store path is an error otherwise.
    create: bool = False
    # --store was given (before or after the subcommand), not taken from a default.
    store_given: bool = False

    def config(self) -> GatewayConfig:
        from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig

        try:
            return GatewayConfig.load(self.config_path)
        except ConfigError as error:
            fail(str(error), EXIT_USAGE)

    def run(
        self,
        work: Callable[[GatewayService], Awaitable[int]],
        *,
        existing: bool = False,
        **open_kwargs: Any,
    ) -> int:
        """Open the gateway on the chosen store, run ``work`` on it and close it.
        ``existing``: the command only reads, so where there is no store it says so
        (exit 2) and makes none."""
        if existing:
            self._require_store()
        with self.damage_refused():
            return asyncio.run(self._run(work, open_kwargs))

    @contextmanager
    def damage_refused(self) -> Iterator[None]:
        """A damaged SQLite file fails the command in one line (exit 2), never a
        traceback; every other error passes through."""
        try:
            yield
        except Exception as error:
            from sessionwire.adapters.store.damage import damaged_store_text, store_damage

            damage = store_damage(error)
            if damage is None:
                raise
            fail(damaged_store_text(self.store, damage), EXIT_USAGE)

    def _require_store(self) -> None:
        from sessionwire.adapters.store.event_store import NoStore, StoreURLError, backend_for

        try:
            backend = backend_for(self.store)
            if not backend.exists():
                raise NoStore(
                    f"no store at {backend.location} (a command that only reads creates none)"
                )
        except StoreURLError as error:
            fail(self._explain(error), EXIT_USAGE)

    async def _run(self, work: Callable[[GatewayService], Awaitable[int]], kwargs: Any) -> int:
        from sessionwire.adapters.bootstrap import open_gateway_service

        # A command may bring its own config (the demo's scenario holds one).
        config = kwargs.pop("config", None) or self.config()
        self._make_store_directory()
        # Only a command with an agent runtime carries on the store's unfinished work;
        # without one, resuming would fail every pending run for want of an agent.
        kwargs.setdefault("resume", kwargs.get("runtime") is not None)
        # The CLI composes its commands on the service it opens (a transport it serves,
        # `serve` or `mcp`, takes the public Gateway over it; ADR 0043).
        service = await self._opened(
            open_gateway_service(config=config, store=self.store, **kwargs)
        )
        return await self._worked(work(service), service)

    def read(self, work: Callable[[ReadTools], Awaitable[int]]) -> int:
        """Run ``work`` on the read tools over the chosen store, without a gateway: a
        listing or a history loads no orchestration driver or aggregate it does not
        read (ADR 0036), and is answered as the gateway answers it."""
        with self.damage_refused():
            return asyncio.run(self._read(work))

    async def _read(self, work: Callable[[ReadTools], Awaitable[int]]) -> int:
        from sessionwire.adapters.read_composition import open_read_tools

        config = self.config()
        # It only reads: where there is no store it says so and makes none.
        tools = await self._opened(open_read_tools(config, self.store, existing=True))
        return await self._worked(work(tools), tools)

    async def _opened(self, opening: Awaitable[Opened]) -> Opened:
        """What ``opening`` opens; a bad store URL or config, or a store in use, fails
        the command."""
        from sessionwire.adapters.store.event_store import StoreURLError
        from sessionwire.application.config.gateway_config import ConfigError
        from sessionwire.application.ports.store import StoreInUse

        try:
            return await opening
        except (StoreURLError, ConfigError) as error:
            fail(self._explain(error), EXIT_USAGE)
        except StoreInUse as error:
            fail(str(error))

    async def _worked(self, working: Awaitable[int], opened: GatewayService | ReadTools) -> int:
        """The command's exit code; ``opened`` is closed after, whatever happened."""
        try:
            return await working
        except ValueError as error:
            fail(str(error))
        finally:
            await opened.close()

    @contextmanager
    def store_alone(
        self, *, existing: bool = True
    ) -> Iterator[tuple[EventSourcedStore, GatewayConfig]]:
        """The chosen store without a gateway around it: nothing unfinished is resumed,
        no agent is called, nothing is delivered (what auditing and imports need).
        ``existing``: only a store that is there (an audit reads; an import, passing
        False, may be the store's first write)."""
        from sessionwire.adapters.read_composition import open_event_store
        from sessionwire.adapters.store.event_store import StoreURLError

        config = self.config()
        if not existing:
            self._make_store_directory()
        try:
            with self.damage_refused():
                store = open_event_store(self.store, config, existing=existing)
        except StoreURLError as error:
            fail(self._explain(error), EXIT_USAGE)
        try:
            with self.damage_refused():
                yield store, config
        finally:
            store.close()

    def _explain(self, error: Exception) -> str:
        message = str(error)
        if message.startswith("directory ") and message.endswith("does not exist"):
            message += " (check the path, or pass --create to create it)"
        return message

    def _make_store_directory(self) -> None:
        # The data directory's store is made on first use; any other missing directory
        # is more likely a typo than a wish, so it takes --create.
        if self.store.startswith("sqlite:") and (self.create or self.store == data_dir_store()):
            make_parent(self.store)

    def show(self, result: dict[str, Any], render: Render) -> int:
        """Print a tool result; a refused call goes to stderr and exits 1."""
        refused = result.get("status") in {"error", "forbidden"}
        if self.as_json:
            click.echo(json.dumps(result, indent=2))
        elif refused:
            click.echo(f"sessionwire: {result['status']}: {result['error']}", err=True)
        else:
            console().print(render(result))
        return EXIT_REFUSED if refused else EXIT_OK


def make_parent(store: str) -> None:
    from sessionwire.adapters.store.event_store import StoreURLError
    from sessionwire.adapters.store.sqlite import sqlite_file

    try:
        path = sqlite_file(store)
    except StoreURLError:
        return  # opening the store reports it
    # Its own directory is for its owner only (0700): it holds every conversation.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)


def present(**values: Any) -> dict[str, Any]:
    """Tool parameters from command options, leaving out the ones not given."""
    return {name: value for name, value in values.items() if value not in (None, (), [])}
