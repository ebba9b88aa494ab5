"""RFC 6962 Merkle trees (domain/merkle.py): the tree equals the RFC's recursive
definition, every inclusion proof verifies, and a proof for anything else does not."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st
from sessionwire.domain import merkle


def rfc_root(leaves: list[bytes]) -> bytes:
    """MTH straight from RFC 6962 §2.1 (recursive split at the largest power of two)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return merkle.node_hash(rfc_root(leaves[:k]), rfc_root(leaves[k:]))


def rfc_path(leaves: list[bytes], m: int) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if m < k:
        return [*rfc_path(leaves[:k], m), rfc_root(leaves[k:])]
    return [*rfc_path(leaves[k:], m - k), rfc_root(leaves[:k])]


def leaves_of(count: int) -> list[bytes]:
    return [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(count)]


def test_a_known_root() -> None:
    # One leaf: the leaf hash itself; the empty tree: SHA-256 of nothing (RFC 6962 §2.1).
    assert merkle.root([]).hex() == hashlib.sha256(b"").hexdigest()
    assert merkle.leaf_hash(b"").hex() == (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    )
    assert merkle.root([merkle.leaf_hash(b"")]) == merkle.leaf_hash(b"")


@given(st.integers(min_value=1, max_value=70))
def test_root_and_every_path_equal_the_rfc_definition(count: int) -> None:
    leaves = leaves_of(count)
    tree = merkle.Tree(leaves)
    assert tree.root() == rfc_root(leaves)
    for index in range(count):
        proof = tree.inclusion_proof(index)
        assert proof == rfc_path(leaves, index)
        assert merkle.root_from_proof(leaves[index], index, count, proof) == tree.root()


@given(st.integers(min_value=2, max_value=70), st.data())
def test_a_proof_for_another_leaf_or_index_fails(count: int, data: st.DataObject) -> None:
    leaves = leaves_of(count)
    tree = merkle.Tree(leaves)
    index = data.draw(st.integers(min_value=0, max_value=count - 1))
    proof = tree.inclusion_proof(index)
    other = data.draw(st.integers(min_value=0, max_value=count - 1).filter(lambda i: i != index))
    assert merkle.root_from_proof(leaves[other], index, count, proof) != tree.root()
    assert merkle.root_from_proof(leaves[index], other, count, proof) != tree.root()
    if proof:
        bent = [*proof[:-1], merkle.leaf_hash(b"x")]
        assert merkle.root_from_proof(leaves[index], index, count, bent) != tree.root()
    assert merkle.root_from_proof(leaves[index], count, count, proof) is None
