"""``sessionwire audit …``: commands for auditors (timelines, past states, exports,
tamper checks, read-model rebuilds). Each command lives in its own module and is added
to this group here."""

from __future__ import annotations

import click
from sessionwire.adapters.cli.audit_checkpoint import checkpoint_command, keygen_command
from sessionwire.adapters.cli.audit_integrity import (
    export_command,
    import_command,
    rebuild_command,
    verify_command,
)
from sessionwire.adapters.cli.audit_replay import state, timeline


@click.group()
def audit() -> None:
    """Replay, export and verify what the store recorded."""


audit.add_command(verify_command)
audit.add_command(export_command)
audit.add_command(import_command)
audit.add_command(rebuild_command)
audit.add_command(checkpoint_command)
audit.add_command(keygen_command)
audit.add_command(timeline)
audit.add_command(state)
