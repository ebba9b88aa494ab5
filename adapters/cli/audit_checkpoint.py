"""``sessionwire audit keygen | checkpoint``: sign the log's head (ADR 0016 §3).

``audit checkpoint`` signs the sealed log's head and the Merkle root of every stream's
head with the key file, records the checkpoint in the store and prints it: publish that
output (or its ``log_hash``) somewhere the store's writers cannot reach, and any later
rewrite or truncation shows against it (docs/audit.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click
from rich.text import Text
from sessionwire.adapters.cli.audit_integrity import open_log, pass_options
from sessionwire.adapters.cli.checkpoint_key import KEY_HELP, key_path, load_or_create_key
from sessionwire.adapters.cli.context import EXIT_OK, CliOptions, console, fail


@click.command("keygen")
@click.option("--key", "key_file", metavar="PATH", help=KEY_HELP)
@pass_options
def keygen_command(options: CliOptions, key_file: str | None) -> int:
    """Make the checkpoint signing key if there is none; print its public key."""
    from sessionwire.application.audit.checkpoint import key_id, public_key_text, raw_public_key

    path = key_path(key_file)
    key, made = load_or_create_key(path)
    public = raw_public_key(key)
    result = {
        "key_file": str(path),
        "created": made,
        "key_id": key_id(public),
        "public_key": public_key_text(public),
    }
    if options.as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(result["public_key"])
        verb = "made" if made else "kept"
        click.echo(f"{verb} {path} (key id {result['key_id']})", err=True)
    return EXIT_OK


@click.command("checkpoint")
@click.option("--key", "key_file", metavar="PATH", help=KEY_HELP)
@pass_options
def checkpoint_command(options: CliOptions, key_file: str | None) -> int:
    """Sign the log's current head with the key (made on first use) and record it."""
    from sessionwire.application.audit.checkpoint import (
        NothingToCheckpoint,
        make_checkpoint,
        public_key_text,
    )

    key, _ = load_or_create_key(key_path(key_file))
    with open_log(options) as log:
        try:
            made = make_checkpoint(log, key, now=datetime.now(UTC))
        except NothingToCheckpoint as error:
            fail(str(error))
    checkpoint = made.checkpoint
    result = {
        "statement": checkpoint.statement.to_json(),
        "public_key": public_key_text(checkpoint.public_key),
        "signature": checkpoint.signature.hex(),
        "streams": len(made.heads),
    }
    if options.as_json:
        click.echo(json.dumps(result))
    else:
        statement = checkpoint.statement
        console().print(
            Text(
                f"checkpoint {statement.time}: log_size {statement.log_size}, "
                f"log_hash {statement.log_hash.hex()}\n"
                f"heads_root {statement.heads_root.hex()} ({len(made.heads)} streams)\n"
                f"signed by {statement.key_id}: {result['public_key']}"
            )
        )
    return EXIT_OK
