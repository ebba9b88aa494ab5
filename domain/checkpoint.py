"""A checkpoint: the statement signed about the log at one moment (docs/adr/0016 §3).

``log_size`` and ``log_hash`` are the sealed log's head (the linear chain anchors a
whole-store export); ``heads_root`` is the Merkle root over every stream's head at that
size, one leaf per stream sorted by originator id (a session bundle proves its streams'
heads against it). The signature covers ``signed_bytes()``, a canonical encoding, so a
verifier never depends on how a file happened to format the statement. Every byte is
specified in docs/evidence-format.md.

Statement versions: 1 signs the log and the heads; 2 adds ``sessions_root`` (ADR 0036
§7); 3 (ADR 0041) signs its own ``version`` and both trees' sizes, and its session
leaves' order digest binds every event's position and log hash, not only its log_seq;
4 (ADR 0067), written by a store distributed by session, adds ``shards_root``, the Merkle
root over every shard's head (its id, size and shard hash), and ``shards_count``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from sessionwire.domain import merkle
from sessionwire.domain.hash_chain import HASH_SIZE

# The signed bytes' first line, by statement version.
_STATEMENTS = {
    1: b"sessionwire/checkpoint/v1\n",
    # Also signs the sessions' membership (ADR 0036 §7).
    2: b"sessionwire/checkpoint/v2\n",
    # Also signs its version and tree sizes; positions bound by the order (ADR 0041).
    3: b"sessionwire/checkpoint/v3\n",
    # Also signs the shards' heads (ADR 0067): a store distributed by session.
    4: b"sessionwire/checkpoint/v4\n",
}
STATEMENT_VERSION = 3
_HEAD = b"sessionwire/stream-head/v1\x00"
_SHARD_HEAD = b"sessionwire/shard-head/v1\x00"
# A session leaf and its order digest, by statement version (2: v1, 3 and 4: v2).
_MEMBERS = {
    2: b"sessionwire/session-members/v1\x00",
    3: b"sessionwire/session-members/v2\x00",
    4: b"sessionwire/session-members/v2\x00",
}
_ORDER = {
    2: b"sessionwire/session-order/v1\x00",
    3: b"sessionwire/session-order/v2\x00",
    4: b"sessionwire/session-order/v2\x00",
}
# Each statement version's JSON fields: exactly these, none more (an unsigned field is
# refused, never ignored).
_FIELDS = {
    1: frozenset({"log_size", "log_hash", "heads_root", "time", "key_id"}),
    2: frozenset({"log_size", "log_hash", "heads_root", "time", "key_id", "sessions_root"}),
    3: frozenset(
        {
            "version",
            "log_size",
            "log_hash",
            "heads_root",
            "heads_count",
            "time",
            "key_id",
            "sessions_root",
            "sessions_count",
        }
    ),
}
_FIELDS[4] = _FIELDS[3] | {"shards_root", "shards_count"}


@dataclass(frozen=True)
class StreamHead:
    """A stream's last chained version at a checkpoint."""

    originator_id: UUID
    version: int
    stream_hash: bytes

    def leaf(self) -> bytes:
        """This head's Merkle leaf hash: fixed-size fields, so no two heads encode alike."""
        return merkle.leaf_hash(
            _HEAD
            + self.originator_id.bytes
            + self.version.to_bytes(8, "big", signed=True)
            + self.stream_hash
        )


@dataclass(frozen=True)
class ShardHead:
    """A shard's log at a checkpoint (ADR 0067): its id, how many records it holds and
    its last record's shard hash."""

    shard: int
    size: int
    shard_hash: bytes

    def leaf(self) -> bytes:
        return merkle.leaf_hash(
            _SHARD_HEAD
            + self.shard.to_bytes(8, "big", signed=True)
            + self.size.to_bytes(8, "big", signed=True)
            + self.shard_hash
        )


def shards_root(heads: list[ShardHead]) -> bytes:
    """The Merkle root over the shards' heads (``heads`` sorted by shard id)."""
    return merkle.root([head.leaf() for head in heads])


def sort_shard_heads(heads: list[ShardHead]) -> list[ShardHead]:
    return sorted(heads, key=lambda head: head.shard)


def heads_root(heads: list[StreamHead]) -> bytes:
    """The Merkle root over ``heads`` (which must be sorted by originator id)."""
    return merkle.root([head.leaf() for head in heads])


def sort_heads(heads: list[StreamHead]) -> list[StreamHead]:
    return sorted(heads, key=lambda head: head.originator_id.bytes)


class OrderedEvent(NamedTuple):
    """What a session's order digest takes of one of its sealed events."""

    log_seq: int
    notification_id: int
    originator_id: UUID
    version: int
    log_hash: bytes


def order_digest(events: Iterable[OrderedEvent], *, statement_version: int) -> bytes:
    """The order of a session's events across its streams, in log order. A bundle's
    events must give the signed digest. Under a version-2 statement it takes ``(log_seq,
    stream, version)`` of each; under version 3 also its position (``notification_id``)
    and log hash, so no field of a covered event line is left unsigned."""
    digest = hashlib.sha256(_ORDER[statement_version])
    for event in events:
        digest.update(event.log_seq.to_bytes(8, "big", signed=True))
        if statement_version >= 3:
            digest.update(event.notification_id.to_bytes(8, "big", signed=True))
        digest.update(event.originator_id.bytes)
        digest.update(event.version.to_bytes(8, "big", signed=True))
        if statement_version >= 3:
            digest.update(event.log_hash)
    return digest.digest()


