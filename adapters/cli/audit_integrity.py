"""``sessionwire audit verify | export | import | rebuild``: the log's integrity commands.

They open the store alone (no gateway: nothing resumes, nothing is written but what the
command writes) and stream the log, so they run in constant memory on any size of store.
``audit verify FILE`` opens no store at all: it checks an export or a session bundle
alone (application/audit/verify_file.py).
Exit codes: 0 clean, 1 findings / differences / a bad file, 2 bad usage or a store that
cannot take the import.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import click
from rich.console import Group, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from sessionwire.adapters.cli.checkpoint_key import (
    KEY_HELP,
    key_configured,
    key_path,
    load_or_create_key,
)
from sessionwire.adapters.cli.context import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliOptions,
    collector_paused,
    console,
    fail,
)
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.application.audit.export import ExportFormatError, export_lines, import_export
from sessionwire.application.audit.verify import VerifyReport, verify
from sessionwire.application.audit.verify_file import FileReport
from sessionwire.application.ports.audit_log import (
    ImportRefused,
    ImportRejected,
    TableDifference,
)
from sessionwire.domain.keys import InvalidSessionKey

pass_options = click.make_pass_decorator(CliOptions)


# What an older statement leaves unbound in a bundle (docs/evidence-format.md §4).
_UNBOUND = {
    ("session", 1): "; membership, order and positions not bound",
    ("session", 2): "; positions not bound",
}


@contextmanager
def open_log(options: CliOptions, *, existing: bool = True) -> Iterator[StoreAuditLog]:
    """The store's audit log; ``existing``: only a store that is there (see store_alone)."""
    with options.store_alone(existing=existing) as (store, _):
        yield StoreAuditLog(store)


@contextmanager
def progress_bar(
    options: CliOptions, total: int | None, what: str, *, every: int = 1000, counted: bool = True
) -> Iterator[Callable[[int], None]]:
    """A progress callback taking how far the work is (a log position, a count of lines,
    bytes read); a bar on stderr for people, nothing with --json. ``counted`` shows the
    count reached out of ``total`` (None: not known ahead, the count alone); bytes show
    as a percentage instead."""
    # Off a terminal a bar is only noise: rich would leave an empty line in a log.
    if options.as_json or total == 0 or not console(stderr=True).is_terminal:
        yield lambda _: None
        return
    columns: list[ProgressColumn] = [TextColumn(what), BarColumn()]
    columns.append(MofNCompleteColumn() if counted else TaskProgressColumn())
    with Progress(
        *columns,
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=total)
        reached = 0

        def advance(position: int) -> None:
            nonlocal reached
            # Redrawing per event would cost more than checking it.
            if position - reached >= every or (total is not None and position >= total):
                bar.update(task, completed=position if total is None else min(position, total))
                reached = position

        yield advance


def _expected_head(value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        raw = bytes.fromhex(value.strip())
    except ValueError:
        raw = b""
    if len(raw) != 32:
        fail(f"--expect-head takes a log hash: 64 hex digits, not {value!r}", EXIT_USAGE)
    return raw


def _trusted_key(value: str | None) -> bytes | None:
    """``ed25519:BASE64``, or a file holding it (what ``audit keygen`` printed)."""
    if value is None:
        return None
    from sessionwire.application.audit.checkpoint import BadPublicKey, parse_public_key

    text = value
    if not value.startswith("ed25519:"):
        try:
            text = Path(value).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            fail(
                f"--trusted-key {value!r}: neither ed25519:BASE64 nor a readable file ({error})",
                EXIT_USAGE,
            )
    try:
        return parse_public_key(text)
    except BadPublicKey as error:
        fail(f"--trusted-key: {error}", EXIT_USAGE)


@click.command("verify")
@click.argument("file", required=False)
@click.option(
    "--expect-head",
    metavar="HASH",
    help="a log hash kept from earlier (a checkpoint's log_hash): it must still be the "
    "signed head or in the chain",
)
@click.option(
    "--trusted-key",
    metavar="PUB",
    help="the checkpoint must be signed by this key (ed25519:BASE64, or a file holding it)",
)
@click.option(
    "--require-anchored",
    is_flag=True,
    help="FILE: an event no checkpoint covers is a finding, not just counted",
)
@click.option(
    "--session",
    "expect_session",
    metavar="KEY",
    help="FILE: the file must be this session's bundle (not another session's)",
)
@pass_options
def verify_command(
    options: CliOptions,
    file: str | None,
    expect_head: str | None,
    trusted_key: str | None,
    require_anchored: bool,
    expect_session: str | None,
) -> int:
    """Check every stored event against the hash chain; report what changed.

    With FILE (an `audit export`, or - for stdin): check that file alone, with no
    store: its stream links, its checkpoint's signature and its proofs."""
    head = _expected_head(expect_head)
    key = _trusted_key(trusted_key)
    if file is not None:
        session = None
        if expect_session is not None:
            try:
                session = options.config().key_rules.canonical(expect_session)
            except InvalidSessionKey as error:
                fail(str(error), EXIT_USAGE)
        return _verify_file(options, file, head, key, require_anchored, session)
    if expect_session is not None:
        fail("--session checks a FILE (a session bundle)", EXIT_USAGE)
    with open_log(options) as log:
        bounds = log.log_bounds()
        total = max(bounds.last_event, bounds.last_link)
        with progress_bar(options, total, "verifying") as progress:
            report = verify(log, progress=progress, expect_head=head, trusted_key=key)
    if options.as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        console().print(verify_view(report))
    return EXIT_OK if report.clean else EXIT_REFUSED


def _verify_file(
    options: CliOptions,
    file: str,
    head: bytes | None,
    key: bytes | None,
    require_anchored: bool,
    expect_session: str | None = None,
) -> int:
    from sessionwire.application.audit.verify_file import verify_file

    try:
        source = sys.stdin if file == "-" else Path(file).open(encoding="utf-8")  # noqa: SIM115
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror}", EXIT_USAGE)
    try:
        with source:
            report = verify_file(
                source,
                trusted_key=key,
                expect_head=head,
                require_anchored=require_anchored,
                expect_session=expect_session,
            )
    except UnicodeDecodeError as error:
        fail(f"{file} is not UTF-8 text: {error}")
    if options.as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        console().print(file_view(report))
    return EXIT_OK if report.clean else EXIT_REFUSED


