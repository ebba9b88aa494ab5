"""``audit export`` / ``audit import``: the event log as JSON lines, byte for byte.

A file is a header line, one line per stored event in log order (its position, stream
coordinates, topic, stored bytes, chain hashes and place in the sealed log), then (ADR
0016 §4) the signed checkpoint it is anchored to and, in a one-session bundle, a Merkle
inclusion proof of each of its streams' heads, and an end line with the count and the
sealed log's head. The end line is how a cut-off file is told from a complete one. Log
order: events from before the chain began, the sealed log in its order, then the records
not sealed yet (their stream links only) by position. A whole-store export of a store
distributed by session (ADR 0067) also gives each sealed record's shard id, from which a
verifier recomputes every shard's chain. ``audit verify FILE`` (``verify_file.py``) checks
a file alone.

Importing trusts nothing in the file: the chain is recomputed line by line, and the
store takes only its own event topics (docs/audit.md, "Importing an export").
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from typing import Annotated, Literal, cast
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)
from sessionwire.application.audit.checkpoint import session_members, signature_holds
from sessionwire.application.ports.audit_log import AuditLog, LoadedRecord, StoredRecord
from sessionwire.domain import merkle
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.checkpoint import (
    Checkpoint,
    SessionMembers,
    Statement,
    StreamHead,
    heads_root,
    parse_hash,
    sessions_root,
)
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.hash_chain import (
    GENESIS,
    ChainLink,
    RecordContent,
    first_version,
    log_hash,
    stream_hash,
)
from sessionwire.domain.session import session_uuid

FORMAT = "sessionwire-audit-export"
# 2: checkpoint and proof lines (a version-1 reader refuses them; v1 files still load).
# 3: a whole-store export carries every session's members line (sessions_root is then
# recomputable from the file), and the end line's head is checked (ADR 0041).
FORMAT_VERSION = 3
# Positions, versions and counts are 64-bit integers in the stores and in the chain's
# encodings: a file's larger one is a malformed line, named, not an OverflowError
# traceback from deep inside a verify or an import (issue 27 finding 8).
# Strict: a JSON integer, never a string, float or boolean read as one (one spelling).
Position = Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]
_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SIGNATURE_TEXT = re.compile(r"[0-9a-f]{128}")


def _canonical_uuid(value: object) -> object:
    # One spelling per id: a stream id the hashes cover as 16 bytes has one text too, so
    # no line can differ from the signed one in a way nothing checks (ADR 0041).
    if isinstance(value, str) and not _UUID_TEXT.fullmatch(value):
        raise ValueError("a stream id is a UUID written as lowercase 8-4-4-4-12 hex")
    return value


def _canonical_hash(value: str) -> str:
    parse_hash(value, "a hash")
    return value


StreamId = Annotated[UUID, BeforeValidator(_canonical_uuid)]
# A hash as text: 64 lowercase hex digits, checked when the line is read.
HashText = Annotated[str, AfterValidator(_canonical_hash)]
# Fields of run, spawn and exchange creation events that name a session they involve.
_SESSION_FIELDS = ("session_key", "requester_key", "target_key", "child_key")


class ExportFormatError(SessionwireError, ValueError):
    """A file that is not a complete, well-formed export."""


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ExportHeader(_Line):
    type: Literal["header"] = "header"
    format: Literal["sessionwire-audit-export"] = "sessionwire-audit-export"
    # A version this code does not know is refused, not read as if it were one it does.
    version: Annotated[int, Field(ge=1, le=FORMAT_VERSION, strict=True)] = FORMAT_VERSION
    scope: Literal["all", "session"]
    session: str | None = None


class ExportedEvent(_Line):
    type: Literal["event"] = "event"
    notification_id: Position
    originator_id: StreamId
    originator_version: Position
    topic: str
    state: str | None = None  # the stored bytes when they are UTF-8 text (always, today)
    state_base64: str | None = None  # otherwise
    stream_hash: HashText | None = None
    log_hash: HashText | None = None
    log_seq: Position | None = None  # absent in files from before sealing: the line's order
    # A sealed record's shard id, in a distributed store's whole-store export (ADR 0067):
    # its shard hash and place in the shard's log follow from the file, so are not written.
    shard: Position | None = None

    @classmethod
    def of(
        cls, record: StoredRecord, link: ChainLink | None, *, with_shard: bool = True
    ) -> ExportedEvent:
        """The line of ``record``; ``with_shard``: with its shard id when it has one (a
        bundle carries none: nothing in it could bind one, docs/evidence-format.md §4)."""
        content = record.content
        try:
            text: str | None = content.state.decode()
            raw: str | None = None
        except UnicodeDecodeError:
            text, raw = None, base64.b64encode(content.state).decode()
        return cls(
            notification_id=record.notification_id,
            originator_id=content.originator_id,
            originator_version=content.originator_version,
            topic=content.topic,
            state=text,
            state_base64=raw,
            stream_hash=None if link is None else link.stream_hash.hex(),
            log_hash=None if link is None or link.log_hash is None else link.log_hash.hex(),
            log_seq=None if link is None else link.log_seq,
            shard=link.shard.shard if with_shard and link and link.shard else None,
        )

    def to_record(self) -> tuple[StoredRecord, ChainLink | None]:
        if (self.state is None) == (self.state_base64 is None):
            raise ValueError("needs exactly one of state and state_base64")
        state = self.state.encode() if self.state is not None else _raw_state(self.state_base64)
        record = StoredRecord(
            notification_id=self.notification_id,
            content=RecordContent(
                originator_id=self.originator_id,
                originator_version=self.originator_version,
                topic=self.topic,
                state=state,
            ),
        )
        if self.shard is not None and self.log_hash is None:
            # A shard's log holds sealed records only.
            raise ValueError("a shard with no log_hash")
        if self.stream_hash is None and self.log_hash is None:
            return record, None
        if self.log_seq is not None and self.log_hash is None:
            raise ValueError("a log_seq with no log_hash")
        link = ChainLink(
            notification_id=self.notification_id,
            originator_id=self.originator_id,
            originator_version=self.originator_version,
            stream_hash=_hash(self.stream_hash),
            log_hash=None if self.log_hash is None else _hash(self.log_hash),
            log_seq=self.log_seq,
        )
        # No ShardLink: the file gives the shard id only (a verifier recomputes the rest,
        # verify_file.py), and a store importing it keeps its own layout.
        return record, link


class ExportCheckpoint(_Line):
    """The signed checkpoint the file is anchored to (ADR 0016 §3)."""

    type: Literal["checkpoint"] = "checkpoint"
    statement: dict[str, StrictInt | StrictStr]
    public_key: str  # ed25519:BASE64
    signature: str  # hex

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> ExportCheckpoint:
        return cls(
            statement=cast(dict[str, int | str], checkpoint.statement.to_json()),
            public_key="ed25519:" + base64.b64encode(checkpoint.public_key).decode(),
            signature=checkpoint.signature.hex(),
        )

    def to_checkpoint(self) -> Checkpoint:
        prefix = "ed25519:"
        if not self.public_key.startswith(prefix):
            raise ValueError(f"the public key must read {prefix}BASE64")
        public_key = base64.b64decode(self.public_key[len(prefix) :], validate=True)
        if prefix + base64.b64encode(public_key).decode() != self.public_key:
            raise ValueError("the public key is not in its one base64 spelling")
        if not _SIGNATURE_TEXT.fullmatch(self.signature):
            raise ValueError("the signature is 64 bytes as 128 lowercase hex digits")
        return Checkpoint(
            statement=Statement.from_json(dict(self.statement)),
            public_key=public_key,
            signature=bytes.fromhex(self.signature),
        )


class ExportProof(_Line):
    """One stream's head at the checkpoint and its Merkle inclusion proof under the
    checkpoint's ``heads_root``."""

    type: Literal["proof"] = "proof"
    originator_id: StreamId
    version: Position
    stream_hash: HashText
    index: Position
    tree_size: Position
    path: list[HashText]

    def head(self) -> StreamHead:
        return StreamHead(
            originator_id=self.originator_id,
            version=self.version,
            stream_hash=_hash(self.stream_hash),
        )


