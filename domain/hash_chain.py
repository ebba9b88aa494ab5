"""The hash chain over the event log: the rule only, no storage (see docs/adr/0008).

Every stored event gets two hashes. Its *stream hash* covers the event's stored bytes
and the stream hash of the previous version of the same aggregate; its *log hash*
covers its position in the log, its stream hash and the log hash of the record before it
in the log. Changing, removing, adding or moving any record therefore changes a hash
that a later record (or the recorded head) depends on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from uuid import UUID

HASH_SIZE = 32
# The predecessor of a stream's first event and of the log's first record.
GENESIS = bytes(HASH_SIZE)
_STREAM = b"sessionwire/stream/v1\x00"
_LOG = b"sessionwire/log/v1\x00"


@dataclass(frozen=True)
class RecordContent:
    """One stored event as the store keeps it: its stream coordinates, topic and bytes."""

    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


@dataclass(frozen=True)
class ChainLink:
    """The two hashes recorded for one event at one log position."""

    notification_id: int
    originator_id: UUID
    originator_version: int
    stream_hash: bytes
    log_hash: bytes


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


def chain(
    records: list[tuple[int, RecordContent]],
    *,
    previous_log: bytes,
    previous_streams: dict[UUID, bytes],
) -> list[ChainLink]:
    """Links for records appended together, in log order.

    ``previous_streams`` holds the stream hash before the first of these records for each
    stream that already has events (absent: the stream starts here).
    """
    streams = dict(previous_streams)
    links: list[ChainLink] = []
    for notification_id, record in records:
        own = stream_hash(streams.get(record.originator_id, GENESIS), record)
        streams[record.originator_id] = own
        previous_log = log_hash(previous_log, notification_id, own)
        links.append(
            ChainLink(
                notification_id=notification_id,
                originator_id=record.originator_id,
                originator_version=record.originator_version,
                stream_hash=own,
                log_hash=previous_log,
            )
        )
    return links
