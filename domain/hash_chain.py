"""The hash chain over the event log: the rule only, no storage (docs/adr/0008, 0016).

Every stored event gets two hashes. Its *stream hash* covers the event's stored bytes
and the stream hash of the previous version of the same aggregate; it is written with
the event. Its *log hash* covers its notification id, its stream hash and the log hash
of the record before it in the sealed log; the sealer gives it, with the record's
sequence number (``log_seq``: 1, 2, 3, ... with no gaps), once the record is final.
Changing, removing, adding or moving any record therefore changes a hash that a later
record (or the recorded head) depends on.

A store distributed by session (Citus, ADR 0067) also keeps a chain per shard: each
sealed record's *shard hash* covers the same notification id and stream hash and the
shard hash of the record before it in its shard's own log (``shard_seq``: 1, 2, 3, ... per
shard). The shard's log is the sealed log restricted to that shard, in the same order.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from uuid import UUID

HASH_SIZE = 32
# The predecessor of a stream's first event and of the log's first record.
GENESIS = bytes(HASH_SIZE)
_STREAM = b"sessionwire/stream/v1\x00"
_LOG = b"sessionwire/log/v1\x00"
_SHARD_LOG = b"sessionwire/shard-log/v1\x00"
LOG_DOMAIN = _LOG
"""What a log hash's input starts with (PostgreSQL's sealer computes it in the server)."""


@dataclass(frozen=True)
class RecordContent:
    """One stored event as the store keeps it: its stream coordinates, topic and bytes."""

    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


@dataclass(frozen=True)
class ChainLink:
    """The hashes recorded for one event: its stream link, and once sealed, its place in
    the log (``log_seq``) and its log hash."""

    notification_id: int
    originator_id: UUID
    originator_version: int
    stream_hash: bytes
    log_hash: bytes | None = None
    log_seq: int | None = None
    shard: ShardLink | None = None
    """Its place in its shard's log, on a store distributed by session (ADR 0067)."""

    @property
    def sealed(self) -> bool:
        return self.log_seq is not None


@dataclass(frozen=True)
class ShardLink:
    """A sealed record's place in its shard's own log (ADR 0067): the shard's id, the
    record's sequence number there and its shard hash."""

    shard: int
    seq: int
    shard_hash: bytes


@dataclass(frozen=True)
class LogHead:
    """The sealed log's last record: its sequence number and log hash (0, GENESIS: empty)."""

    seq: int = 0
    log_hash: bytes = GENESIS


@dataclass(frozen=True)
class Seal:
    """What sealing gives one record: its place in the log and its log hash."""

    notification_id: int
    log_seq: int
    log_hash: bytes


# The one event that takes several stream versions: a batch of transcript messages,
# stored at the version of its last message (domain.session.Session.MessagesAppended).
BATCH_TOPIC = "sessionwire.domain.session:Session.MessagesAppended"
# Its short code (storage v3, ADR 0036): a record keeps the topic it was stored with.
BATCH_CODE = "Session.MessagesAppended"


def is_batch(topic: str) -> bool:
    return topic in (BATCH_CODE, BATCH_TOPIC)


def first_version(record: RecordContent) -> int:
    """The first stream version ``record`` takes: its own, or for a batch of messages
    the version of its first message. Its stream predecessor is the version before.

    Read from the stored bytes, which the record's stream hash covers: a count that was
    edited changes the hash, so it can never hide a removed event unnoticed.
    """
    if not is_batch(record.topic):
        return record.originator_version
    # The count is the event's first field after its timestamp: read it without parsing
    # a thousand messages (the writer does this for every batch it chains).
    counted = _COUNT.match(record.state)
    if counted is not None:
        return record.originator_version - int(counted.group(1)) + 1
    try:
        count = json.loads(record.state).get("count")
    except (ValueError, AttributeError):
        return record.originator_version
    if not isinstance(count, int) or count < 1:
        return record.originator_version
    return record.originator_version - count + 1


_COUNT = re.compile(rb'\{"timestamp":"[^"]{1,40}","count":([1-9][0-9]{0,8}),')


def stream_hash(previous: bytes, record: RecordContent) -> bytes:
    """The hash of ``record`` chained to its stream predecessor's stream hash."""
    topic = record.topic.encode()
    digest = hashlib.sha256(_STREAM)
    # Fixed-size or length-prefixed fields: no two different records encode alike.
    digest.update(previous)
    digest.update(record.originator_id.bytes)
    digest.update(record.originator_version.to_bytes(8, "big", signed=True))
    digest.update(len(topic).to_bytes(4, "big"))
    digest.update(topic)
    digest.update(len(record.state).to_bytes(8, "big"))
    digest.update(record.state)
    return digest.digest()