class ExportMember(_Line):
    originator_id: StreamId
    version: Position
    stream_hash: HashText


class ExportMembers(_Line):
    """Which streams belong to the bundle's session at the checkpoint, their heads and the
    order of their events, with the Merkle inclusion proof of that leaf under the
    checkpoint's ``sessions_root`` (ADR 0036 §7)."""

    type: Literal["members"] = "members"
    session: str
    streams: list[ExportMember]
    order: HashText
    index: Position
    tree_size: Position
    path: list[HashText]

    def members(self, statement_version: int) -> SessionMembers:
        """The signed leaf this line shows, under the checkpoint's statement version."""
        return SessionMembers(
            key=self.session,
            heads=[
                StreamHead(
                    originator_id=stream.originator_id,
                    version=stream.version,
                    stream_hash=_hash(stream.stream_hash),
                )
                for stream in self.streams
            ],
            order=_hash(self.order),
            statement_version=statement_version,
        )


class ExportEnd(_Line):
    type: Literal["end"] = "end"
    events: Position
    head_notification_id: Position | None = None
    head_log_hash: HashText | None = None
    head_log_seq: Position | None = None


def _hash(text: str | None) -> bytes:
    """A hash field's bytes: its spelling was checked when the line was read (HashText)."""
    if text is None:
        raise ValueError("a chain hash is 32 bytes as 64 lowercase hex digits")
    return bytes.fromhex(text)


