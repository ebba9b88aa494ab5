"""``sessionwire policy diff --config NEW``: what a candidate config would change about
the tool calls the store recorded (application/audit/policy_diff.py).

It only reads, so it works beside a gateway serving the same store. The global
``--config`` (before ``policy``) is the config the store is read with; the ``--config``
after ``diff`` is the candidate. Exit 0 whether or not anything flips; 2 for a bad
candidate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from sessionwire.adapters.cli.context import (
    EXIT_OK,
    EXIT_USAGE,
    CliOptions,
    accept_global_options,
    console,
    fail,
)
from sessionwire.adapters.cli.lazy_group import LazyGroup

if TYPE_CHECKING:
    from sessionwire.application.audit.policy_diff import PolicyDiff

pass_options = click.make_pass_decorator(CliOptions)


@click.group("policy", cls=LazyGroup, prepare=accept_global_options)
def policy_group() -> None:
    """Check what a config change would do before making it."""


@policy_group.command("diff")
@click.option(
    "--config",
    "--candidate",
    "candidate",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="the candidate config (JSON5), replayed against every recorded decision",
)
@pass_options
def policy_diff_command(options: CliOptions, candidate: Path) -> int:
    """Replay every recorded tool call's access decision under a candidate config and
    list what would flip (granted->refused, refused->granted).

    Recorded: every refusal, every send that went through and every spawn. Allowed
    reads (sessions_list, sessions_history) write nothing, so they are not replayed."""
    from sessionwire.application.audit.policy_diff import policy_diff
    from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig

    try:
        candidate_config = GatewayConfig.load(candidate)
    except ConfigError as error:
        fail(f"candidate config {candidate}: {error}", EXIT_USAGE)
    with options.store_alone() as (store, _):
        diff = policy_diff(store, candidate_config)
    if options.as_json:
        click.echo(json.dumps(diff.to_json_dict(), indent=2, ensure_ascii=False))
    else:
        console().print(diff_view(diff))
    return EXIT_OK


FLIP_STYLES = {"granted->refused": "red", "refused->granted": "yellow"}


def diff_view(diff: PolicyDiff) -> RenderableType:
    shown: dict[str, Any] = diff.to_json_dict()
    summary = Text(
        f"{shown['decisions']} recorded decision(s) replayed: {shown['flips']} would flip "
        f"({shown['grantedToRefused']} granted->refused, "
        f"{shown['refusedToGranted']} refused->granted)"
    )
    if shown["unjudged"]:
        summary.append(f"; {shown['unjudged']} could not be judged (they named no session)")
    if not diff.flips:
        return summary
    table = Table(title_justify="left")
    table.add_column("POS", justify="right")
    table.add_column("FLIP")
    table.add_column("REQUESTER", overflow="fold")
    table.add_column("TOOL")
    table.add_column("TARGET", overflow="fold")
    table.add_column("WHY (candidate)", overflow="fold")
    for flip in shown["changes"]:
        table.add_row(
            str(flip["position"]),
            Text(flip["flip"], style=FLIP_STYLES.get(flip["flip"], "")),
            flip["requester"],
            flip["tool"],
            flip["target"] or flip["reference"],
            flip.get("candidateRule", "allowed"),
        )
    return Group(summary, table)
