"""A checkpoint: the statement signed about the log at one moment (docs/adr/0016 §3).

``log_size`` and ``log_hash`` are the sealed log's head (the linear chain anchors a
whole-store export); ``heads_root`` is the Merkle root over every stream's head at that
size, one leaf per stream sorted by originator id (a session bundle proves its streams'
heads against it). The signature covers ``signed_bytes()``, a canonical encoding, so a
verifier never depends on how a file happened to format the statement.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from sessionwire.domain import merkle
from sessionwire.domain.hash_chain import HASH_SIZE

_STATEMENT = b"sessionwire/checkpoint/v1\n"
# A statement that also signs the sessions' membership (ADR 0036 §7).
_STATEMENT_V2 = b"sessionwire/checkpoint/v2\n"
_HEAD = b"sessionwire/stream-head/v1\x00"
_MEMBERS = b"sessionwire/session-members/v1\x00"
_ORDER = b"sessionwire/session-order/v1\x00"


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


def heads_root(heads: list[StreamHead]) -> bytes:
    """The Merkle root over ``heads`` (which must be sorted by originator id)."""
    return merkle.root([head.leaf() for head in heads])


def sort_heads(heads: list[StreamHead]) -> list[StreamHead]:
    return sorted(heads, key=lambda head: head.originator_id.bytes)


def order_digest(events: Iterable[tuple[int, UUID, int]]) -> bytes:
    """The order of a session's events across its streams: ``(log_seq, stream, version)``
    of each, in log order. A bundle's events must give the signed digest."""
    digest = hashlib.sha256(_ORDER)
    for log_seq, originator_id, version in events:
        digest.update(log_seq.to_bytes(8, "big", signed=True))
        digest.update(originator_id.bytes)
        digest.update(version.to_bytes(8, "big", signed=True))
    return digest.digest()


@dataclass(frozen=True)
class SessionMembers:
    """Which streams belong to a session at a checkpoint, their heads, and the order of
    their events: one leaf of the checkpoint's ``sessions_root`` (ADR 0036 §7)."""

    key: str
    heads: list[StreamHead]  # sorted by originator id
    order: bytes

    def leaf(self) -> bytes:
        key = self.key.encode()
        parts = [_MEMBERS, len(key).to_bytes(4, "big"), key, len(self.heads).to_bytes(8, "big")]
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

    def signed_bytes(self) -> bytes:
        prefix = _STATEMENT if self.sessions_root is None else _STATEMENT_V2
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
        return shown

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Statement:
        log_size = data["log_size"]
        # A 64-bit count, as the stores and the chain's encodings hold it.
        if not isinstance(log_size, int) or not 0 <= log_size < 2**63:
            raise ValueError("log_size must be a count (0 to 2^63-1)")
        return cls(
            log_size=log_size,
            log_hash=_hash(data["log_hash"]),
            heads_root=_hash(data["heads_root"]),
            time=str(data["time"]),
            key_id=str(data["key_id"]),
            sessions_root=None if "sessions_root" not in data else _hash(data["sessions_root"]),
        )


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement and the key that signed it (raw Ed25519 public key bytes)."""

    statement: Statement
    public_key: bytes
    signature: bytes


def _hash(value: object) -> bytes:
    raw = bytes.fromhex(str(value))
    if len(raw) != HASH_SIZE:
        raise ValueError(f"a hash is {HASH_SIZE} bytes of hex")
    return raw