def proof_path(steps: list[str]) -> list[bytes]:
    """A Merkle proof's steps (checked when their line was read)."""
    return [bytes.fromhex(step) for step in steps]


def _raw_state(text: str | None) -> bytes:
    """Stored bytes that are not UTF-8, as base64 (strict: one spelling, and only for
    bytes the ``state`` field cannot hold)."""
    raw = base64.b64decode(text or "", validate=True)
    if base64.b64encode(raw).decode() != text:
        raise ValueError("state_base64 is not in its one base64 spelling")
    try:
        raw.decode()
    except UnicodeDecodeError:
        return raw
    raise ValueError("state_base64 holds UTF-8 text, which the state field carries")


def _involves(event: DomainEvent, key: str) -> bool:
    return isinstance(event, Aggregate.Created) and any(
        getattr(event, name, None) == key for name in _SESSION_FIELDS
    )


def export_lines(
    log: AuditLog,
    *,
    session_key: str | None = None,
    checkpoint: Checkpoint | None = None,
    heads: list[StreamHead] | None = None,
    members: list[SessionMembers] | None = None,
) -> Iterator[str]:
    """The export, line by line (each without its newline), streamed from the store.

    With ``session_key`` (canonical): that session's stream and the streams of the runs,
    spawns and exchanges created for it or by it. With ``checkpoint`` (and ``heads``, the
    sorted stream heads it signs): the checkpoint line and, for a session, a proof of
    each of the bundle's streams that the checkpoint covers. With ``members`` too: the
    session's members line, or in a whole-store export every session's (so the file
    alone recomputes ``sessions_root``).
    """
    scope: Literal["all", "session"] = "all" if session_key is None else "session"
    yield ExportHeader(scope=scope, session=session_key).model_dump_json()
    wanted: set[UUID] = set() if session_key is None else {session_uuid(session_key)}
    log.seal()  # the sealed log as far as it can go now (PostgreSQL seals behind writers)
    count = 0
    head: ChainLink | None = None
    for record, link in _records(log, session_key, wanted):
        count += 1
        if link is not None and link.log_hash is not None:
            head = link
        line = ExportedEvent.of(record, link, with_shard=session_key is None)
        yield line.model_dump_json(exclude_none=True)
    if checkpoint is not None:
        yield ExportCheckpoint.of(checkpoint).model_dump_json()
        if session_key is not None and heads is not None:
            yield from _proof_lines(heads, wanted)
        if members:
            yield from _members_lines(members, session_key)
    yield ExportEnd(
        events=count,
        head_notification_id=None if head is None else head.notification_id,
        head_log_hash=None if head is None or head.log_hash is None else head.log_hash.hex(),
        head_log_seq=None if head is None else head.log_seq,
    ).model_dump_json(exclude_none=True)