@dataclass(frozen=True)
class SessionMembers:
    """Which streams belong to a session at a checkpoint, their heads, and the order of
    their events: one leaf of the checkpoint's ``sessions_root`` (ADR 0036 §7)."""

    key: str
    heads: list[StreamHead]  # sorted by originator id
    order: bytes
    statement_version: int = STATEMENT_VERSION  # which leaf tag (2 or 3)

    def leaf(self) -> bytes:
        key = self.key.encode()
        tag = _MEMBERS[self.statement_version]
        parts = [tag, len(key).to_bytes(4, "big"), key, len(self.heads).to_bytes(8, "big")]
        for head in self.heads:
            parts.append(head.originator_id.bytes)
            parts.append(head.version.to_bytes(8, "big", signed=True))
            parts.append(head.stream_hash)
        parts.append(self.order)
        return merkle.leaf_hash(b"".join(parts))


def sessions_root(members: list[SessionMembers]) -> bytes:
    """The Merkle root over the sessions' leaves (``members`` sorted by key)."""
    return merkle.root([member.leaf() for member in members])


def sort_members(members: list[SessionMembers]) -> list[SessionMembers]:
    return sorted(members, key=lambda member: member.key.encode())


@dataclass(frozen=True)
class Statement:
    log_size: int
    log_hash: bytes
    heads_root: bytes
    time: str  # ISO 8601, UTC
    key_id: str
    sessions_root: bytes | None = None
    """Signed by a v2 statement: which streams belong to each session, and their order."""
    heads_count: int | None = None
    """Signed by a v3 statement: the leaves under ``heads_root`` (streams)."""
    sessions_count: int | None = None
    """Signed by a v3 statement: the leaves under ``sessions_root`` (sessions)."""
    shards_root: bytes | None = None
    """Signed by a v4 statement (ADR 0067): the Merkle root over the shards' heads."""
    shards_count: int | None = None
    """Signed by a v4 statement: the leaves under ``shards_root`` (shards)."""

    @property
    def version(self) -> int:
        if self.sessions_root is None:
            return 1
        if self.heads_count is None:
            return 2
        return 3 if self.shards_root is None else 4

    def signed_bytes(self) -> bytes:
        prefix = _STATEMENTS[self.version]
        return prefix + json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    def to_json(self) -> dict[str, object]:
        shown: dict[str, object] = {
            "log_size": self.log_size,
            "log_hash": self.log_hash.hex(),
            "heads_root": self.heads_root.hex(),
            "time": self.time,
            "key_id": self.key_id,
        }
        if self.sessions_root is not None:
            shown["sessions_root"] = self.sessions_root.hex()
        if self.heads_count is not None:
            shown["version"] = self.version
            shown["heads_count"] = self.heads_count
            shown["sessions_count"] = self.sessions_count
        if self.shards_root is not None:
            shown["shards_root"] = self.shards_root.hex()
            shown["shards_count"] = self.shards_count
        return shown

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Statement:
        """The statement a file shows, refusing any field its version does not sign."""
        if "version" in data:
            # Only a version-3 or -4 statement has (and signs) the field.
            version = data["version"]
            if type(version) is not int or version not in (3, 4):
                raise ValueError(
                    f"a statement's version field is 3 or 4 (or absent), not {version!r}"
                )
        else:
            version = 2 if "sessions_root" in data else 1
        fields = _FIELDS[version]
        unsigned = sorted(set(data) - fields)
        if unsigned:
            raise ValueError(
                f"the statement has fields its signature does not cover: {', '.join(unsigned)}"
            )
        missing = sorted(fields - set(data))
        if missing:
            raise ValueError(f"a version {version} statement needs {', '.join(missing)}")
        v3 = version >= 3
        v4 = version == 4
        return cls(
            log_size=_count(data, "log_size"),
            log_hash=_hash(data["log_hash"]),
            heads_root=_hash(data["heads_root"]),
            time=_text(data, "time"),
            key_id=_text(data, "key_id"),
            sessions_root=None if "sessions_root" not in data else _hash(data["sessions_root"]),
            heads_count=_count(data, "heads_count") if v3 else None,
            sessions_count=_count(data, "sessions_count") if v3 else None,
            shards_root=_hash(data["shards_root"]) if v4 else None,
            shards_count=_count(data, "shards_count") if v4 else None,
        )


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement and the key that signed it (raw Ed25519 public key bytes)."""

    statement: Statement
    public_key: bytes
    signature: bytes


def _count(data: dict[str, object], name: str) -> int:
    value = data[name]
    # A 64-bit count, as the stores and the chain's encodings hold it.
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ValueError(f"{name} must be a count (0 to 2^63-1)")
    return value


def _text(data: dict[str, object], name: str) -> str:
    value = data[name]
    # Printable ASCII but quote and backslash: the signed bytes then hold it exactly as
    # its characters, with no escape to agree on.
    if not isinstance(value, str) or not all(" " <= c <= "~" and c not in '"\\' for c in value):
        raise ValueError(f"{name} must be printable ASCII text, without quote or backslash")
    return value


def _hash(value: object) -> bytes:
    return parse_hash(value, "a hash")


_HEX = re.compile(f"[0-9a-f]{{{2 * HASH_SIZE}}}")


def parse_hash(value: object, what: str) -> bytes:
    """A hash as files write it: exactly 64 lowercase hex digits (one spelling only)."""
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise ValueError(f"{what} is {HASH_SIZE} bytes as 64 lowercase hex digits")
    return bytes.fromhex(value)