def file_view(report: FileReport) -> RenderableType:
    what = f"a session bundle ({report.session})" if report.scope == "session" else "an export"
    summary = f"{what}: {report.events} event(s), {report.anchored} anchored"
    if report.unanchored:
        summary += f", {report.unanchored} unanchored (after the checkpoint)"
    if report.unchained:
        summary += f", {report.unchained} recorded before the chain began"
    checkpoint = report.checkpoint
    if checkpoint is None:
        lines = [summary, "no checkpoint: checked by its stream links alone"]
    else:
        trust = {
            None: "key not checked (no --trusted-key)",
            True: "trusted key",
            False: "NOT the trusted key",
        }
        unbound = _UNBOUND.get((report.scope, checkpoint.version), "")
        if report.sharded and checkpoint.version < 4:
            unbound += "; shards not bound"
        lines = [
            summary,
            f"checkpoint {checkpoint.time} (statement v{checkpoint.version}{unbound}): "
            f"log_size {checkpoint.log_size}, log_hash {checkpoint.log_hash}",
            f"signed by {checkpoint.key_id} ({checkpoint.public_key}): signature "
            f"{'holds' if checkpoint.signature_holds else 'DOES NOT HOLD'}, "
            f"{trust[checkpoint.trusted]}",
        ]
    if report.clean:
        return Text("clean: " + "\n".join(lines))
    table = Table(
        title=f"{len(report.findings)} finding(s) in " + "\n".join(lines), title_justify="left"
    )
    for column in ("KIND", "EVENT", "LINE", "STREAM", "VERSION", "POSITION", "DETAIL"):
        table.add_column(column)
    for finding in report.findings:
        table.add_row(
            finding.kind,
            _dash(finding.event),
            _dash(finding.line),
            finding.session_key or _dash(finding.originator_id),
            _dash(finding.version),
            _dash(finding.notification_id),
            finding.detail,
        )
    return table


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def verify_view(report: VerifyReport) -> RenderableType:
    head = (
        f"head #{report.head_position} {report.head_hash}" if report.head_hash else "no chain yet"
    )
    summary = f"{report.checked} event(s) checked; {head}"
    if report.unchained:
        summary += f"; {report.unchained} event(s) recorded before the chain began"
    if report.clean:
        return Text(f"clean: {summary}")
    table = Table(title=f"{len(report.findings)} finding(s): {summary}", title_justify="left")
    for column in ("KIND", "STREAM", "SESSION", "VERSION", "POSITION", "DETAIL"):
        table.add_column(column)
    for finding in report.findings:
        table.add_row(
            finding.kind,
            "-" if finding.originator_id is None else str(finding.originator_id),
            finding.session_key or "-",
            "-" if finding.version is None else str(finding.version),
            str(finding.notification_id),
            finding.detail,
        )
    return table


