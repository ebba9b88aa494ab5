"""``sessionwire config check FILE``: validate an OpenClaw-shaped JSON5 config and say,
for each problem, where it is and what to write instead. Exit 0 valid, 2 invalid."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from sessionwire.adapters.cli.context import EXIT_OK, EXIT_USAGE, CliOptions, console
from sessionwire.application.config.gateway_config import (
    ConfigError,
    GatewayConfig,
    NearMissKey,
    UnknownKey,
    key_path,
    read_config_file,
)

pass_options = click.make_pass_decorator(CliOptions)

# What to write instead, by the kind of mistake pydantic found.
FIXES = {
    "missing": "add this key; it is required here",
    "string_type": 'write a text value in quotes, e.g. "main"',
    "bool_type": "write true or false, without quotes",
    "int_type": "write a whole number, without quotes",
    "int_from_float": "write a whole number, without a fraction",
    "float_type": "write a number, without quotes",
    "list_type": 'write a list, e.g. ["main", "ops"]',
    "dict_type": "write an object, e.g. { key: value }",
    "model_type": "write an object, e.g. { key: value }",
    "model_attributes_type": "write an object, e.g. { key: value }",
    "finite_number": "write a finite number",
}


@dataclass(frozen=True)
class Problem:
    path: str
    problem: str
    fix: str


def problems_in(error: ValidationError) -> list[Problem]:
    found = []
    for item in error.errors():
        context = item.get("ctx") or {}
        cause = context.get("error")
        kind = item["type"]
        if isinstance(cause, NearMissKey):
            message, fix = str(cause), "rename the key as suggested (keys are case-sensitive)"
        elif isinstance(cause, UnknownKey):
            message, fix = str(cause), "remove the key, or write one of the known ones"
        elif isinstance(cause, ValueError):
            message, fix = str(cause), "change the value as the problem says"
        else:
            message, fix = item["msg"], FIXES.get(kind, "")
        if kind == "literal_error":
            fix = f"use one of: {context.get('expected')}"
        elif kind in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}:
            fix = "use a value in range"
        found.append(Problem(key_path(item["loc"]) or "(top level)", message, fix))
    return found


def check_file(path: Path) -> tuple[GatewayConfig | None, list[Problem]]:
    """The config in ``path`` when it is valid, else every problem found."""
    try:
        data = read_config_file(path)
    except ConfigError as error:
        message = str(error)
        if "not valid JSON5" in message:
            fix = "fix the JSON5 syntax there (braces, commas, quotes)"
            return None, [Problem("(syntax)", message.replace("<string>:", "line "), fix)]
        if "top level" in message:
            return None, [
                Problem("(top level)", "the file must hold an object", "wrap the settings in { … }")
            ]
        return None, [Problem("(file)", message, "check the file (path, encoding, size, nesting)")]
    try:
        return GatewayConfig.model_validate(data), []
    except ValidationError as error:
        return None, problems_in(error)


def summary(config: GatewayConfig) -> dict[str, Any]:
    """What the gateway will do with this config, in the terms a reader set it in."""
    a2a = config.tools.agentToAgent
    policy = config.session.sendPolicy
    return {
        "agents": [agent.id for agent in config.agents.list] or ["main"],
        "defaultAgent": config.default_agent_id,
        "mainKey": config.key_rules.main_key,
        "scope": config.session.scope,
        "agentToAgent": {"enabled": a2a.enabled, "allow": a2a.allow or ["*"]},
        "maxPingPongTurns": config.session.agentToAgent.max_ping_pong_turns,
        "maxHops": config.session.agentToAgent.maxHops,
        "busy": config.session.agentToAgent.busy,
        "deliveries": config.deliveries.model_dump(
            include=set(type(config.deliveries).model_fields)
        ),
        "archiveAfterMinutes": config.archive_after_minutes,
        "sendPolicy": {
            "default": policy.default if policy else "allow",
            "rules": len(policy.rules) if policy else 0,
        },
        "sandboxMode": config.agents.defaults.sandbox.mode or "off",
        # Which sessions the session tools reach (decision 28): the default and each
        # agent's own setting.
        "visibility": {
            "default": config.visibility_policy.default,
            "perAgent": dict(config.visibility_policy.per_agent),
        },
    }


def report_view(report: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    if report["valid"]:
        parts.append(Text(f"✓ {report['file']} is a valid config", style="bold green"))
        table = Table(show_header=False, box=None, padding=(0, 2))
        for name, value in report["summary"].items():
            table.add_row(name, value if isinstance(value, str) else json.dumps(value))
        parts.append(table)
    else:
        count = len(report["errors"])
        parts.append(Text(f"✗ {report['file']}: {count} problem(s)", style="bold red"))
        table = Table("KEY", "PROBLEM", "WHAT TO DO", title_justify="left")
        for problem in report["errors"]:
            table.add_row(problem["path"], problem["problem"], problem["fix"])
        parts.append(table)
    for key in report["ignoredKeys"]:
        parts.append(
            Text(f"note: {key} is not a key sessionwire uses; it is ignored (check the spelling)")
        )
    return Group(*parts)


@click.group("config")
def config_group() -> None:
    """Check an OpenClaw-shaped JSON5 config file."""


@config_group.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@pass_options
def check(options: CliOptions, file: Path) -> int:
    """Validate FILE and explain each problem; exit 0 when valid, 2 when not."""
    config, problems = check_file(file)
    report: dict[str, Any] = {
        "file": str(file),
        "valid": config is not None,
        "errors": [asdict(problem) for problem in problems],
        "ignoredKeys": config.unknown_keys() if config else [],
        # What the gateway will do with it; null when it would refuse the config.
        "summary": summary(config) if config is not None else None,
    }
    if options.as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        console().print(report_view(report))
    return EXIT_OK if config is not None else EXIT_USAGE
