"""The hashing rule of the chain (sessionwire.domain.hash_chain), with no store."""

from __future__ import annotations

from uuid import UUID

from sessionwire.domain.hash_chain import (
    GENESIS,
    LogHead,
    RecordContent,
    chain,
    log_hash,
    seal,
    stream_hash,
    stream_links,
)

A = UUID(int=1)
B = UUID(int=2)


def record(originator: UUID, version: int, state: bytes = b'{"text":"hi"}') -> RecordContent:
    return RecordContent(originator, version, "sessionwire.domain.session:Session.X", state)


def test_each_stream_chains_its_own_versions_and_the_log_chains_every_record() -> None:
    records = [(1, record(A, 1)), (2, record(B, 1)), (3, record(A, 2))]
    links = chain(records, head=LogHead(), previous_streams={})

    assert [link.notification_id for link in links] == [1, 2, 3]
    assert links[0].stream_hash == stream_hash(GENESIS, record(A, 1))
    assert links[1].stream_hash == stream_hash(GENESIS, record(B, 1))
    assert links[2].stream_hash == stream_hash(links[0].stream_hash, record(A, 2))
    assert links[0].log_hash == log_hash(GENESIS, 1, links[0].stream_hash)
    assert links[2].log_hash == log_hash(links[1].log_hash, 3, links[2].stream_hash)


def test_appending_in_two_saves_gives_the_same_links_as_in_one() -> None:
    records = [(1, record(A, 1)), (2, record(A, 2)), (5, record(A, 3))]
    whole = chain(records, head=LogHead(), previous_streams={})
    first = chain(records[:2], head=LogHead(), previous_streams={})
    rest = chain(
        records[2:],
        head=LogHead(2, first[-1].log_hash or GENESIS),
        previous_streams={A: first[-1].stream_hash},
    )
    assert [*first, *rest] == whole


def test_chaining_is_linking_the_streams_then_sealing_in_log_order() -> None:
    # The one-writer path (chain) and the seal-behind path (stream_links, then seal) must
    # give every record the same hashes and place.
    records = [(4, record(A, 3)), (5, record(B, 1)), (7, record(A, 4))]
    head, previous = LogHead(3, b"\x02" * 32), {A: b"\x01" * 32}
    links = stream_links(records, previous_streams=previous)
    seals = seal(head, [(link.notification_id, link.stream_hash) for link in links])

    chained = chain(records, head=head, previous_streams=previous)

    assert [(c.notification_id, c.stream_hash) for c in chained] == [
        (link.notification_id, link.stream_hash) for link in links
    ]
    assert [(c.notification_id, c.log_seq, c.log_hash) for c in chained] == [
        (s.notification_id, s.log_seq, s.log_hash) for s in seals
    ]
    assert [c.log_seq for c in chained] == [4, 5, 6]


def test_any_change_to_a_record_or_its_place_changes_its_hashes() -> None:
    original = record(A, 2)
    stream = stream_hash(GENESIS, original)
    variants = [
        record(A, 2, b'{"text":"hI"}'),
        record(B, 2),
        record(A, 3),
        RecordContent(A, 2, "sessionwire.domain.session:Session.Y", original.state),
    ]
    assert all(stream_hash(GENESIS, v) != stream for v in variants)
    assert stream_hash(b"\x01" * 32, original) != stream
    assert log_hash(GENESIS, 7, stream) != log_hash(GENESIS, 8, stream)
    assert len(stream) == len(GENESIS) == 32
