"""``audit checkpoint``: sign the sealed log's head and every stream head (ADR 0016 §3).

Signing and checking are Ed25519 (the ``cryptography`` package). Where the private key
lives is the caller's business (the CLI keeps it in a 0600 file); this module gets the
key object and the time, and reads the store through the audit port only.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sessionwire.application.ports.audit_log import AuditLog
from sessionwire.domain.checkpoint import (
    STATEMENT_VERSION,
    Checkpoint,
    OrderedEvent,
    SessionMembers,
    ShardHead,
    Statement,
    StreamHead,
    heads_root,
    order_digest,
    sessions_root,
    shards_root,
    sort_heads,
    sort_members,
)
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.session import session_uuid

PUBLIC_KEY_PREFIX = "ed25519:"


class NothingToCheckpoint(SessionwireError, ValueError):
    """A store whose log has no chained record yet."""


class BadPublicKey(SessionwireError, ValueError):
    """Text that is not an ``ed25519:BASE64`` public key."""


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public_key: bytes) -> str:
    """A short name for a public key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def public_key_text(public_key: bytes) -> str:
    """How a public key is printed and passed around (``--trusted-key``)."""
    return PUBLIC_KEY_PREFIX + base64.b64encode(public_key).decode()


def parse_public_key(text: str) -> bytes:
    value = text.strip()
    if not value.startswith(PUBLIC_KEY_PREFIX):
        raise BadPublicKey(f"a public key reads {PUBLIC_KEY_PREFIX}BASE64, not {value[:20]!r}")
    try:
        raw = base64.b64decode(value[len(PUBLIC_KEY_PREFIX) :], validate=True)
    except ValueError as error:
        raise BadPublicKey(f"the key is not base64: {error}") from error
    if len(raw) != 32:
        raise BadPublicKey("an Ed25519 public key is 32 bytes")
    return raw


@dataclass(frozen=True)
class Checkpointed:
    """A new checkpoint with the stream heads it commits to (for proofs), the sessions'
    membership it signs (empty for a v1 checkpoint) and the shards' heads (a v4
    checkpoint's, ADR 0067; empty otherwise)."""

    checkpoint: Checkpoint
    heads: list[StreamHead]
    members: list[SessionMembers] = field(default_factory=list)
    shards: list[ShardHead] = field(default_factory=list)


def session_members(
    log: AuditLog, size: int, heads: list[StreamHead], statement_version: int
) -> list[SessionMembers]:
    """Each session's streams with a head within the first ``size`` records of the sealed
    log (its own and those the timeline index lists for it), and the order of their
    events there (ADR 0036 §7, and for a version-3 statement their positions and log
    hashes: ADR 0041), sorted by key.

    Reads every session's events once; a store recorded before the timeline index binds
    each session's own stream only."""
    by_id = {head.originator_id: head for head in heads}
    members: list[SessionMembers] = []
    for key in log.session_keys():
        own = session_uuid(key)
        if own not in by_id:
            continue  # no event of it within the checkpoint
        records = log.session_records(key) or []
        streams = {own, *(record.content.originator_id for record, _ in records)}
        covered = sorted(
            OrderedEvent(
                link.log_seq,
                record.notification_id,
                record.content.originator_id,
                record.content.originator_version,
                link.log_hash,
            )
            for record, link in records
            if link is not None
            and link.log_seq is not None
            and link.log_hash is not None
            and link.log_seq <= size
        )
        members.append(
            SessionMembers(
                key=key,
                heads=sort_heads([by_id[stream] for stream in streams if stream in by_id]),
                order=order_digest(covered, statement_version=statement_version),
                statement_version=statement_version,
            )
        )
    return sort_members(members)


def make_checkpoint(log: AuditLog, key: Ed25519PrivateKey, *, now: datetime) -> Checkpointed:
    """Sign the sealed log's head and stream heads as they are now, and record it: a
    version-3 statement, or on a store that keeps a chain per shard (Citus) version 4,
    which also signs the shards' heads (ADR 0067)."""
    log.seal()  # as far as it goes now (PostgreSQL seals behind its writers)
    head = log.sealed_head()
    if head is None:
        raise NothingToCheckpoint("the log has no chained record yet: nothing to sign")
    heads = log.stream_heads(head)
    shards = log.shard_heads(head.size)
    version = 4 if shards else STATEMENT_VERSION
    members = session_members(log, head.size, heads, version)
    public = raw_public_key(key)
    statement = Statement(
        log_size=head.size,
        log_hash=head.log_hash,
        heads_root=heads_root(heads),
        time=now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        key_id=key_id(public),
        sessions_root=sessions_root(members),
        heads_count=len(heads),
        sessions_count=len(members),
        shards_root=shards_root(shards) if shards else None,
        shards_count=len(shards) if shards else None,
    )
    checkpoint = Checkpoint(
        statement=statement, public_key=public, signature=key.sign(statement.signed_bytes())
    )
    log.record_checkpoint(checkpoint)
    return Checkpointed(checkpoint=checkpoint, heads=heads, members=members, shards=shards)


class CheckpointMismatch(SessionwireError, ValueError):
    """A recorded checkpoint that the store's log no longer matches."""


def latest_anchor(log: AuditLog) -> Checkpointed | None:
    """The latest recorded checkpoint with the stream heads (and for version 4, the
    shards' heads) it signed, read again from the log and checked against it, or None
    when none was recorded."""
    found = log.checkpoints(limit=1)
    if not found:
        return None
    checkpoint = found[0]
    statement = checkpoint.statement
    head = log.sealed_head(statement.log_size)
    heads = [] if head is None else log.stream_heads(head)
    members = (
        []
        if head is None or statement.sessions_root is None
        else session_members(log, head.size, heads, statement.version)
    )
    shards = [] if head is None or statement.shards_root is None else log.shard_heads(head.size)
    if (
        head is None
        or head.log_hash != statement.log_hash
        or heads_root(heads) != (statement.heads_root)
        or statement.heads_count not in (None, len(heads))
        or statement.sessions_count not in (None, len(members))
        or (
            statement.sessions_root is not None
            and sessions_root(members) != statement.sessions_root
        )
        or (
            statement.shards_root is not None
            and (
                shards_root(shards) != statement.shards_root
                or statement.shards_count != len(shards)
            )
        )
    ):
        raise CheckpointMismatch(
            f"the log no longer matches the latest checkpoint (size {statement.log_size}, "
            f"{statement.time}): run `sessionwire audit verify`"
        )
    return Checkpointed(checkpoint=checkpoint, heads=heads, members=members, shards=shards)


def signature_holds(checkpoint: Checkpoint) -> bool:
    """Whether the checkpoint's signature is its public key's over its statement."""
    if len(checkpoint.public_key) != 32 or key_id(checkpoint.public_key) != (
        checkpoint.statement.key_id
    ):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(checkpoint.public_key).verify(
            checkpoint.signature, checkpoint.statement.signed_bytes()
        )
    except (InvalidSignature, ValueError):
        return False
    return True


__all__ = [
    "BadPublicKey",
    "CheckpointMismatch",
    "Checkpointed",
    "NothingToCheckpoint",
    "key_id",
    "latest_anchor",
    "make_checkpoint",
    "parse_public_key",
    "public_key_text",
    "raw_public_key",
    "signature_holds",
]
