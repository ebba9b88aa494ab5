"""``audit verify FILE``: check an export or a session bundle alone, with no store.

Three things are checked (docs/adr/0016-chain-v2-sealed-log-and-signed-checkpoints.md §4):

- **The stream links.** Every event's stream hash must follow from its stored bytes and
  its stream's previous version's hash, and each stream's versions must run 1, 2, 3, …
  in file order. That finds an altered, inserted, deleted or reordered event and names
  it: event index (its place among the file's events), line, stream and version.
- **The anchor.** The checkpoint's Ed25519 signature, optionally by a trusted key and
  over an expected head. A session bundle proves each stream's head under the
  checkpoint's ``heads_root``: a stream that ends before its proven head was cut short,
  one whose event at that version hashes otherwise was rewritten. A whole-store export
  carries the log chain: its log hash at the checkpoint's size must be the signed one.
  Events after the checkpoint are *unanchored*: their links are checked, but nothing
  signed covers them yet.
- **The shards** (a store distributed by session, ADR 0067): a whole-store export's sealed
  records give their shard ids; each shard's chain is followed along the sealed log, and
  a version-4 checkpoint's ``shards_root`` must be the Merkle root over the shards' heads
  at its size. Once a record has a shard, every later sealed one must.
- **The membership** (a checkpoint that signs ``sessions_root``, ADR 0036 §7): a session
  bundle's ``members`` line must lead to it and name the file's session; every signed
  member stream must be in the file up to its signed head, no other stream may have an
  event the checkpoint covers, and the covered events' order across streams must give
  the signed digest. So a bundle cannot lose or gain a stream, be relabelled, or have
  its interleaving rewritten, whatever proof lines it keeps.
- **The file.** Garbled lines, a missing or wrong end line (a file cut short), text
  after it.

Memory: a few fields per event in arrays, never its bytes (about 0.2 KB an event in
all: docs/benchmarks.md), and one entry per stream.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple
from uuid import UUID

from pydantic import ValidationError
from sessionwire.application.audit.checkpoint import public_key_text, signature_holds
from sessionwire.application.audit.export import (
    ExportCheckpoint,
    ExportedEvent,
    ExportEnd,
    ExportHeader,
    ExportMembers,
    ExportProof,
    line_problem,
    log_order,
    proof_path,
    sealed_seq,
)
from sessionwire.application.audit.verify import FORK_TOPICS
from sessionwire.domain import merkle
from sessionwire.domain.checkpoint import (
    Checkpoint,
    OrderedEvent,
    SessionMembers,
    ShardHead,
    Statement,
    StreamHead,
    heads_root,
    order_digest,
    shards_root,
    sort_heads,
    sort_shard_heads,
)
from sessionwire.domain.hash_chain import (
    GENESIS,
    HASH_SIZE,
    RecordContent,
    ShardChains,
    first_version,
    is_batch,
    log_hash,
    stream_hash,
)
from sessionwire.domain.session import fork_point_mismatch, session_uuid

FileFindingKind = Literal[
    "altered",
    "deleted",
    "inserted",
    "reordered",
    "truncated",
    "malformed",
    "checkpoint",
    "unanchored",
    "fork",
    "unresolved",
]


@dataclass(frozen=True)
class FileFinding:
    kind: FileFindingKind
    detail: str
    line: int | None = None
    event: int | None = None  # 1-based index among the file's event lines
    originator_id: UUID | None = None
    version: int | None = None
    notification_id: int | None = None
    session_key: str | None = None  # when the stream is the bundle's session's own

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "line": self.line,
            "event": self.event,
            "stream": None if self.originator_id is None else str(self.originator_id),
            "session_key": self.session_key,
            "version": self.version,
            "notification_id": self.notification_id,
            "detail": self.detail,
        }


@dataclass
class CheckpointView:
    log_size: int
    log_hash: str
    heads_root: str
    time: str
    key_id: str
    public_key: str
    signature_holds: bool
    trusted: bool | None  # None: no --trusted-key given
    version: int = 3  # the statement's: what it binds (docs/evidence-format.md §4)

    def to_json(self) -> dict[str, object]:
        return dict(vars(self))


@dataclass
class FileReport:
    scope: str = "?"
    session: str | None = None
    events: int = 0
    unchained: int = 0
    unanchored: int = 0
    checkpoint: CheckpointView | None = None
    findings: list[FileFinding] = field(default_factory=list)
    sharded: int = 0
    """Sealed records that name their shard (a distributed store's export, ADR 0067):
    bound by a version-4 statement only (docs/evidence-format.md §4)."""

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def anchored(self) -> int:
        return self.events - self.unchained - self.unanchored

    def to_json(self) -> dict[str, object]:
        return {
            "clean": self.clean,
            "scope": self.scope,
            "session": self.session,
            "events": self.events,
            "anchored": self.anchored,
            "unanchored": self.unanchored,
            "unchained": self.unchained,
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_json(),
            "findings": [finding.to_json() for finding in self.findings],
        }


class _Seen(NamedTuple):
    """One event as verify kept it: where it was, and its claimed links."""

    event: int  # 1-based index among the file's events
    line: int
    notification_id: int
    originator_id: UUID
    version: int
    stream_hash: bytes | None
    log_ordinal: int | None  # its place in the chained log (whole-store files)

    def where(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "event": self.event,
            "originator_id": self.originator_id,
            "version": self.version,
            "notification_id": self.notification_id,
        }


class _Events:
    """What verify keeps of each event, in columns: about 100 bytes an event, and no
    Python object per event (a million-event export stays around 100 MB)."""

    def __init__(self) -> None:
        self.line = array("q")
        self.position = array("q")
        self.version = array("q")
        self.stream = array("q")  # index into _Verifier.stream_ids
        self.ordinal = array("q")  # 0: not in the log chain
        self.hashes = bytearray()  # 32 bytes an event (zeros when it has none)
        self.hashed = bytearray()  # 1: it has a stream hash
        self.logs = bytearray()  # its log hash, 32 bytes (zeros when it has none)

    def add(
        self,
        line: int,
        position: int,
        version: int,
        stream: int,
        ordinal: int | None,
        own: bytes | None,
        logged: bytes | None = None,
    ) -> int:
        self.line.append(line)
        self.position.append(position)
        self.version.append(version)
        self.stream.append(stream)
        self.ordinal.append(ordinal or 0)
        self.hashes += own or GENESIS
        self.hashed.append(own is not None)
        self.logs += logged or GENESIS
        return len(self.line)

    def log_hash(self, event: int) -> bytes:
        at = event - 1
        return bytes(self.logs[at * HASH_SIZE : (at + 1) * HASH_SIZE])

    def stream_hash(self, event: int) -> bytes | None:
        at = event - 1
        return (
            bytes(self.hashes[at * HASH_SIZE : (at + 1) * HASH_SIZE]) if self.hashed[at] else None
        )


class _Stream:
    """A stream's versions as read: the event holding each (0: none yet). Sparse: a
    forged file that claims versions far apart costs an entry per event it holds, not
    one per version it claims (issue 27 finding 6: 8 MB per jump, 1.6 GB for 101 KB)."""

    __slots__ = ("at", "highest", "number", "waiting")

    def __init__(self, number: int) -> None:
        self.number = number
        self.at: dict[int, int] = {}
        self.highest = 0
        # Events whose previous version has not been read yet: their bytes, until it is.
        self.waiting: dict[int, RecordContent] = {}

    def event(self, version: int) -> int:
        return self.at.get(version, 0)

    def put(self, version: int, event: int) -> None:
        self.at[version] = event
        self.highest = max(self.highest, version)

    def versions(self) -> Iterator[tuple[int, int]]:
        """(version, event) of every version read, in version order."""
        yield from sorted(self.at.items())


# A version this far past its stream's highest is not allocated for (a forged number).
MAX_JUMP = 1_000_000


class _Verifier:
    def __init__(
        self,
        trusted_key: bytes | None,
        expect_head: bytes | None,
        require_anchored: bool,
        expect_session: str | None = None,
    ) -> None:
        self.expect_session = expect_session
        self.members: tuple[int, ExportMembers] | None = None
        # A whole-store export's members lines (every session's).
        self.all_members: list[tuple[int, ExportMembers]] = []
        # The sealed event last in log order: what the end line's head must name.
        self.head: tuple[int, int, bytes, int | None] | None = None  # (order, position, ..)
        self.trusted_key = trusted_key
        self.expect_head = expect_head
        self.expect_seen = False
        self.require_anchored = require_anchored
        self.report = FileReport()
        self.events = _Events()
        self.streams: dict[UUID, _Stream] = {}
        self.stream_ids: list[UUID] = []
        self.chain_began = False
        # Events in file order (duplicates aside) with their place in log order, and
        # versions read late.
        self.order = array("q")
        self.ordered = array("q")
        self.late_versions: list[tuple[str, int]] = []
        self.previous_log = GENESIS
        self.last_chained = 0  # the position of the last chained event read
        self.log_hashes = bytearray()  # the claimed log hash at each chained ordinal
        self.ordinal_event = array("q")  # the event at each chained ordinal
        self.ordinal_shard = array("q")  # the shard of each chained ordinal (-1: none)
        self.sharded = False  # a chained record with a shard read: every later one needs one
        self.unsealed = 0
        self.checkpoint: Checkpoint | None = None
        self.proofs: list[tuple[int, ExportProof]] = []
        self.header: ExportHeader | None = None
        self.end: tuple[int, ExportEnd] | None = None
        # Each fork event (decision 34) with its stored bytes: few, so kept until the end.
        self.forks: list[tuple[int, bytes]] = []

    def seen(self, event: int) -> _Seen:
        events, at = self.events, event - 1
        return _Seen(
            event=event,
            line=events.line[at],
            notification_id=events.position[at],
            originator_id=self.stream_ids[events.stream[at]],
            version=events.version[at],
            stream_hash=events.stream_hash(event),
            log_ordinal=events.ordinal[at] or None,
        )

    def log_hash_at(self, ordinal: int) -> bytes:
        return bytes(self.log_hashes[(ordinal - 1) * HASH_SIZE : ordinal * HASH_SIZE])

    def found(self, kind: FileFindingKind, detail: str, **where: object) -> None:
        self.report.findings.append(FileFinding(kind, detail, **where))  # type: ignore[arg-type]

    # Lines ------------------------------------------------------------------------------

    def line(self, number: int, text: str) -> None:
        if not text.strip():
            return
        try:
            data = _DECODER.decode(text)
        except (ValueError, RecursionError) as error:
            self.found("malformed", f"not JSON: {error}", line=number)
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if self.end is not None:
            self.found("inserted", f"a {kind or 'line'} after the end line", line=number)
            return
        try:
            if self.header is None:
                if kind != "header":
                    raise ValueError(f"the first line is a {kind or 'line'}, not the header")
                self.header = ExportHeader.model_validate(data)
                self.report.scope = self.header.scope
                self.report.session = self.header.session
            elif kind == "event":
                self.event(number, ExportedEvent.model_validate(data))
            elif kind == "checkpoint":
                if self.checkpoint is not None:
                    self.found("inserted", "a second checkpoint line", line=number)
                else:
                    self.checkpoint = ExportCheckpoint.model_validate(data).to_checkpoint()
            elif kind == "proof":
                proof = ExportProof.model_validate(data)
                if self.header.scope == "all":
                    # The log chain anchors a whole-store export; a proof would be unread.
                    self.found("inserted", "a proof line in a whole-store export", line=number)
                else:
                    self.proofs.append((number, proof))
            elif kind == "members" and self.header.scope == "all":
                self.all_members.append((number, ExportMembers.model_validate(data)))
            elif kind == "members":
                if self.members is not None:
                    self.found("inserted", "a second members line", line=number)
                else:
                    self.members = (number, ExportMembers.model_validate(data))
            elif kind == "end":
                self.end = (number, ExportEnd.model_validate(data))
            else:
                self.found("malformed", f"unknown line type {kind!r}", line=number)
        except (ValueError, ValidationError) as error:
            what = "the header" if self.header is None else f"a {kind or 'bundle'} line"
            reason = line_problem(error)
            self.found("malformed", f"not {what} of an export: {reason}", line=number)
            if self.header is None:
                self.header = ExportHeader(scope="all")  # go on: locate what follows

    def event(self, number: int, line: ExportedEvent) -> None:
        report = self.report
        # Read first: a line that is no record is malformed, not a counted event.
        record, link = line.to_record()
        if line.shard is not None and self.header is not None and self.header.scope == "session":
            raise ValueError("a bundle's event carries no shard: nothing in a bundle binds one")
        report.events += 1
        index = report.events
        content = record.content
        oid, version = content.originator_id, content.originator_version
        where = {
            "line": number,
            "event": index,
            "originator_id": oid,
            "version": version,
            "notification_id": record.notification_id,
        }
        stream = self.streams.get(oid)
        if stream is None:
            stream = self.streams[oid] = _Stream(len(self.stream_ids))
            self.stream_ids.append(oid)
        own = None if link is None else link.stream_hash
        if version < 1 or version > stream.highest + MAX_JUMP:
            self.events.add(number, record.notification_id, version, stream.number, None, own)
            self.found("altered", f"version {version} cannot follow {stream.highest}", **where)
            return
        # A batch of messages takes the versions of its messages, up to its own.
        lowest = first_version(content) if is_batch(content.topic) else version
        if lowest < 1:
            # More messages than versions: a forged count (and no walk over its range).
            self.events.add(number, record.notification_id, version, stream.number, None, own)
            self.found("altered", f"a batch of more messages than its version {version}", **where)
            return
        first = next((e for v in range(lowest, version + 1) if (e := stream.event(v))), 0)
        if first:
            self.events.add(number, record.notification_id, version, stream.number, None, own)
            self.found(
                "inserted",
                f"a second version {version} of this stream (the first is event {first})",
                **where,
            )
            return
        place = log_order(record.notification_id, link)
        self.order.append(place)
        self.ordered.append(index)
        logged = None if link is None else link.log_hash
        if logged is not None and (self.head is None or place > self.head[0]):
            self.head = (
                place,
                record.notification_id,
                logged,
                None if link is None else link.log_seq,
            )
        if version < stream.highest:
            # Kept until the end: the log-order check may name this event already.
            self.late_versions.append(
                (
                    f"version {version} comes after version {stream.highest} of its stream "
                    f"(event {stream.event(stream.highest)})",
                    index,
                )
            )
        ordinal: int | None = None
        if link is None:
            if self.chain_began:
                self.found(
                    "altered",
                    "no chain hashes, though the chain began before this event",
                    **where,
                )
            else:
                report.unchained += 1  # written before the store kept a chain (ADR 0008)
        else:
            self.chain_began = True
            if link.log_hash is None:
                self.unsealed += 1  # not sealed when exported: its stream link alone is checked
            elif self.header is not None and self.header.scope == "all":
                before = self.last_chained
                self.last_chained = record.notification_id
                ordinal, holds = self.log_link(
                    record.notification_id, link.stream_hash, link.log_hash, index
                )
                self.ordinal_shard.append(-1 if line.shard is None else line.shard)
                if line.shard is not None:
                    self.sharded = True
                    report.sharded += 1
                elif self.sharded:
                    self.found(
                        "altered",
                        "a sealed record with no shard, though the shards' logs began before it",
                        **where,
                    )
                if link.log_seq is not None and link.log_seq != ordinal:
                    self.found(
                        "reordered",
                        f"log_seq {link.log_seq}, but this is record {ordinal} of the file's "
                        "log chain",
                        **where,
                    )
                if not holds:
                    self.found(
                        "deleted",
                        f"the log chain breaks between position {before} and this event: "
                        "records there were removed, added or rewritten",
                        **where,
                    )
        self.events.add(
            number, record.notification_id, version, stream.number, ordinal, own, logged
        )
        for taken in range(lowest, version + 1):
            stream.put(taken, index)
        if content.topic in FORK_TOPICS:
            self.forks.append((index, content.state))
        if own is not None:
            if lowest == 1 or stream.event(lowest - 1):
                self.check_link(stream, version, content)
            else:
                stream.waiting[lowest] = content
        follower = stream.waiting.pop(version + 1, None)
        if follower is not None:
            self.check_link(stream, follower.originator_version, follower)

    def log_link(self, position: int, own: bytes, claimed: bytes, event: int) -> tuple[int, bool]:
        """Follow the log chain: the event's ordinal, and whether its link holds."""
        expected = log_hash(self.previous_log, position, own)
        self.previous_log = claimed  # go on from the claimed hash: one finding per break
        self.log_hashes += claimed
        self.ordinal_event.append(event)
        self.expect_seen = self.expect_seen or claimed == self.expect_head
        return len(self.ordinal_event), expected == claimed

    def check_link(self, stream: _Stream, version: int, content: RecordContent) -> None:
        seen = self.seen(stream.event(version))
        previous = stream.event(first_version(content) - 1)
        before = (previous and self.events.stream_hash(previous)) or GENESIS
        if stream_hash(before, content) != seen.stream_hash:
            self.found(
                "altered",
                "the event's bytes or its stream hash differ from the ones chained here",
                **seen.where(),
            )

    # The end ---------------------------------------------------------------------------

    def finish(self, last_line: int) -> FileReport:
        if self.header is None:
            self.found("truncated", "the file is empty")
            return self.report
        self.out_of_order()
        self.gaps()
        if self.end is None:
            self.found(
                "truncated",
                f"the file is cut short: no end line after line {last_line} "
                f"({self.report.events} events read)",
                line=last_line,
            )
        elif self.end[1].events != self.report.events:
            self.found(
                "truncated" if self.end[1].events > self.report.events else "inserted",
                f"the end line counts {self.end[1].events} events, the file holds "
                f"{self.report.events}",
                line=self.end[0],
            )
        if self.expect_session is not None and self.header.session != self.expect_session:
            self.found(
                "checkpoint",
                f"the file is the bundle of {self.header.session or 'the whole store'}, "
                f"not of {self.expect_session}",
            )
        self.anchor()
        # Checked last, like the order: a finding above already explains a difference.
        if self.end is not None and not self.report.findings:
            self.end_head(*self.end)
        if self.header.scope == "all":
            self.fork_points()
        if self.require_anchored and self.report.unanchored:
            self.found(
                "unanchored",
                f"{self.report.unanchored} event(s) that no checkpoint covers (--require-anchored)",
            )
        session = self.report.session
        if session is not None:
            own = session_uuid(session)
            self.report.findings = [
                replace(f, session_key=session) if f.originator_id == own else f
                for f in self.report.findings
            ]
        return self.report

    def end_head(self, number: int, end: ExportEnd) -> None:
        """The end line's head must be the file's: its sealed event last in log order
        (position, log hash, log_seq), or none when it has no sealed event."""
        named = (end.head_notification_id, end.head_log_hash, end.head_log_seq)
        head = self.head
        actual = (None, None, None) if head is None else (head[1], head[2].hex(), head[3])
        if named == actual:
            return
        # A head past the file's last sealed event: the file lost its end.
        beyond = end.head_log_seq is not None and (
            head is None or head[3] is None or end.head_log_seq > head[3]
        )
        self.found(
            "truncated" if beyond else "altered",
            f"the end line names head {_head_text(named)}; the file's events end at "
            f"{_head_text(actual)}",
            line=number,
        )

    def fork_points(self) -> None:
        """Each fork's recorded point against its source's stream as this whole-store file
        holds it (docs/evidence-format.md §5.2 step 7). A bundle holds one session's
        streams, so there the reference is checked across two files (§2.7)."""
        for event, state in self.forks:
            where = self.seen(event).where()
            point = _fork_point(state)
            if point is None:
                self.found("fork", "a fork event whose state holds no readable fork point", **where)
                continue
            source_key, version, record_version, recorded = point
            stream = self.streams.get(session_uuid(source_key))
            if stream is None:
                self.found(
                    "unresolved",
                    f"forked from {source_key!r}, whose stream the file does not hold: its "
                    "fork point cannot be checked",
                    **where,
                )
                continue
            held = stream.event(record_version)
            if not held or self.events.version[held - 1] != record_version:
                problem: str | None = (
                    f"its source's stream holds no event at version {record_version}"
                )
            else:
                first = record_version  # the lowest version the event holds (a batch: several)
                while first > 1 and stream.event(first - 1) == held:
                    first -= 1
                problem = fork_point_mismatch(
                    version, recorded, first, record_version, self.events.stream_hash(held)
                )
            if problem is not None:
                self.found("fork", f"fork point {source_key} v{version}: {problem}", **where)

    def out_of_order(self) -> None:
        """Name the events out of log order: those outside the longest run of increasing
        positions, so one moved event is named, not the neighbours it landed between."""
        kept = set(_increasing(self.order))
        named: set[UUID] = set()  # streams with an event named out of log order
        for index, event in enumerate(self.ordered):
            if index in kept:
                continue
            seen = self.seen(event)
            named.add(seen.originator_id)
            self.found(
                "reordered",
                f"log position {seen.notification_id} is out of log order (moved from "
                "elsewhere in the file)",
                **seen.where(),
            )
        for detail, event in self.late_versions:
            seen = self.seen(event)
            # The positions already name the move (unless they were renumbered too).
            if seen.originator_id not in named:
                self.found("reordered", detail, **seen.where())
        self.report.findings.sort(key=lambda f: (f.event is None, f.event or 0, f.line or 0))

    def gaps(self) -> None:
        for stream in self.streams.values():
            previous = 0
            for version, event in stream.versions():
                if version > previous + 1:
                    missing = previous + 1
                    span = (
                        f"version {missing}"
                        if missing == version - 1
                        else f"versions {missing}-{version - 1}"
                    )
                    self.found(
                        "deleted",
                        f"{span} of this stream missing before this event",
                        **self.seen(event).where(),
                    )
                previous = version

    def anchor(self) -> None:
        report = self.report
        chained = report.events - report.unchained
        checkpoint = self.checkpoint
        if checkpoint is None:
            report.unanchored = chained
            if self.trusted_key is not None or self.expect_head is not None:
                self.found("checkpoint", "the file carries no checkpoint to check against")
            return
        statement = checkpoint.statement
        # The header read (or, when it was malformed, the whole-store reading it falls
        # back to), not the report's scope, which says what the header claimed.
        whole = self.header is None or self.header.scope == "all"
        holds = signature_holds(checkpoint)
        trusted = None if self.trusted_key is None else checkpoint.public_key == self.trusted_key
        report.checkpoint = CheckpointView(
            log_size=statement.log_size,
            log_hash=statement.log_hash.hex(),
            heads_root=statement.heads_root.hex(),
            time=statement.time,
            key_id=statement.key_id,
            public_key=public_key_text(checkpoint.public_key),
            signature_holds=holds,
            trusted=trusted,
            version=statement.version,
        )
        if not holds:
            self.found("checkpoint", "the checkpoint's signature does not hold")
        if trusted is False:
            self.found(
                "checkpoint",
                f"the checkpoint is signed by key {statement.key_id}, not by the trusted key",
            )
        if self.expect_head is not None and statement.log_hash != self.expect_head:
            extends = whole and self.expect_seen
            if not extends:
                self.found(
                    "checkpoint",
                    f"the expected head {self.expect_head.hex()} is not the checkpoint's "
                    f"({statement.log_hash.hex()})"
                    + (" nor in the file's log chain" if whole else ""),
                )
        if whole:
            self.anchor_log(checkpoint)
        else:
            self.anchor_streams(checkpoint)

    def anchor_log(self, checkpoint: Checkpoint) -> None:
        statement = checkpoint.statement
        size = statement.log_size
        chained = len(self.ordinal_event)
        if chained < size:
            self.found(
                "truncated",
                f"the checkpoint signs a log of {size} records; the file chains {chained}",
            )
            return
        self.report.unanchored = chained - size + self.unsealed
        if size == 0:
            return
        at = self.seen(self.ordinal_event[size - 1]).where()
        if self.log_hash_at(size) != statement.log_hash:
            self.found(
                "altered",
                f"the log hash at record {size} is not the signed one: the log was rewritten "
                "at or before this event",
                **at,
            )
        heads = self.heads_at(size)
        if heads_root(heads) != statement.heads_root or statement.heads_count not in (
            None,
            len(heads),
        ):
            self.found(
                "altered",
                "the stream heads at the checkpoint are not the signed ones (heads_root)",
                **at,
            )
        if statement.shards_root is not None:
            self.anchor_shards(statement, at)
        # Checked once the log holds: a rewritten log already explains any difference.
        if not self.report.findings:
            self.anchor_all_members(statement, heads)

    def shard_heads_at(self, size: int) -> list[ShardHead]:
        """Each shard's head after the first ``size`` records of the log: its chain
        followed along them (docs/evidence-format.md §3.8), from the claimed hashes."""
        chains = ShardChains()
        for ordinal in range(1, size + 1):
            shard = self.ordinal_shard[ordinal - 1]
            if shard >= 0:
                event = self.ordinal_event[ordinal - 1]
                own = self.events.stream_hash(event)
                assert own is not None  # a chained record has its stream hash
                chains.follow(shard, self.events.position[event - 1], own)
        return sort_shard_heads(
            [ShardHead(shard, head.seq, head.log_hash) for shard, head in chains.heads.items()]
        )

    def anchor_shards(self, statement: Statement, at: dict[str, Any]) -> None:
        """A version-4 checkpoint's ``shards_root`` and ``shards_count`` against the
        shards' heads at its size: a shard id forged, removed or added there changes one."""
        heads = self.shard_heads_at(statement.log_size)
        if shards_root(heads) == statement.shards_root and statement.shards_count == len(heads):
            return
        self.found(
            "altered",
            "the shard heads at the checkpoint are not the signed ones (shards_root)"
            + ("" if heads else ": the file gives no record's shard"),
            **at,
        )

    def anchor_all_members(self, statement: Statement, heads: list[StreamHead]) -> None:
        """``sessions_root`` recomputed from a whole-store export's members lines: each
        proven under it, all of them there, each member head the log's head at the
        checkpoint, and each order digest the log's. Which streams belong to a session
        is the signer's claim (its timeline index), signed, not derived here."""
        lines = self.all_members
        if statement.sessions_root is None:
            if lines:
                self.found(
                    "inserted",
                    "a members line, though the checkpoint signs no sessions_root",
                    line=lines[0][0],
                )
            return
        if not lines:
            if statement.version >= 3:
                self.found(
                    "truncated",
                    "the checkpoint signs every session's membership; the file has no "
                    "members lines",
                )
            return  # a version-2 checkpoint's export carries none (ADR 0041)
        by_id = {head.originator_id: head for head in heads}
        proven: dict[int, tuple[int, SessionMembers]] = {}
        tree_size = 0
        for number, line in lines:
            if not self.member_proven(statement, number, line):
                continue
            if line.index in proven:
                self.found("inserted", f"a second members line for leaf {line.index}", line=number)
                continue
            members = line.members(statement.version)
            proven[line.index] = (number, members)
            tree_size = line.tree_size
            if session_uuid(members.key) not in {head.originator_id for head in members.heads}:
                self.found(
                    "checkpoint", "the session's own stream is not among its members", line=number
                )
            for head in members.heads:
                if by_id.get(head.originator_id) != head:
                    self.found(
                        "altered",
                        f"the signed member head (version {head.version}) is not the "
                        "stream's head in the log at the checkpoint",
                        line=number,
                        originator_id=head.originator_id,
                        version=head.version,
                    )
        if len(proven) < tree_size:
            self.found(
                "truncated",
                f"the checkpoint signs {tree_size} sessions' membership; the file has "
                f"members lines for {len(proven)}",
            )
        self.member_orders(statement, list(proven.values()))

    def member_orders(
        self, statement: Statement, members: list[tuple[int, SessionMembers]]
    ) -> None:
        """Each session's order digest recomputed from the log's first ``log_size``
        records (one pass over them)."""
        sessions_of: dict[UUID, list[int]] = {}
        for at, (_, member) in enumerate(members):
            for head in member.heads:
                sessions_of.setdefault(head.originator_id, []).append(at)
        events: list[list[OrderedEvent]] = [[] for _ in members]
        for ordinal in range(1, statement.log_size + 1):
            event = self.ordinal_event[ordinal - 1]
            oid = self.stream_ids[self.events.stream[event - 1]]
            for at in sessions_of.get(oid, ()):
                events[at].append(self.ordered_event(ordinal, event))
        for (number, member), ordered in zip(members, events, strict=True):
            if order_digest(ordered, statement_version=statement.version) != member.order:
                self.found(
                    "reordered",
                    f"the events of {member.key!r}'s streams in the log are not the signed "
                    "ones in the signed order",
                    line=number,
                )

    def heads_at(self, size: int) -> list[StreamHead]:
        """Each stream's highest version among the first ``size`` records of the log."""
        best: dict[int, tuple[int, int]] = {}  # stream -> (version, event)
        for ordinal in range(1, size + 1):
            event = self.ordinal_event[ordinal - 1]
            stream, version = self.events.stream[event - 1], self.events.version[event - 1]
            if version > best.get(stream, (0, 0))[0]:
                best[stream] = (version, event)
        heads = []
        for stream, (version, event) in best.items():
            own = self.events.stream_hash(event)
            if own is not None:
                heads.append(StreamHead(self.stream_ids[stream], version, own))
        return sort_heads(heads)

    def anchor_streams(self, checkpoint: Checkpoint) -> None:
        statement = checkpoint.statement
        proven: dict[UUID, int] = {}
        for number, proof in self.proofs:
            head = proof.head()
            oid = head.originator_id
            path = proof_path(proof.path)
            root = merkle.root_from_proof(head.leaf(), proof.index, proof.tree_size, path)
            if statement.heads_count not in (None, proof.tree_size):
                self.found(
                    "checkpoint",
                    f"this proof is for a tree of {proof.tree_size} stream heads; the "
                    f"checkpoint signs {statement.heads_count}",
                    line=number,
                    originator_id=oid,
                    version=head.version,
                )
                continue
            if root != statement.heads_root:
                self.found(
                    "checkpoint",
                    "this proof does not lead to the checkpoint's heads_root",
                    line=number,
                    originator_id=oid,
                    version=head.version,
                )
                continue
            proven[oid] = head.version
            stream = self.streams.get(oid)
            event = 0 if stream is None else stream.event(head.version)
            if stream is None or not event:
                last = None if stream is None else self.seen(stream.event(stream.highest))
                self.found(
                    "truncated",
                    f"the checkpoint proves version {head.version} of this stream; the file "
                    + (
                        "holds none of its events"
                        if stream is None
                        else f"ends it at version {stream.highest}"
                    ),
                    line=number if last is None else last.line,
                    event=None if last is None else last.event,
                    originator_id=oid,
                    version=head.version,
                )
                continue
            seen = self.seen(event)
            if seen.stream_hash != head.stream_hash:
                self.found(
                    "altered",
                    f"version {head.version} is not the one the checkpoint proves: the stream "
                    "was rewritten at or before this event",
                    **seen.where(),
                )
        # A set: a batch of messages holds several versions but is one event.
        self.report.unanchored = len(
            {
                event
                for oid, stream in self.streams.items()
                for version, event in stream.versions()
                if self.events.hashed[event - 1] and version > proven.get(oid, 0)
            }
        )
        if statement.sessions_root is not None:
            self.anchor_members(checkpoint, set(proven))

    def ordered_event(self, log_seq: int, event: int) -> OrderedEvent:
        """What the order digest takes of ``event``, sealed at ``log_seq``."""
        at = event - 1
        return OrderedEvent(
            log_seq=log_seq,
            notification_id=self.events.position[at],
            originator_id=self.stream_ids[self.events.stream[at]],
            version=self.events.version[at],
            log_hash=self.events.log_hash(event),
        )

    def covered(self, size: int) -> Iterator[tuple[int, int]]:
        """(log_seq, event) of each event the checkpoint covers (sealed, log_seq <= size)."""
        for value, event in zip(self.order, self.ordered, strict=True):
            log_seq = sealed_seq(value)
            if log_seq is not None and log_seq <= size:
                yield log_seq, event

    def member_proven(self, statement: Statement, number: int, line: ExportMembers) -> bool:
        """Whether a members line's leaf leads to the signed ``sessions_root`` (and, for
        a version-3 statement, in a tree of the signed size); a finding when not."""
        leaf = line.members(statement.version).leaf()
        path = proof_path(line.path)
        root = merkle.root_from_proof(leaf, line.index, line.tree_size, path)
        if statement.sessions_count not in (None, line.tree_size):
            detail = (
                f"the members line is for a tree of {line.tree_size} sessions; the "
                f"checkpoint signs {statement.sessions_count}"
            )
        elif root != statement.sessions_root:
            detail = "the members line does not lead to the checkpoint's sessions_root"
        else:
            return True
        self.found("checkpoint", detail, line=number)
        return False

    def anchor_members(self, checkpoint: Checkpoint, proven: set[UUID]) -> None:
        """The session's signed membership (ADR 0036 §7): which streams, their heads, and
        the order of their events up to the checkpoint. A stream whose proof line led to
        ``heads_root`` was compared with its head already (``proven``)."""
        statement = checkpoint.statement
        if self.members is None:
            self.found(
                "truncated",
                "the checkpoint signs which streams belong to each session; the file has no "
                "members line",
            )
            return
        number, line = self.members
        members = line.members(statement.version)
        if not self.member_proven(statement, number, line):
            return
        if members.key != self.report.session:
            self.found(
                "checkpoint",
                f"the file is labelled {self.report.session!r}, its signed members are "
                f"{members.key!r}'s",
                line=number,
            )
            return
        own = session_uuid(members.key)
        signed = {head.originator_id: head for head in members.heads}
        if own not in signed:
            self.found("checkpoint", "the session's own stream is not among its members")
        for head in members.heads:
            if head.originator_id in proven:
                continue
            stream = self.streams.get(head.originator_id)
            event = 0 if stream is None else stream.event(head.version)
            if stream is None or not event:
                self.found(
                    "truncated",
                    f"the checkpoint binds this stream to the session up to version "
                    f"{head.version}; the file "
                    + (
                        "holds none of its events"
                        if stream is None
                        else f"ends it at version {stream.highest}"
                    ),
                    line=number,
                    originator_id=head.originator_id,
                    version=head.version,
                )
                continue
            seen = self.seen(event)
            if seen.stream_hash != head.stream_hash:
                self.found(
                    "altered",
                    f"version {head.version} is not the one the checkpoint binds to the "
                    "session: the stream was rewritten at or before this event",
                    **seen.where(),
                )
        covered = sorted(self.covered(statement.log_size))
        foreign: set[UUID] = set()
        for _, event in covered:
            seen = self.seen(event)
            if seen.originator_id not in signed and seen.originator_id not in foreign:
                foreign.add(seen.originator_id)
                self.found(
                    "inserted",
                    "a stream that is not one of the session's at the checkpoint, with "
                    "events the checkpoint covers",
                    **seen.where(),
                )
        ordered = [
            self.ordered_event(log_seq, event)
            for log_seq, event in covered
            if self.stream_ids[self.events.stream[event - 1]] in signed
        ]
        # The order is the last check: a finding above already explains a difference.
        digest = order_digest(ordered, statement_version=statement.version)
        if digest != members.order and not self.report.findings:
            self.found(
                "reordered",
                "the session's events up to the checkpoint are not the signed ones in the "
                "signed order across its streams (moved, renumbered, added or removed)",
                line=number,
            )
        # Covered: the member events up to the checkpoint; the rest are unanchored.
        hashed = sum(1 for event in set(self.ordered) if self.events.hashed[event - 1])
        self.report.unanchored = hashed - len(ordered)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose member names are all different: with a name twice, readers
    disagree on which value counts (the last, the first, an error), so it is refused."""
    found = dict(pairs)
    if len(found) != len(pairs):
        names = [name for name, _ in pairs]
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"the member {twice!r} appears twice")
    return found


# One decoder for every line (json.loads with a hook makes one per call).
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_members)
_HASH_TEXT = re.compile(r"[0-9a-f]{64}")


def _fork_point(state: bytes) -> tuple[str, int, int, str | None] | None:
    """A fork event's point as docs/evidence-format.md §2.7 reads it: ``source_key``,
    ``version``, ``record_version``, ``stream_hash`` (None: unchained); None when the
    state holds no such point. Read from the bytes, not through the event classes, so
    it accepts exactly what the specification does."""
    try:
        data = _DECODER.decode(state.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    point = data.get("point") if isinstance(data, dict) else None
    if not isinstance(point, dict):
        return None
    key, recorded = point.get("source_key"), point.get("stream_hash")
    version, record_version = (
        _position(point.get("version")),
        _position(point.get("record_version")),
    )
    if not isinstance(key, str) or version is None or record_version is None:
        return None
    if recorded is not None and not (isinstance(recorded, str) and _HASH_TEXT.fullmatch(recorded)):
        return None
    return key, version, record_version, recorded


def _position(value: object) -> int | None:
    """A JSON integer 1 ... 2^63-1 (not a float, string or boolean), else None."""
    return value if type(value) is int and 1 <= value < 2**63 else None


def _head_text(head: tuple[int | None, str | None, int | None]) -> str:
    position, log_hash_hex, log_seq = head
    if log_hash_hex is None:
        return "none"
    return f"position {position} (log_seq {log_seq}) {log_hash_hex}"


def _increasing(positions: Sequence[int]) -> list[int]:
    """Indexes of a longest strictly increasing run of ``positions`` (patience sorting)."""
    tails: list[int] = []  # index of the smallest tail of each run length
    back = array("q")  # each index's predecessor in its run (-1: none)
    for index, position in enumerate(positions):
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            if positions[tails[middle]] < position:
                low = middle + 1
            else:
                high = middle
        back.append(tails[low - 1] if low else -1)
        if low == len(tails):
            tails.append(index)
        else:
            tails[low] = index
    run: list[int] = []
    at = tails[-1] if tails else -1
    while at >= 0:
        run.append(at)
        at = back[at]
    return run


def verify_file(
    lines: Iterable[str],
    *,
    trusted_key: bytes | None = None,
    expect_head: bytes | None = None,
    require_anchored: bool = False,
    expect_session: str | None = None,
) -> FileReport:
    """Check an export or bundle, read line by line; every problem found is located.

    ``require_anchored``: an event that no checkpoint covers (written after it, or in a
    stream the file proves nothing of) is a finding rather than only counted."""
    verifier = _Verifier(trusted_key, expect_head, require_anchored, expect_session)
    number = 0
    for number, text in enumerate(lines, start=1):
        verifier.line(number, text)
    return verifier.finish(number)
