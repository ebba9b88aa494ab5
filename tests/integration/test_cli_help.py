"""The CLI's help reads as plain text, explains every option, and types its numbers
(issue 16, finding 12)."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from sessionwire.adapters.cli.main import cli
from sessionwire.domain.keys import SESSION_KINDS


def every_command() -> Iterator[tuple[str, click.Command]]:
    def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
        yield path, command
        if isinstance(command, click.Group):
            context = click.Context(command)
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None, name
                yield from walk(sub, f"{path} {name}")

    yield from walk(cli, "sessionwire")


COMMANDS = dict(every_command())


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_has_no_rest_markup(path: str) -> None:
    command = COMMANDS[path]
    with click.Context(command, info_name=path) as context:
        text = command.get_help(context)
    assert "``" not in text
    assert ":class:" not in text
    assert ":func:" not in text


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_has_help(path: str) -> None:
    missing = [
        option.opts[0]
        for option in COMMANDS[path].params
        if isinstance(option, click.Option) and not option.hidden and not option.help
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("path", "option"),
    [
        ("sessionwire sessions list", "--limit"),
        ("sessionwire sessions list", "--message-limit"),
        ("sessionwire sessions list", "--active-minutes"),
        ("sessionwire sessions history", "--limit"),
        ("sessionwire sessions send", "--timeout-seconds"),
        ("sessionwire sessions spawn", "--run-timeout-seconds"),
    ],
)
def test_counts_and_seconds_are_integers(path: str, option: str) -> None:
    (param,) = [p for p in COMMANDS[path].params if option in p.opts]
    assert isinstance(param.type, click.types.IntParamType), param.type


def test_kinds_are_a_choice() -> None:
    (param,) = [p for p in COMMANDS["sessionwire sessions list"].params if "--kinds" in p.opts]
    assert isinstance(param.type, click.Choice)
    assert tuple(param.type.choices) == SESSION_KINDS
