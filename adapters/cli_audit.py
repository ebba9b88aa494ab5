"""``sessionwire audit …``: commands for auditors (timelines, past states, exports,
tamper checks, read-model rebuilds). Each command lives in its own module and is added
to this group here."""

from __future__ import annotations

import click


@click.group()
def audit() -> None:
    """Replay, export and verify what the store recorded."""


# Registered at the bottom: each command module imports nothing from this one.
from sessionwire.adapters.cli_audit_replay import state, timeline  # noqa: E402

audit.add_command(timeline)
audit.add_command(state)
