"""What every ``sessionwire`` command shares: global options, opening the gateway,
printing a result (rich for people, ``--json`` for scripts) and the exit codes.

Commands live in their own modules and reach these through ``click.pass_obj``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click
import structlog
from rich.console import Console, RenderableType
from sessionwire.adapters.bootstrap import Gateway, open_event_store
from sessionwire.adapters.store.event_store import EventSourcedStore, StoreURLError
from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig
from sessionwire.application.ports.store import StoreInUse

Render = Callable[[dict[str, Any]], RenderableType]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def default_store() -> str:
    env = os.environ.get("SESSIONWIRE_STORE")
    if env:
        return env
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'sessionwire' / 'sessions.db'}"


def configure_logging(verbose: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def console(stderr: bool = False) -> Console:
    # Piped output keeps long session keys on one line instead of rich's 80 columns.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160
    return Console(file=stream, width=width, highlight=False, soft_wrap=stream.isatty())


class CommandFailed(click.ClickException):
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

    def config(self) -> GatewayConfig:
        try:
            return GatewayConfig.load(self.config_path)
        except ConfigError as error:
            fail(str(error), EXIT_USAGE)

    def run(self, work: Callable[[Gateway], Awaitable[int]], **open_kwargs: Any) -> int:
        """Open the gateway on the chosen store, run ``work`` on it and close it."""
        return asyncio.run(self._run(work, open_kwargs))

    async def _run(self, work: Callable[[Gateway], Awaitable[int]], kwargs: Any) -> int:
        # A command may bring its own config (the demo's scenario holds one).
        config = kwargs.pop("config", None) or self.config()
        if self.store.startswith("sqlite:"):
            make_parent(self.store)
        # Only a command with an agent runtime carries on the store's unfinished work;
        # without one, resuming would fail every pending run for want of an agent.
        kwargs.setdefault("resume", kwargs.get("runtime") is not None)
        try:
            gateway = await Gateway.open(config=config, store=self.store, **kwargs)
        except (StoreURLError, ConfigError) as error:
            fail(str(error), EXIT_USAGE)
        except StoreInUse as error:
            fail(str(error))
        try:
            return await work(gateway)
        except ValueError as error:
            fail(str(error))
        finally:
            await gateway.close()

    @contextmanager
    def store_alone(self) -> Iterator[tuple[EventSourcedStore, GatewayConfig]]:
        """The chosen store without a gateway around it: nothing unfinished is resumed,
        no agent is called, nothing is delivered (what auditing and imports need)."""
        config = self.config()
        if self.store.startswith("sqlite:"):
            make_parent(self.store)
        try:
            store = open_event_store(self.store, config)
        except StoreURLError as error:
            fail(str(error), EXIT_USAGE)
        try:
            yield store, config
        finally:
            store.close()

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
    raw = store[len("sqlite:") :]
    path = Path("/" + raw.lstrip("/") if raw.startswith("//") else raw).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)


def present(**values: Any) -> dict[str, Any]:
    """Tool parameters from command options, leaving out the ones not given."""
    return {name: value for name, value in values.items() if value not in (None, (), [])}
