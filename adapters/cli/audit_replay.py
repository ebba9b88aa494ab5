"""``sessionwire audit timeline KEY`` and ``sessionwire audit state KEY``.

Both open the store alone, without a gateway: a gateway would resume unfinished runs
and exchanges, and an audit must never call the agent runtime or deliver anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import click
from sessionwire.adapters.cli.audit_views import state_view, timeline_view, trace_view
from sessionwire.adapters.cli.context import EXIT_USAGE, CliOptions, fail
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.audit.auditor import Auditor
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.domain.keys import InvalidSessionKey

pass_options = click.make_pass_decorator(CliOptions)
json_option = click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")


@contextmanager
def store_alone(
    options: CliOptions, *, existing: bool = True
) -> Iterator[tuple[EventSourcedStore, GatewayConfig]]:
    """The chosen store alone; a missing session or a bad key is a refusal (exit 1)."""
    with options.store_alone(existing=existing) as opened:
        try:
            yield opened
        except (LookupError, InvalidSessionKey, ValueError) as error:
            message = str(error.args[0]) if isinstance(error, LookupError) else str(error)
            fail(message)


@contextmanager
def recorded_store(options: CliOptions) -> Iterator[Auditor]:
    """An auditor on the chosen store; it only reads."""
    with store_alone(options) as (store, config):
        yield Auditor(store, config.key_rules)


@click.command()
@click.argument("key")
@json_option
@pass_options
def timeline(options: CliOptions, key: str, as_json: bool) -> int:
    """Every event of session KEY and of the runs, exchanges and spawns it took part in."""
    options.as_json = options.as_json or as_json
    with recorded_store(options) as auditor:
        found = auditor.timeline(key)
    return options.show(found.model_dump(mode="json"), timeline_view)


@click.command()
@click.argument("trace_id")
@json_option
@pass_options
def trace(options: CliOptions, trace_id: str, as_json: bool) -> int:
    """The chain of TRACE_ID: who caused what (runs, sends, spawns, announces,
    deliveries), as a tree in causal order."""
    options.as_json = options.as_json or as_json
    with recorded_store(options) as auditor:
        found = auditor.trace(trace_id)
    return options.show(found.model_dump(mode="json"), trace_view)


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--at {text!r} is not an ISO 8601 instant (e.g. 2026-05-01T12:00:00Z)", EXIT_USAGE)
    # An instant without a zone is read as UTC, the zone every event is recorded in.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.command()
@click.argument("key")
@click.option("--at-version", "version", type=click.IntRange(min=1), help="stream version N")
@click.option("--at", "instant", help="an ISO 8601 instant, e.g. 2026-05-01T12:00:00Z")
@json_option
@pass_options
def state(
    options: CliOptions, key: str, version: int | None, instant: str | None, as_json: bool
) -> int:
    """Session KEY (row fields and transcript) as it stood at a version or an instant."""
    options.as_json = options.as_json or as_json
    if (version is None) == (instant is None):
        fail("give exactly one of --at-version N or --at INSTANT", EXIT_USAGE)
    at = _instant(instant) if instant is not None else None
    with recorded_store(options) as auditor:
        found = auditor.session_as_of(key, version=version, at=at)
    return options.show(found.model_dump(mode="json"), state_view)


__all__ = ["recorded_store", "state", "store_alone", "timeline", "trace"]
