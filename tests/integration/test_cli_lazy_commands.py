"""The CLI's lazily imported commands: each help line the group shows without importing
a command is the line that command itself shows once loaded."""

from __future__ import annotations

import click
import pytest
from sessionwire.adapters.cli.lazy_group import LazyGroup
from sessionwire.adapters.cli.main import cli, sessions


@pytest.mark.parametrize("group", [cli, sessions], ids=["sessionwire", "sessions"])
def test_each_lazy_help_line_matches_its_command(group: click.Group) -> None:
    assert isinstance(group, LazyGroup)
    for name, lazy in group.lazy.items():
        command = lazy.load()
        assert command.get_short_help_str(limit=500) == lazy.short_help, name
        assert command.name == name


def test_every_lazy_command_is_listed_and_resolves() -> None:
    context = click.Context(cli)
    for name in cli.lazy:
        assert name in cli.list_commands(context)
        assert cli.get_command(context, name) is not None