def _records(
    log: AuditLog, session_key: str | None, wanted: set[UUID]
) -> Iterator[tuple[StoredRecord, ChainLink | None]]:
    """The records to export in log order, adding a session's streams to ``wanted``.

    A session's streams come from the timeline index (ADR 0015), read through the
    events' primary key: the cost follows the session. A store recorded before the index
    is scanned, a stream joining when its creation event names the session."""
    if session_key is not None:
        indexed = log.session_records(session_key)
        if indexed is not None:
            indexed.sort(key=lambda found: log_order(found[0].notification_id, found[1]))
            wanted.update(record.content.originator_id for record, _ in indexed)
            yield from indexed
            return
    for record, link in log.stored_records(log.log_bounds()):
        if session_key is not None:
            content = record.content
            if content.originator_id not in wanted:
                if content.originator_version != 1 or not _involves(
                    log.decode(record), session_key
                ):
                    continue
                wanted.add(content.originator_id)
        yield record, link


_PHASE = 1 << 60


def log_order(position: int, link: ChainLink | None) -> int:
    """A record's place in an export's log order: events from before the chain by
    position, the sealed log by ``log_seq`` (by position in files from before sealing),
    then the records not sealed yet by position."""
    if link is None:
        return position
    if link.log_hash is None:
        return 2 * _PHASE + position
    return _PHASE + (position if link.log_seq is None else link.log_seq)


def sealed_seq(order: int) -> int | None:
    """The ``log_seq`` of a record from its place in log order (``log_order``), when it
    is in the sealed log; None before the chain or after the sealed log."""
    return order - _PHASE if order // _PHASE == 1 else None


def _proof_lines(heads: list[StreamHead], wanted: set[UUID]) -> Iterator[str]:
    tree = merkle.Tree([head.leaf() for head in heads])
    for index, head in enumerate(heads):
        if head.originator_id in wanted:
            yield ExportProof(
                originator_id=head.originator_id,
                version=head.version,
                stream_hash=head.stream_hash.hex(),
                index=index,
                tree_size=tree.size,
                path=[step.hex() for step in tree.inclusion_proof(index)],
            ).model_dump_json()


def _members_lines(members: list[SessionMembers], session_key: str | None) -> Iterator[str]:
    """The members line of ``session_key`` (none when no event of it is within the
    checkpoint), or of every session (a whole-store export)."""
    tree = merkle.Tree([member.leaf() for member in members])
    for index, member in enumerate(members):
        if session_key is None or member.key == session_key:
            yield _members_line(tree, index, member)


def _members_line(tree: merkle.Tree, index: int, member: SessionMembers) -> str:
    return ExportMembers(
        session=member.key,
        streams=[
            ExportMember(
                originator_id=head.originator_id,
                version=head.version,
                stream_hash=head.stream_hash.hex(),
            )
            for head in member.heads
        ],
        order=member.order.hex(),
        index=index,
        tree_size=tree.size,
        path=[step.hex() for step in tree.inclusion_proof(index)],
    ).model_dump_json()