@click.command("export")
@click.option("--session", "session_key", help="only this session and its runs, spawns, exchanges")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["jsonl"]),
    default="jsonl",
    show_default=True,
    help="the export format: one JSON event per line",
)
@click.option(
    "-o", "--output", default="-", show_default=True, help="the file to write ('-': stdout)"
)
@click.option("--key", "key_file", metavar="PATH", help=KEY_HELP)
@click.option(
    "--no-checkpoint",
    is_flag=True,
    help="make no checkpoint now (the latest recorded one still anchors the file)",
)
@pass_options
def export_command(
    options: CliOptions,
    session_key: str | None,
    format_: str,
    output: str,
    key_file: str | None,
    no_checkpoint: bool,
) -> int:
    """Write the event log as JSON lines (re-importable when complete).

    The file is anchored to a signed checkpoint: one made now when a signing key is
    configured (--key, $SESSIONWIRE_CHECKPOINT_KEY, or the default key file exists),
    else the latest recorded one. `audit verify FILE` checks it with no store."""
    try:
        key = None if session_key is None else options.config().key_rules.canonical(session_key)
    except InvalidSessionKey as error:
        fail(str(error), EXIT_USAGE)
    from sessionwire.application.audit.checkpoint import (
        Checkpointed,
        CheckpointMismatch,
        NothingToCheckpoint,
        latest_anchor,
        make_checkpoint,
    )

    with open_log(options) as log:
        anchor: Checkpointed | None
        try:
            if key_configured(key_file) and not no_checkpoint:
                signing_key, _ = load_or_create_key(key_path(key_file))
                anchor = make_checkpoint(log, signing_key, now=datetime.now(UTC))
            else:
                anchor = latest_anchor(log)
        except NothingToCheckpoint:
            anchor = None
        except CheckpointMismatch as error:
            fail(str(error))
        lines = export_lines(
            log,
            session_key=key,
            checkpoint=None if anchor is None else anchor.checkpoint,
            heads=None if anchor is None else anchor.heads,
            members=None if anchor is None else anchor.members,
        )
        if output == "-":
            _write(lines, sys.stdout)
        else:
            # The export holds every transcript: a new file is its owner's only (0600).
            descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(descriptor, "w", encoding="utf-8") as file:
                _write(lines, file)
    return EXIT_OK


def _write(lines: Iterator[str], file: TextIO) -> None:
    for line in lines:
        file.write(line)
        file.write("\n")


@click.command("import")
@click.argument("source")
@pass_options
def import_command(options: CliOptions, source: str) -> int:
    """Load a complete export (SOURCE, or - for stdin) into an empty store.

    Every hash is checked and only sessionwire's own events are accepted; any error
    leaves the store as it was."""
    with collector_paused():
        return _import(options, source)


def _import(options: CliOptions, source: str) -> int:
    notes: list[str] = []
    with open_log(options, existing=False) as log:
        try:
            if source == "-":
                count = import_export(log, sys.stdin, notes=notes)
            else:
                try:
                    file = Path(source).open(encoding="utf-8")  # noqa: SIM115
                    size = os.fstat(file.fileno()).st_size
                except OSError as error:
                    fail(f"cannot read {source}: {error.strerror}", EXIT_USAGE)
                with (
                    file,
                    progress_bar(
                        options, size, "importing", every=1 << 20, counted=False
                    ) as progress,
                ):
                    lines = file if options.as_json else _reporting(file, progress)
                    count = import_export(log, lines, notes=notes)
        except ImportRefused as error:
            fail(f"{error}; import only into an empty store", EXIT_USAGE)
        except (ExportFormatError, ImportRejected, UnicodeDecodeError) as error:
            fail(f"{source}: {error}; nothing was imported")
        location = log.store.location
    result: dict[str, Any] = {"imported": count, "store": location, "checkpoints": notes}
    if options.as_json:
        click.echo(json.dumps(result))
    else:
        console().print(f"imported {count} event(s) into {location}; read models rebuilt")
        for note in notes:
            console().print(note)
    return EXIT_OK


def _reporting(lines: Iterable[str], progress: Callable[[int], None]) -> Iterator[str]:
    """``lines``, reporting how much of the file has been read (characters: bytes for the
    ASCII an export mostly is)."""
    read = 0
    for line in lines:
        read += len(line)
        progress(read)
        yield line


@click.command("rebuild")
@click.option("--check", is_flag=True, help="compare only; leave the live read models as they are")
@pass_options
def rebuild_command(options: CliOptions, check: bool) -> int:
    """Project every read model again from the log and report how the live ones differ."""
    with open_log(options) as log:
        differences = log.rebuild_and_compare(replace=not check)
    differs = any(difference.total for difference in differences.values())
    if options.as_json:
        click.echo(
            json.dumps(
                {
                    "replaced": differs and not check,
                    "tables": {name: vars(d) for name, d in differences.items()},
                },
                indent=2,
            )
        )
    else:
        console().print(rebuild_view(differences, replaced=differs and not check))
    return EXIT_REFUSED if differs else EXIT_OK


def rebuild_view(differences: dict[str, TableDifference], *, replaced: bool) -> RenderableType:
    table = Table(title="read models rebuilt from the log", title_justify="left")
    for column in ("TABLE", "ADDED", "REMOVED", "CHANGED", "EXAMPLES"):
        table.add_column(column)
    for name, difference in differences.items():
        table.add_row(
            name,
            str(difference.added),
            str(difference.removed),
            str(difference.changed),
            "\n".join(difference.examples),
        )
    if not any(d.total for d in differences.values()):
        verdict = "the live read models equal the log's"
    elif replaced:
        verdict = "the live read models differed; they now hold the rebuilt rows"
    else:
        verdict = "the live read models differ (--check: left unchanged)"
    return Group(table, Text(verdict))
