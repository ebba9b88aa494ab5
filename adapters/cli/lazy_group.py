"""A click group that imports a command's module only when that command runs.

``sessionwire --help`` and ``sessionwire sessions list`` must not pay for FastAPI,
uvicorn, the MCP SDK or httpx (issue 11: a CLI that starts fast), whatever those
commands' modules import. Each lazy command is named with its module and its one-line
help, so the group's help lists it without importing it; a test checks that each
listed line matches the loaded command's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from sessionwire.domain.errors import SessionwireError


class PipeClosed(SessionwireError):
    """The reader of stdout closed it before the command had written everything."""


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives (``module:attribute``) and the line the group's help shows."""

    target: str
    short_help: str

    def load(self) -> click.Command:
        module_name, attribute = self.target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group whose ``lazy`` commands are imported on first use; ``prepare`` is applied
    once to each command, eager or lazy, when the group first hands it out."""

    def __init__(
        self,
        *args: Any,
        lazy: dict[str, LazyCommand] | None = None,
        prepare: Callable[[click.Command], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = dict(lazy or {})
        self.prepare = prepare
        self._prepared: set[str] = set()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # click turns an EPIPE into exit 1; a reader that stopped early (``| head``)
            # is no failure of ours, so it leaves click as its own exception.
            raise PipeClosed from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        command = super().get_command(ctx, cmd_name)
        if command is not None and self.prepare and cmd_name not in self._prepared:
            self._prepared.add(cmd_name)
            self.prepare(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Click's own listing loads every command for its help line; a lazy one shows
        # the line it was registered with instead, and stays unloaded.
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(formatter.width)))
            else:
                rows.append((name, self.lazy[name].short_help))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