def read_export(
    lines: Iterable[str], checkpoints: list[Checkpoint] | None = None
) -> Iterator[LoadedRecord]:
    """Records of a complete export, checked as they stream; raises ExportFormatError
    naming the line when the file is garbled, cut off, only one session's, or when a
    record does not match its chain hashes.

    The chain is recomputed while reading (docs/adr/0008-hash-chain.md): every event's
    stream and log hash must be the ones its bytes and its predecessors give, a stream's
    versions follow each other, and once the chain has begun every later event carries
    its hashes, so an edited record, a deleted or altered hash, or a dropped event is
    refused at its line. The end line's head must be the chain's last link.
    """
    count = 0
    previous = 0
    ended: ExportEnd | None = None
    header_seen = False
    number = 0
    checker = _ChainCheck()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if ended is not None:
            raise ExportFormatError(f"line {number}: text after the end line")
        read = _event_line(line) if header_seen else None
        try:
            if read is not None:
                record, link = read
            else:
                data = json.loads(line)
                kind = data.get("type") if isinstance(data, dict) else None
                if not header_seen:
                    header = ExportHeader.model_validate(data)
                    header_seen = True
                    if header.scope != "all":
                        raise ExportFormatError(
                            f"line {number}: a --session export holds part of the log "
                            f"(session {header.session}); import needs a complete export"
                        )
                    continue
                if kind == "event":
                    event = ExportedEvent.model_validate(data)
                    record, link = event.to_record()
                elif kind == "end":
                    ended = ExportEnd.model_validate(data)
                    continue
                elif kind == "checkpoint":
                    # The import recomputes the chain itself; the checkpoint is checked against
                    # the imported log afterwards (import_export).
                    carried = ExportCheckpoint.model_validate(data).to_checkpoint()
                    if checkpoints is not None:
                        checkpoints.append(carried)
                    continue
                elif kind == "members":
                    # Checked with the checkpoint, against the imported log (_carry).
                    ExportMembers.model_validate(data)
                    continue
                else:
                    raise ValueError(f"unknown line type {kind!r}")
        except ExportFormatError:
            raise
        except (ValueError, ValidationError, RecursionError) as error:
            what = "an event line" if header_seen else "the header"
            reason = line_problem(error)
            raise ExportFormatError(f"line {number}: not {what} of an export: {reason}") from error
        in_log_order = link is not None and link.log_hash is not None
        if not in_log_order:
            # Before the chain and after the sealed log, lines go by position.
            if record.notification_id <= previous:
                raise ExportFormatError(f"line {number}: positions must increase")
            previous = record.notification_id
        problem, link = checker.check(record, link)
        if problem:
            raise ExportFormatError(f"line {number}: {problem}")
        count += 1
        yield LoadedRecord(line=number, record=record, link=link)
    if not header_seen:
        raise ExportFormatError("the file is empty")
    if ended is None:
        raise ExportFormatError(
            f"the file is cut off after line {number}: no end line ({count} events read)"
        )
    if ended.events != count:
        raise ExportFormatError(f"the end line counts {ended.events} events, the file has {count}")
    head = checker.head
    named = (ended.head_notification_id, ended.head_log_hash)
    actual = (
        (None, None)
        if head is None or head.log_hash is None
        else (head.notification_id, head.log_hash.hex())
    )
    named_seq = ended.head_log_seq
    if named != actual or (
        named_seq is not None and head is not None and named_seq != head.log_seq
    ):
        raise ExportFormatError(
            f"line {number}: the end line names head {_head_text(*named)} but the events "
            f"chain to {_head_text(*actual)}"
        )


def _event_line(line: str) -> tuple[StoredRecord, ChainLink | None] | None:
    """An event line parsed and validated from its text in one pydantic call, when that
    gives exactly what json.loads and validation give; None otherwise (the line is then
    read the checked way, which gives the reason when it is bad). Strict validation takes
    only values json.loads reads alike that need no conversion."""
    if not line.startswith('{"type":"event"'):
        return None
    try:
        return ExportedEvent.model_validate_json(line, strict=True).to_record()
    except ValueError:  # a ValidationError, JSON pydantic cannot read, a bad record
        return None


