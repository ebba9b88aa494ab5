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
- **The file.** Garbled lines, a missing or wrong end line (a file cut short), text
  after it.

Memory: a few fields per event (no event bytes are kept), so a bundle of any size.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast
from uuid import UUID

from pydantic import ValidationError
from sessionwire.application.audit.checkpoint import public_key_text, signature_holds
from sessionwire.application.audit.export import (
    ExportCheckpoint,
    ExportedEvent,
    ExportEnd,
    ExportHeader,
    ExportProof,
)
from sessionwire.domain import merkle
from sessionwire.domain.checkpoint import Checkpoint, StreamHead, heads_root, sort_heads
from sessionwire.domain.hash_chain import GENESIS, RecordContent, log_hash, stream_hash
from sessionwire.domain.session import session_uuid

FileFindingKind = Literal[
    "altered",
    "deleted",
    "inserted",
    "reordered",
    "truncated",
    "malformed",
    "checkpoint",
    "unanchored",
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


@dataclass
class _Seen:
    """One event as verify keeps it: where it was, and its claimed links."""

    event: int
    line: int
    notification_id: int
    stream_hash: bytes | None
    log_ordinal: int | None  # its place in the chained log (whole-store files)


@dataclass
class _Stream:
    versions: dict[int, _Seen] = field(default_factory=dict)
    highest: int = 0
    # Events whose previous version has not been read yet: their bytes, until it is.
    waiting: dict[int, RecordContent] = field(default_factory=dict)


class _Verifier:
    def __init__(
        self, trusted_key: bytes | None, expect_head: bytes | None, require_anchored: bool
    ) -> None:
        self.trusted_key = trusted_key
        self.expect_head = expect_head
        self.require_anchored = require_anchored
        self.report = FileReport()
        self.streams: dict[UUID, _Stream] = {}
        self.chain_began = False
        # (position, where) of every event in file order, and versions read late.
        self.order: list[tuple[int, dict[str, Any]]] = []
        self.late_versions: list[tuple[str, dict[str, Any]]] = []
        self.previous_log = GENESIS
        self.last_chained = 0  # the position of the last chained event read
        self.log_hashes: list[bytes] = []  # the claimed log hash at each chained ordinal
        self.log_breaks = 0
        self.checkpoint: Checkpoint | None = None
        self.proofs: list[tuple[int, ExportProof]] = []
        self.header: ExportHeader | None = None
        self.end: tuple[int, ExportEnd] | None = None

    def found(self, kind: FileFindingKind, detail: str, **where: object) -> None:
        self.report.findings.append(FileFinding(kind, detail, **where))  # type: ignore[arg-type]

    # Lines ------------------------------------------------------------------------------

    def line(self, number: int, text: str) -> None:
        if not text.strip():
            return
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:
            self.found("malformed", f"not JSON: {error}", line=number)
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if self.end is not None:
            self.found("inserted", f"a {kind or 'line'} after the end line", line=number)
            return
        try:
            if self.header is None:
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
                self.proofs.append((number, ExportProof.model_validate(data)))
            elif kind == "end":
                self.end = (number, ExportEnd.model_validate(data))
            else:
                self.found("malformed", f"unknown line type {kind!r}", line=number)
        except (ValueError, ValidationError) as error:
            what = "the header" if self.header is None else f"a {kind or 'bundle'} line"
            reason = str(error).splitlines()[0]
            self.found("malformed", f"not {what} of an export: {reason}", line=number)
            if self.header is None:
                self.header = ExportHeader(scope="all")  # go on: locate what follows

    def event(self, number: int, line: ExportedEvent) -> None:
        report = self.report
        report.events += 1
        index = report.events
        record, link = line.to_record()
        content = record.content
        oid, version = content.originator_id, content.originator_version
        where = {
            "line": number,
            "event": index,
            "originator_id": oid,
            "version": version,
            "notification_id": record.notification_id,
        }
        stream = self.streams.setdefault(oid, _Stream())
        if version in stream.versions:
            first = stream.versions[version]
            self.found(
                "inserted",
                f"a second version {version} of this stream (the first is event {first.event})",
                **where,
            )
            return
        self.order.append((record.notification_id, where))
        if version < stream.highest:
            # Kept until the end: the log-order check may name this event already.
            self.late_versions.append(
                (
                    f"version {version} comes after version {stream.highest} of its stream "
                    f"(event {stream.versions[stream.highest].event})",
                    where,
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
            if self.header is not None and self.header.scope == "all":
                before = self.last_chained
                self.last_chained = record.notification_id
                ordinal = self.log_link(record.notification_id, link.stream_hash, link.log_hash)
                if ordinal is None:
                    self.found(
                        "deleted",
                        f"the log chain breaks between position {before} and this event: "
                        "records there were removed, added or rewritten",
                        **where,
                    )
                    ordinal = len(self.log_hashes)
        seen = _Seen(
            event=index,
            line=number,
            notification_id=record.notification_id,
            stream_hash=None if link is None else link.stream_hash,
            log_ordinal=ordinal,
        )
        stream.versions[version] = seen
        stream.highest = max(stream.highest, version)
        if seen.stream_hash is not None:
            if version == 1 or version - 1 in stream.versions:
                self.check_link(oid, version, content)
            else:
                stream.waiting[version] = content
        follower = stream.waiting.pop(version + 1, None)
        if follower is not None:
            self.check_link(oid, version + 1, follower)

    def log_link(self, position: int, own: bytes, claimed: bytes) -> int | None:
        """Follow the log chain; the event's ordinal, or None where the chain breaks."""
        expected = log_hash(self.previous_log, position, own)
        self.previous_log = claimed  # go on from the claimed hash: one finding per break
        self.log_hashes.append(claimed)
        return len(self.log_hashes) if expected == claimed else None

    def check_link(self, oid: UUID, version: int, content: RecordContent) -> None:
        stream = self.streams[oid]
        seen = stream.versions[version]
        previous = stream.versions.get(version - 1)
        before = (
            GENESIS if previous is None or previous.stream_hash is None else (previous.stream_hash)
        )
        if stream_hash(before, content) != seen.stream_hash:
            self.found(
                "altered",
                "the event's bytes or its stream hash differ from the ones chained here",
                line=seen.line,
                event=seen.event,
                originator_id=oid,
                version=version,
                notification_id=seen.notification_id,
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
        self.anchor()
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

    def out_of_order(self) -> None:
        """Name the events out of log order: those outside the longest run of increasing
        positions, so one moved event is named, not the neighbours it landed between."""
        kept = set(_increasing(self.order))
        named: set[UUID] = set()  # streams with an event named out of log order
        for index, (position, where) in enumerate(self.order):
            if index in kept:
                continue
            named.add(cast(UUID, where["originator_id"]))
            self.found(
                "reordered",
                f"log position {position} is out of log order (moved from elsewhere in the file)",
                **where,
            )
        for detail, where in self.late_versions:
            # The positions already name the move (unless they were renumbered too).
            if where["originator_id"] not in named:
                self.found("reordered", detail, **where)
        self.report.findings.sort(key=lambda f: (f.event is None, f.event or 0, f.line or 0))

    def gaps(self) -> None:
        for oid, stream in self.streams.items():
            for version in sorted(stream.versions):
                if version > 1 and version - 1 not in stream.versions:
                    seen = stream.versions[version]
                    missing = max((v for v in stream.versions if v < version), default=0) + 1
                    span = (
                        f"version {missing}"
                        if missing == version - 1
                        else f"versions {missing}-{version - 1}"
                    )
                    self.found(
                        "deleted",
                        f"{span} of this stream missing before this event",
                        line=seen.line,
                        event=seen.event,
                        originator_id=oid,
                        version=version,
                        notification_id=seen.notification_id,
                    )

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
        )
        if not holds:
            self.found("checkpoint", "the checkpoint's signature does not hold")
        if trusted is False:
            self.found(
                "checkpoint",
                f"the checkpoint is signed by key {statement.key_id}, not by the trusted key",
            )
        if self.expect_head is not None and statement.log_hash != self.expect_head:
            extends = self.report.scope == "all" and self.expect_head in self.log_hashes
            if not extends:
                self.found(
                    "checkpoint",
                    f"the expected head {self.expect_head.hex()} is not the checkpoint's "
                    f"({statement.log_hash.hex()})"
                    + (" nor in the file's log chain" if self.report.scope == "all" else ""),
                )
        if self.report.scope == "all":
            self.anchor_log(checkpoint)
        else:
            self.anchor_streams(checkpoint)

    def anchor_log(self, checkpoint: Checkpoint) -> None:
        statement = checkpoint.statement
        size = statement.log_size
        chained = len(self.log_hashes)
        if chained < size:
            self.found(
                "truncated",
                f"the checkpoint signs a log of {size} records; the file chains {chained}",
            )
            return
        self.report.unanchored = chained - size
        at = self.at_ordinal(size)
        if self.log_hashes[size - 1] != statement.log_hash:
            self.found(
                "altered",
                f"the log hash at record {size} is not the signed one: the log was rewritten "
                "at or before this event",
                **at,
            )
        heads = sort_heads(
            [
                StreamHead(oid, version, seen.stream_hash)
                for oid, stream in self.streams.items()
                for version, seen in [self.head_at(stream, size)]
                if seen is not None and seen.stream_hash is not None
            ]
        )
        if heads_root(heads) != statement.heads_root:
            self.found(
                "altered",
                "the stream heads at the checkpoint are not the signed ones (heads_root)",
                **at,
            )

    @staticmethod
    def head_at(stream: _Stream, size: int) -> tuple[int, _Seen | None]:
        best: tuple[int, _Seen | None] = (0, None)
        for version, seen in stream.versions.items():
            if seen.log_ordinal is not None and seen.log_ordinal <= size and version > best[0]:
                best = (version, seen)
        return best

    def at_ordinal(self, ordinal: int) -> dict[str, object]:
        for oid, stream in self.streams.items():
            for version, seen in stream.versions.items():
                if seen.log_ordinal == ordinal:
                    return {
                        "line": seen.line,
                        "event": seen.event,
                        "originator_id": oid,
                        "version": version,
                        "notification_id": seen.notification_id,
                    }
        return {}

    def anchor_streams(self, checkpoint: Checkpoint) -> None:
        statement = checkpoint.statement
        proven: dict[UUID, int] = {}
        for number, proof in self.proofs:
            head = proof.head()
            oid = head.originator_id
            path = [bytes.fromhex(step) for step in proof.path]
            root = merkle.root_from_proof(head.leaf(), proof.index, proof.tree_size, path)
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
            if stream is None or head.version not in stream.versions:
                last = None if stream is None else stream.versions.get(stream.highest)
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
            seen = stream.versions[head.version]
            if seen.stream_hash != head.stream_hash:
                self.found(
                    "altered",
                    f"version {head.version} is not the one the checkpoint proves: the stream "
                    "was rewritten at or before this event",
                    line=seen.line,
                    event=seen.event,
                    originator_id=oid,
                    version=head.version,
                    notification_id=seen.notification_id,
                )
        self.report.unanchored = sum(
            1
            for oid, stream in self.streams.items()
            for version, seen in stream.versions.items()
            if seen.stream_hash is not None and version > proven.get(oid, 0)
        )


def _increasing(order: list[tuple[int, dict[str, Any]]]) -> list[int]:
    """Indexes of a longest strictly increasing run of positions (patience sorting)."""
    tails: list[int] = []  # index of the smallest tail of each run length
    back: list[int | None] = []
    for index, (position, _) in enumerate(order):
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            if order[tails[middle]][0] < position:
                low = middle + 1
            else:
                high = middle
        back.append(tails[low - 1] if low else None)
        if low == len(tails):
            tails.append(index)
        else:
            tails[low] = index
    run: list[int] = []
    at = tails[-1] if tails else None
    while at is not None:
        run.append(at)
        at = back[at]
    return run


def verify_file(
    lines: Iterable[str],
    *,
    trusted_key: bytes | None = None,
    expect_head: bytes | None = None,
    require_anchored: bool = False,
) -> FileReport:
    """Check an export or bundle, read line by line; every problem found is located.

    ``require_anchored``: an event that no checkpoint covers (written after it, or in a
    stream the file proves nothing of) is a finding rather than only counted."""
    verifier = _Verifier(trusted_key, expect_head, require_anchored)
    number = 0
    for number, text in enumerate(lines, start=1):
        verifier.line(number, text)
    return verifier.finish(number)
