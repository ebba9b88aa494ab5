"""``audit verify``: walk the log and its hash chain, and report every record that was
altered, deleted, inserted or reordered since it was written.

First every event against its stream link: two sorted streams (events with their links,
and the chain rows alone) merged by position. Then the sealed log, in its own order,
against its log hashes (ADR 0016), and on a store that keeps a chain per shard (Citus,
ADR 0067) each shard's log followed along it (``ShardChains``) against each record's
stored place and shard hash there. Memory stays one page per stream whatever the size of
the log. Records not sealed yet are counted (``unsealed``) and checked by their stream
links alone.

Finding kinds: ``altered`` (an event differs from its stream link), ``deleted`` (a
version, a chained event or the expected head missing, or the sealed log or a shard's
log broken: records removed or their chain rows rewritten), ``inserted`` (an event no
chain row accounts for), ``reordered`` (the chain recorded another event at a position),
``checkpoint`` (the latest checkpoint does not hold or match) and ``fork`` (a fork's
recorded point does not match its source).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal
from uuid import UUID

from sessionwire.application.audit.checkpoint import (
    CheckpointMismatch,
    latest_anchor,
    signature_holds,
)
from sessionwire.application.ports.audit_log import AuditLog, CheckedRecord, StoredRecord
from sessionwire.domain.hash_chain import (
    GENESIS,
    ChainLink,
    LogHead,
    ShardChains,
    first_version,
    is_batch,
    log_hash,
    stream_hash,
)
from sessionwire.domain.session import Session, fork_point_mismatch, session_uuid

FindingKind = Literal["altered", "deleted", "inserted", "reordered", "checkpoint", "fork"]
# A fork's record (decision 34), as stored: its short code or its long topic.
FORK_TOPICS = ("Session.SessionForked", "sessionwire.domain.session:Session.SessionForked")
Progress = Callable[[int], None]


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    originator_id: UUID | None
    version: int | None
    notification_id: int
    detail: str
    session_key: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "stream": {
                "originator_id": None if self.originator_id is None else str(self.originator_id),
                "session_key": self.session_key,
            },
            "position": {"version": self.version, "notification_id": self.notification_id},
            "detail": self.detail,
        }


@dataclass
class VerifyReport:
    checked: int = 0
    unchained: int = 0
    unsealed: int = 0
    head_position: int = 0  # the notification id of the sealed log's last record
    head_seq: int = 0  # its place in the sealed log: the sealed log's length
    head_hash: str | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, object]:
        return {
            "clean": self.clean,
            "checked": self.checked,
            "unchained": self.unchained,
            "unsealed": self.unsealed,
            "head": {
                "notification_id": self.head_position,
                "log_seq": self.head_seq,
                "log_hash": self.head_hash,
            },
            "findings": [finding.to_json() for finding in self.findings],
        }


def _merged(
    records: Iterator[CheckedRecord], links: Iterator[ChainLink]
) -> Iterator[tuple[int, CheckedRecord | None, ChainLink | None]]:
    """Positions in order, with the event and the chain row found there (either may lack)."""
    record = next(records, None)
    link = next(links, None)
    while record is not None or link is not None:
        at_record = record.record.notification_id if record is not None else None
        at_link = link.notification_id if link is not None else None
        if at_link is None or (at_record is not None and at_record < at_link):
            assert record is not None
            assert at_record is not None
            yield at_record, record, None
            record = next(records, None)
        elif at_record is None or at_link < at_record:
            yield at_link, None, link
            link = next(links, None)
        else:
            yield at_link, record, link
            record = next(records, None)
            link = next(links, None)


def verify(
    log: AuditLog,
    *,
    progress: Progress | None = None,
    expect_head: bytes | None = None,
    trusted_key: bytes | None = None,
) -> VerifyReport:
    """Walk the log; with ``expect_head``, a log hash kept from earlier must still be in
    the sealed log; with ``trusted_key``, the latest checkpoint must be that key's, hold,
    and match the log (ADR 0016 §3)."""
    log.seal()  # so the head printed is current (PostgreSQL seals behind its writers)
    bounds = log.log_bounds()
    stop = max(bounds.last_event, bounds.last_link)
    first_link = bounds.first_link
    report = VerifyReport()
    forks: list[StoredRecord] = []
    for position, checked, link in _merged(
        log.checked_records(stop=stop), log.chain_links(stop=stop)
    ):
        if progress is not None:
            progress(position)
        if checked is not None:
            report.checked += 1
            if checked.record.content.topic in FORK_TOPICS:
                forks.append(checked.record)
        if checked is not None and link is None:
            if first_link is None or position < first_link:
                report.unchained += 1  # written before the store kept a chain (ADR 0008)
            else:
                content = checked.record.content
                report.findings.append(
                    Finding(
                        "inserted",
                        content.originator_id,
                        content.originator_version,
                        position,
                        "an event no chain row accounts for",
                    )
                )
            continue
        assert link is not None
        if link.log_seq is None:
            report.unsealed += 1
        if checked is None:
            report.findings.append(
                Finding(
                    "deleted",
                    link.originator_id,
                    link.originator_version,
                    position,
                    "the chain records an event here that the log no longer holds",
                )
            )
        else:
            finding = _check_record(checked, link, first_link)
            if finding is not None:
                if finding.kind == "altered" and is_batch(checked.record.content.topic):
                    finding = _locate_in_batch(log, checked.record, finding)
                report.findings.append(finding)
    report.findings.extend(_check_fork_points(log, forks, stop))
    expected_seen = _check_sealed_log(log, bounds.sealed, report, expect_head)
    if expect_head is not None and not expected_seen:
        report.findings.append(
            Finding(
                "deleted",
                None,
                None,
                report.head_position,
                f"the expected head {expect_head.hex()} is not in the chain: the log was cut "
                "short or rewritten",
            )
        )
    if trusted_key is not None:
        report.findings.extend(_check_checkpoint(log, trusted_key, report.head_position))
    _name_streams(log, report)
    return report


def _check_checkpoint(log: AuditLog, trusted_key: bytes, position: int) -> list[Finding]:
    def finding(detail: str) -> Finding:
        return Finding("checkpoint", None, None, position, detail)

    try:
        anchor = latest_anchor(log)
    except CheckpointMismatch as error:
        return [finding(str(error).split(":")[0])]
    if anchor is None:
        return [finding("the store holds no checkpoint to check against")]
    checkpoint = anchor.checkpoint
    found = []
    if not signature_holds(checkpoint):
        found.append(finding("the latest checkpoint's signature does not hold"))
    if checkpoint.public_key != trusted_key:
        found.append(
            finding(
                f"the latest checkpoint is signed by key {checkpoint.statement.key_id}, "
                "not by the trusted key"
            )
        )
    return found


def _check_sealed_log(
    log: AuditLog, sealed: int, report: VerifyReport, expect_head: bytes | None
) -> bool:
    """The sealed log in its order: positions 1, 2, 3, ... each chained to the one before,
    and on a store with shard heads, each record's place in its shard's log as following
    each shard along the sealed log gives it. Returns whether ``expect_head`` is among its
    log hashes."""
    previous_log, previous_seq = GENESIS, 0
    expected_seen = False
    shards = ShardChains() if log.shard_heads(sealed) else None
    # The shards begin at the first sealed record with a shard (as in evidence-format.md):
    # records sealed before a store kept them (an import into a distributed schema) have
    # none.
    begun = False
    for link in log.sealed_links(stop=sealed):
        assert link.log_seq is not None
        begun = begun or link.shard is not None
        if shards is not None and begun:
            finding = _check_shard_link(shards, link)
            if finding is not None:
                report.findings.append(finding)
        if (
            link.log_seq != previous_seq + 1
            or link.log_hash is None
            or (log_hash(previous_log, link.notification_id, link.stream_hash) != link.log_hash)
        ):
            report.findings.append(
                Finding(
                    "deleted",
                    None,
                    None,
                    link.notification_id,
                    f"the sealed log breaks before position {link.log_seq}: records before "
                    "it were removed or their chain rows rewritten",
                )
            )
        previous_log = link.log_hash or GENESIS
        previous_seq = link.log_seq
        expected_seen = expected_seen or previous_log == expect_head
        report.head_position = link.notification_id
        report.head_seq = link.log_seq
        report.head_hash = previous_log.hex()
    return expected_seen


def _check_shard_link(shards: ShardChains, link: ChainLink) -> Finding | None:
    """The record's stored place in its shard's log against the one following the shard
    gives; after a break the shard is followed on from the stored place (as the sealed
    log is from the stored log hash), so one rewritten row is not every later one."""
    stored = link.shard
    if stored is None:
        return Finding(
            "deleted",
            link.originator_id,
            link.originator_version,
            link.notification_id,
            f"the sealed record at position {link.log_seq} has no place in a shard's log: "
            "its chain row was rewritten",
        )
    expected = shards.follow(stored.shard, link.notification_id, link.stream_hash)
    if expected == stored:
        return None
    shards.heads[stored.shard] = LogHead(stored.seq, stored.shard_hash)
    # As a break of the sealed log: the record that broke it may be an earlier one.
    return Finding(
        "deleted",
        None,
        None,
        link.notification_id,
        f"shard {stored.shard}'s log breaks at position {link.log_seq} (its record "
        f"{expected.seq} there, stored as {stored.seq}): records of the shard were removed "
        "or their chain rows rewritten",
    )


def _check_record(
    checked: CheckedRecord, link: ChainLink, first_link: int | None
) -> Finding | None:
    content = checked.record.content
    position = checked.record.notification_id
    if (content.originator_id, content.originator_version) != (
        link.originator_id,
        link.originator_version,
    ):
        return Finding(
            "reordered",
            content.originator_id,
            content.originator_version,
            position,
            f"the chain recorded {link.originator_id} v{link.originator_version} at this position",
        )
    previous = checked.previous_stream_hash
    first = first_version(content)  # a batch of messages takes several versions
    if previous is None and first > 1:
        before_chain = (
            checked.previous_position is not None
            and first_link is not None
            and checked.previous_position < first_link
        )
        if not before_chain:
            return Finding(
                "deleted",
                content.originator_id,
                first - 1,
                position,
                f"version {first - 1} of this stream is missing",
            )
    if stream_hash(previous or GENESIS, content) != link.stream_hash:
        held = (
            f" (a batch of the messages at versions {first}-{content.originator_version})"
            if first != content.originator_version
            else ""
        )
        return Finding(
            "altered",
            content.originator_id,
            content.originator_version,
            position,
            f"the stored event{held} differs from the one chained here",
        )
    return None


def _check_fork_points(log: AuditLog, forks: list[StoredRecord], stop: int) -> list[Finding]:
    """Each fork's recorded point against its source's chain: the source holds a record
    at that version, covering the position, with the stream hash the fork recorded."""
    findings: list[Finding] = []
    for record in forks:
        try:
            event = log.decode(record)
        except Exception:  # an edit that broke it: the record's own check names it
            continue
        if not isinstance(event, Session.SessionForked):
            continue
        point = event.point
        found = _source_record(log, point.source_key, point.record_version, stop)
        if found is None:
            problem: str | None = f"version {point.record_version} of its source is not in the log"
        else:
            source, link = found
            problem = fork_point_mismatch(
                point.version,
                point.stream_hash,
                first_version(source.content),
                point.record_version,
                None if link is None else link.stream_hash,
            )
        if problem is not None:
            findings.append(
                Finding(
                    "fork",
                    record.content.originator_id,
                    record.content.originator_version,
                    record.notification_id,
                    f"fork point {point.source_key} v{point.version}: {problem}",
                )
            )
    return findings


def _source_record(
    log: AuditLog, source_key: str, version: int, stop: int
) -> tuple[StoredRecord, ChainLink | None] | None:
    """The source's record stored at ``version`` with its chain row, read through the
    session's index (or, for a store without one, the log)."""
    source_id = session_uuid(source_key)
    indexed = log.session_records(source_key)
    candidates = (
        indexed
        if indexed is not None
        else ((checked.record, None) for checked in log.checked_records(stop=stop))
    )
    for record, link in candidates:
        content = record.content
        if (content.originator_id, content.originator_version) == (source_id, version):
            if link is None and indexed is None:
                link = next(
                    (
                        found
                        for found in log.chain_links(stop=stop)
                        if found.notification_id == record.notification_id
                    ),
                    None,
                )
            return record, link
    return None


