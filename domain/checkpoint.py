"""A checkpoint: the statement signed about the log at one moment (docs/adr/0016 §3).

``log_size`` and ``log_hash`` are the sealed log's head (the linear chain anchors a
whole-store export); ``heads_root`` is the Merkle root over every stream's head at that
size, one leaf per stream sorted by originator id (a session bundle proves its streams'
heads against it). The signature covers ``signed_bytes()``, a canonical encoding, so a
verifier never depends on how a file happened to format the statement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from uuid import UUID

from sessionwire.domain import merkle
from sessionwire.domain.hash_chain import HASH_SIZE

_STATEMENT = b"sessionwire/checkpoint/v1\n"
_HEAD = b"sessionwire/stream-head/v1\x00"


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


@dataclass(frozen=True)
class Statement:
    log_size: int
    log_hash: bytes
    heads_root: bytes
    time: str  # ISO 8601, UTC
    key_id: str

    def signed_bytes(self) -> bytes:
        return (
            _STATEMENT + json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()
        )

    def to_json(self) -> dict[str, object]:
        return {
            "log_size": self.log_size,
            "log_hash": self.log_hash.hex(),
            "heads_root": self.heads_root.hex(),
            "time": self.time,
            "key_id": self.key_id,
        }

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