def line_problem(error: Exception) -> str:
    """Why a line is not what it claims, on one line: a validation error's first field
    and message (``notification_id: Input should be less than or equal to …``), not
    pydantic's several lines with a link."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _head_text(position: int | None, hash_hex: str | None) -> str:
    return "none" if hash_hex is None else f"#{position} {hash_hex}"


class _ChainCheck:
    """The hash chain recomputed over records in log order (one hash kept per stream)."""

    def __init__(self) -> None:
        self.head: ChainLink | None = None  # the sealed log's last record so far
        self.chained = False  # a chain row seen: every later record must have one
        self.tail = False  # an unsealed record seen: no sealed one may follow
        # By the stream id's integer: a UUID hashes in Python, an int in C.
        self.versions: dict[int, int] = {}
        self.streams: dict[int, bytes] = {}

    def check(
        self, record: StoredRecord, link: ChainLink | None
    ) -> tuple[str | None, ChainLink | None]:
        """A problem with this record (or None), and its link with its place in the log."""
        content = record.content
        stream = content.originator_id.int
        expected_version = self.versions.get(stream, 0) + 1
        # A batch of messages takes several versions, from its first message's.
        first = first_version(content)
        if first != expected_version:
            return (
                f"stream {content.originator_id} jumps to version "
                f"{first}; version {expected_version} is missing"
            ), link
        self.versions[stream] = content.originator_version
        if link is None:
            if self.chained:
                return "no chain hashes, though the chain began before this event", link
            return None, link  # recorded before the store kept a chain
        self.chained = True
        own = stream_hash(self.streams.get(stream, GENESIS), content)
        if own != link.stream_hash:
            return "the stream hash does not match the event's bytes and its predecessor", link
        self.streams[stream] = own
        if link.log_hash is None:
            self.tail = True
            return None, link
        if self.tail:
            return "a sealed record after records not sealed yet", link
        seq = 1 if self.head is None else (self.head.log_seq or 0) + 1
        if link.log_seq is not None and link.log_seq != seq:
            return f"the sealed log jumps to position {link.log_seq}; {seq} is missing", link
        previous = (
            GENESIS if self.head is None or self.head.log_hash is None else (self.head.log_hash)
        )
        if log_hash(previous, record.notification_id, own) != link.log_hash:
            return "the log hash does not match the record and the chain before it", link
        self.head = ChainLink(
            notification_id=link.notification_id,
            originator_id=link.originator_id,
            originator_version=link.originator_version,
            stream_hash=link.stream_hash,
            log_hash=link.log_hash,
            log_seq=seq,
        )
        return None, self.head


def import_export(log: AuditLog, lines: Iterable[str], *, notes: list[str] | None = None) -> int:
    """Load a complete export into an empty store: all of it or, on any error, nothing.

    The file's checkpoint is kept in the copy when its signature holds and it signs the
    log just imported (what it says is checked, never trusted); ``notes`` says which."""
    carried: list[Checkpoint] = []
    count = log.import_records(read_export(lines, carried))
    for checkpoint in carried:
        note = _carry(log, checkpoint)
        if notes is not None:
            notes.append(note)
    return count


def _carry(log: AuditLog, checkpoint: Checkpoint) -> str:
    statement = checkpoint.statement
    what = f"the checkpoint of {statement.time} (log_size {statement.log_size})"
    if not signature_holds(checkpoint):
        return f"{what} was not kept: its signature does not hold"
    if statement.shards_root is not None:
        # Shard ids are where the source's cluster placed each record: the copy places
        # its records itself, so no shard head it has can be the signed one.
        return f"{what} was not kept: it signs the shard heads of the store exported"
    head = log.sealed_head(statement.log_size)
    heads = [] if head is None else log.stream_heads(head)
    if (
        head is None
        or head.log_hash != statement.log_hash
        or heads_root(heads) != statement.heads_root
        or (
            statement.sessions_root is not None
            and sessions_root(session_members(log, head.size, heads, statement.version))
            != statement.sessions_root
        )
    ):
        return f"{what} was not kept: it does not sign the imported log"
    log.record_checkpoint(checkpoint)
    return f"{what} was kept, signed by {statement.key_id}"