def _locate_in_batch(log: AuditLog, record: StoredRecord, finding: Finding) -> Finding:
    """Name the messages of an altered batch that differ from the transcript read model
    (written in the same transaction): where an edit of the event alone is. An edit of
    both, or an event that no longer decodes, stays located to the batch."""
    try:
        event = log.decode(record)
    except Exception:  # an edit that broke the JSON: the batch is all that can be named
        return finding
    if not isinstance(event, Session.MessagesAppended):
        return finding
    first = event.first_version
    rows = log.transcript_rows(event.originator_id, first, event.originator_version)
    differing = [
        first + index
        for index, message in enumerate(event.transcript_messages())
        if rows.get(first + index) != message.to_json()
    ]
    if not differing or len(differing) == len(event.messages):
        return finding
    named = ", ".join(str(version) for version in differing[:10])
    more = f" and {len(differing) - 10} more" if len(differing) > 10 else ""
    return replace(
        finding,
        detail=f"{finding.detail}; the message(s) at version {named}{more} differ from "
        "the transcript read model",
    )


def _name_streams(log: AuditLog, report: VerifyReport) -> None:
    ids = {f.originator_id for f in report.findings if f.originator_id is not None}
    if not ids:
        return
    names = log.stream_names(ids)
    report.findings = [
        Finding(
            f.kind,
            f.originator_id,
            f.version,
            f.notification_id,
            f.detail,
            session_key=None if f.originator_id is None else names.get(f.originator_id),
        )
        for f in report.findings
    ]
