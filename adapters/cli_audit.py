"""``sessionwire audit …``: commands for auditors (timelines, past states, exports,
tamper checks, read-model rebuilds). Each command lives in its own module and is added
to this group here."""

from __future__ import annotations

import click


@click.group()
def audit() -> None:
    """Replay, export and verify what the store recorded."""
