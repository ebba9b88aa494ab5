"""Merkle trees with RFC 6962's hashing (Certificate Transparency, RFC 9162 §2.1).

The signed checkpoint commits to every stream head through one root (docs/adr/0016):
a bundle then proves its streams' heads with log₂(streams) hashes instead of carrying
the whole log. Leaf and node hashes are domain-separated (``0x00`` / ``0x01`` prefixes),
so a node can never pass for a leaf.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

_LEAF = b"\x00"
_NODE = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(_LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than ``size`` (size >= 2)."""
    return 1 << ((size - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """The Merkle tree hash of the leaf hashes ``leaves`` (the empty tree: SHA-256 of "")."""
    return Tree(leaves).root()


class Tree:
    """Every level of the tree over ``leaves`` (leaf hashes), kept for O(log n) proofs.

    Built bottom-up with a lone last node carried up unchanged, which gives RFC 6962's
    tree (the largest power of two on the left at every split)."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.size = len(leaves)
        self.levels: list[list[bytes]] = [list(leaves)]
        while len(self.levels[-1]) > 1:
            level = self.levels[-1]
            paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                paired.append(level[-1])
            self.levels.append(paired)

    def root(self) -> bytes:
        return self.levels[-1][0] if self.size else hashlib.sha256(b"").digest()

    def inclusion_proof(self, index: int) -> list[bytes]:
        """The audit path of leaf ``index`` (RFC 6962 §2.1.1), leaf level first."""
        if not 0 <= index < self.size:
            raise IndexError(f"leaf {index} of a tree of {self.size}")
        proof: list[bytes] = []
        for level in self.levels[:-1]:
            sibling = index ^ 1
            # A lone last node has no sibling at this level: it is carried up as it is.
            if sibling < len(level):
                proof.append(level[sibling])
            index //= 2
        return proof


def root_from_proof(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    """The root that ``proof`` leads to from leaf hash ``leaf`` at ``index`` in a tree of
    ``size`` leaves, or None when the proof cannot belong to such a tree (RFC 9162
    §2.1.3.2)."""
    if not 0 <= index < size:
        return None
    fn, sn = index, size - 1
    result = leaf
    for sibling in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    return result if sn == 0 else None