def log_hash(previous: bytes, notification_id: int, record_stream_hash: bytes) -> bytes:
    """The hash of the record at ``notification_id`` chained to the log before it."""
    digest = hashlib.sha256(_LOG)
    digest.update(previous)
    digest.update(notification_id.to_bytes(8, "big", signed=True))
    digest.update(record_stream_hash)
    return digest.digest()


def shard_log_hash(previous: bytes, notification_id: int, record_stream_hash: bytes) -> bytes:
    """The hash of the record at ``notification_id`` chained to its shard's log before it
    (``GENESIS`` before the shard's first record)."""
    digest = hashlib.sha256(_SHARD_LOG)
    digest.update(previous)
    digest.update(notification_id.to_bytes(8, "big", signed=True))
    digest.update(record_stream_hash)
    return digest.digest()


def seal_in_shard(head: LogHead, pending: list[tuple[int, bytes]]) -> list[Seal]:
    """``seal`` for one shard's own log: records after the shard's ``head`` (its last
    ``shard_seq`` and shard hash), in the order the sealed log gives them."""
    seals: list[Seal] = []
    seq, previous = head.seq, head.log_hash
    for notification_id, own in pending:
        seq += 1
        previous = shard_log_hash(previous, notification_id, own)
        seals.append(Seal(notification_id=notification_id, log_seq=seq, log_hash=previous))
    return seals


class ShardChains:
    """Each shard's log followed along the sealed log, record by record (what a verifier
    does): the expected place of the next record of each shard, and each shard's head."""

    def __init__(self) -> None:
        self.heads: dict[int, LogHead] = {}

    def follow(self, shard: int, notification_id: int, record_stream_hash: bytes) -> ShardLink:
        """The link the next sealed record, of ``shard``, must have."""
        head = self.heads.get(shard, LogHead())
        own = shard_log_hash(head.log_hash, notification_id, record_stream_hash)
        self.heads[shard] = LogHead(head.seq + 1, own)
        return ShardLink(shard=shard, seq=head.seq + 1, shard_hash=own)


def stream_links(
    records: list[tuple[int, RecordContent]], *, previous_streams: dict[UUID, bytes]
) -> list[ChainLink]:
    """Stream links (no log hash yet) for records appended together, in version order per
    stream. ``previous_streams`` holds the stream hash before the first of these records
    for each stream that already has events (absent: the stream starts here)."""
    streams = dict(previous_streams)
    links: list[ChainLink] = []
    for notification_id, record in records:
        own = stream_hash(streams.get(record.originator_id, GENESIS), record)
        streams[record.originator_id] = own
        links.append(
            ChainLink(
                notification_id=notification_id,
                originator_id=record.originator_id,
                originator_version=record.originator_version,
                stream_hash=own,
            )
        )
    return links


def seal(head: LogHead, pending: list[tuple[int, bytes]]) -> list[Seal]:
    """Seal final records after ``head``, in the order given (the sealed order): each
    ``(notification_id, stream_hash)`` gets the next sequence number and its log hash."""
    seals: list[Seal] = []
    seq, previous = head.seq, head.log_hash
    for notification_id, own in pending:
        seq += 1
        previous = log_hash(previous, notification_id, own)
        seals.append(Seal(notification_id=notification_id, log_seq=seq, log_hash=previous))
    return seals


def chain(
    records: list[tuple[int, RecordContent]],
    *,
    head: LogHead,
    previous_streams: dict[UUID, bytes],
) -> list[ChainLink]:
    """Links for records appended together and sealed at once, in log order, after the
    sealed log's ``head`` (one writer that seals as it writes: SQLite)."""
    # stream_links then seal, in one pass: each link is made once, sealed (the writer
    # does this for every save, so no intermediate links, seals and copies).
    streams = dict(previous_streams)
    links: list[ChainLink] = []
    seq, previous = head.seq, head.log_hash
    for notification_id, record in records:
        own = stream_hash(streams.get(record.originator_id, GENESIS), record)
        streams[record.originator_id] = own
        seq += 1
        previous = log_hash(previous, notification_id, own)
        links.append(
            ChainLink(
                notification_id=notification_id,
                originator_id=record.originator_id,
                originator_version=record.originator_version,
                stream_hash=own,
                log_hash=previous,
                log_seq=seq,
            )
        )
    return links
