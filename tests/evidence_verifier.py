"""A second verifier of sessionwire exports and bundles, written from docs/evidence-format.md
alone: it imports nothing from sessionwire (the standard library and ``cryptography``
only), so where it and ``sessionwire audit verify FILE`` agree, the specification is
enough to check a file (issue 42). Section numbers below are the specification's.

It decides what the specification decides: whether a file is clean, and the kind of each
finding. It does not try to word or locate findings as the product does.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS = bytes(32)
MAX_JUMP = 1_000_000
BATCH_TOPICS = ("Session.MessagesAppended", "sessionwire.domain.session:Session.MessagesAppended")
FORK_TOPICS = ("Session.SessionForked", "sessionwire.domain.session:Session.SessionForked")
SESSIONS = uuid.uuid5(uuid.NAMESPACE_URL, "https://sessionwire.dev/sessions")
_HASH = re.compile(r"[0-9a-f]{64}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SIGNATURE = re.compile(r"[0-9a-f]{128}")
_COUNT = re.compile(rb'\{"timestamp":"[^"]{1,40}","count":([1-9][0-9]{0,8}),')


class Malformed(ValueError):
    pass


# §1, §3: the constructions -----------------------------------------------------------


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


def u32(n: int) -> bytes:
    return n.to_bytes(4, "big")


def stream_hash(previous: bytes, oid: bytes, version: int, topic: str, state: bytes) -> bytes:
    name = topic.encode()
    return sha(
        b"sessionwire/stream/v1\0"
        + previous
        + oid
        + u64(version)
        + u32(len(name))
        + name
        + u64(len(state))
        + state
    )


def log_hash(previous: bytes, position: int, own: bytes) -> bytes:
    return sha(b"sessionwire/log/v1\0" + previous + u64(position) + own)


def head_data(oid: bytes, version: int, own: bytes) -> bytes:
    return b"sessionwire/stream-head/v1\0" + oid + u64(version) + own


def shard_hash(previous: bytes, position: int, own: bytes) -> bytes:
    """§3.8: a record chained to its shard's record before it."""
    return sha(b"sessionwire/shard-log/v1\0" + previous + u64(position) + own)


def shard_head_data(shard: int, size: int, own: bytes) -> bytes:
    """§3.9."""
    return b"sessionwire/shard-head/v1\0" + u64(shard) + u64(size) + own


def shards_root_of(records: Iterable[tuple[int | None, int, bytes]]) -> tuple[bytes, int]:
    """§3.9 over (shard or None, position, stream_hash) of the log's first records, in
    order: each shard's chain followed, the root over its heads by shard id, and their
    number."""
    heads: dict[int, tuple[int, bytes]] = {}  # shard -> (size, shard hash)
    for shard, position, own in records:
        if shard is None:
            continue
        size, previous = heads.get(shard, (0, GENESIS))
        heads[shard] = (size + 1, shard_hash(previous, position, own))
    leaves = [leaf(shard_head_data(s, *heads[s])) for s in sorted(heads)]
    return tree_root(leaves), len(leaves)


def leaf(data: bytes) -> bytes:
    return sha(b"\0" + data)


def node(left: bytes, right: bytes) -> bytes:
    return sha(b"\1" + left + right)


def tree_root(leaf_hashes: list[bytes]) -> bytes:
    """MTH over leaf hashes (§3.4), by its recursive definition."""
    if not leaf_hashes:
        return sha(b"")
    if len(leaf_hashes) == 1:
        return leaf_hashes[0]
    split = 1
    while split * 2 < len(leaf_hashes):
        split *= 2
    return node(tree_root(leaf_hashes[:split]), tree_root(leaf_hashes[split:]))


def proof_root(leaf_hash: bytes, index: int, size: int, path: list[bytes]) -> bytes | None:
    """RFC 9162 §2.1.3.2 (§3.4); None when the path cannot belong to such a tree."""
    if not 0 <= index < size:
        return None
    fn, sn, result = index, size - 1, leaf_hash
    for sibling in path:
        if sn == 0:
            return None
        if fn % 2 == 1 or fn == sn:
            result = node(sibling, result)
            if fn % 2 == 0:
                while fn != 0 and fn % 2 == 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            result = node(result, sibling)
        fn, sn = fn >> 1, sn >> 1
    return result if sn == 0 else None


def order_digest(
    statement_version: int, events: Iterable[tuple[int, int, bytes, int, bytes]]
) -> bytes:
    """§3.5 over (log_seq, position, uuid16, version, log_hash) in log_seq order."""
    v2 = statement_version >= 3
    parts = [b"sessionwire/session-order/v2\0" if v2 else b"sessionwire/session-order/v1\0"]
    for log_seq, position, oid, version, logged in events:
        if v2:
            parts.append(u64(log_seq) + u64(position) + oid + u64(version) + logged)
        else:
            parts.append(u64(log_seq) + oid + u64(version))
    return sha(b"".join(parts))


def members_data(statement_version: int, key: str, heads: list[Head], order: bytes) -> bytes:
    tag = b"sessionwire/session-members/v%d\0" % (2 if statement_version >= 3 else 1)
    name = key.encode()
    body = b"".join(head.oid + u64(head.version) + head.own for head in heads)
    return tag + u32(len(name)) + name + u64(len(heads)) + body + order


def session_stream(key: str) -> bytes:
    return uuid.uuid5(SESSIONS, key).bytes


_STATEMENT_FIELDS = {
    1: {"heads_root", "key_id", "log_hash", "log_size", "time"},
    2: {"heads_root", "key_id", "log_hash", "log_size", "time", "sessions_root"},
}
_STATEMENT_FIELDS[3] = _STATEMENT_FIELDS[2] | {"heads_count", "sessions_count", "version"}
_STATEMENT_FIELDS[4] = _STATEMENT_FIELDS[3] | {"shards_root", "shards_count"}


def statement_version(statement: dict[str, Any]) -> int:
    """§3.7: the version, refusing a member the version does not sign."""
    if "version" in statement:
        if type(statement["version"]) is not int or statement["version"] not in (3, 4):
            raise Malformed("statement version")
        version = statement["version"]
    else:
        version = 2 if "sessions_root" in statement else 1
    if set(statement) != _STATEMENT_FIELDS[version]:
        raise Malformed("statement members")
    for name, value in statement.items():
        if name in ("log_size", "heads_count", "sessions_count", "shards_count", "version"):
            _integer(value)
        elif name in ("time", "key_id"):
            if not isinstance(value, str) or any(not " " <= c <= "~" or c in '"\\' for c in value):
                raise Malformed("statement text")
        else:
            _hash(value)
    return version


def signed_bytes(statement: dict[str, Any]) -> bytes:
    version = statement_version(statement)
    text = json.dumps(statement, sort_keys=True, separators=(",", ":"))
    return b"sessionwire/checkpoint/v%d\n" % version + text.encode()


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:16]


# §1, §2: reading lines ---------------------------------------------------------------


def _integer(value: Any) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise Malformed("integer")
    return value


def _hash(value: Any) -> bytes:
    if not isinstance(value, str) or not _HASH.fullmatch(value):
        raise Malformed("hash")
    return bytes.fromhex(value)


def _stream(value: Any) -> bytes:
    if not isinstance(value, str) or not _UUID.fullmatch(value):
        raise Malformed("stream id")
    return bytes.fromhex(value.replace("-", ""))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Malformed("string")
    return value


def _members(line: dict[str, Any], required: set[str], optional: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    names = set(line) - {"type"}
    if not required <= names or not names <= required | optional:
        raise Malformed("members")


def _optional(line: dict[str, Any], name: str) -> Any:
    return line.get(name)  # absent and null alike


def _base64(text: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as error:
        raise Malformed("base64") from error
    if base64.b64encode(raw).decode() != text:
        raise Malformed("base64 spelling")
    return raw


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise Malformed("a member twice")
    return found


@dataclass(frozen=True)
class Head:
    oid: bytes
    version: int
    own: bytes


@dataclass
class Event:
    number: int
    position: int
    oid: bytes
    version: int
    first: int
    topic: str
    state: bytes
    own: bytes | None
    logged: bytes | None
    log_seq: int | None
    shard: int | None = None
    placed: bool = False
    ordinal: int = 0

    def key(self) -> tuple[int, int]:
        """Its log-order key (§2.2)."""
        if self.own is None:
            return (0, self.position)
        if self.logged is None:
            return (2, self.position)
        return (1, self.position if self.log_seq is None else self.log_seq)

    def sealed_seq(self) -> int | None:
        return self.key()[1] if self.key()[0] == 1 else None


def parse_event(line: dict[str, Any], number: int) -> Event:
    _members(
        line,
        {"notification_id", "originator_id", "originator_version", "topic"},
        {"state", "state_base64", "stream_hash", "log_hash", "log_seq", "shard"},
    )
    text, raw = _optional(line, "state"), _optional(line, "state_base64")
    if (text is None) == (raw is None):
        raise Malformed("state")
    if text is not None:
        state = _text(text).encode()
    else:
        state = _base64(_text(raw))
        try:
            state.decode()
        except UnicodeDecodeError:
            pass
        else:
            raise Malformed("base64 of UTF-8")
    own_text, log_text, log_seq = (
        _optional(line, n) for n in ("stream_hash", "log_hash", "log_seq")
    )
    if log_seq is not None and log_text is None:
        raise Malformed("log_seq without log_hash")
    if log_text is not None and own_text is None:
        raise Malformed("log_hash without stream_hash")
    shard = _optional(line, "shard")
    if shard is not None and log_text is None:
        raise Malformed("shard without log_hash")
    version = _integer(line["originator_version"])
    topic = _text(line["topic"])
    first = version
    if topic in BATCH_TOPICS:
        first = version - _batch_count(state) + 1
    return Event(
        number=number,
        position=_integer(line["notification_id"]),
        oid=_stream(line["originator_id"]),
        version=version,
        first=first,
        topic=topic,
        state=state,
        own=None if own_text is None else _hash(own_text),
        logged=None if log_text is None else _hash(log_text),
        log_seq=None if log_seq is None else _integer(log_seq),
        shard=None if shard is None else _integer(shard),
    )


def _batch_count(state: bytes) -> int:
    prefix = _COUNT.match(state)
    if prefix is not None:
        return int(prefix.group(1))
    try:
        count = json.loads(state).get("count")
    except (ValueError, AttributeError):
        return 1
    return count if type(count) is int and count >= 1 else 1


def parse_heads(items: Any) -> list[Head]:
    if not isinstance(items, list):
        raise Malformed("streams")
    heads = []
    for item in items:
        if not isinstance(item, dict) or set(item) != {"originator_id", "version", "stream_hash"}:
            raise Malformed("member stream")
        heads.append(
            Head(
                _stream(item["originator_id"]),
                _integer(item["version"]),
                _hash(item["stream_hash"]),
            )
        )
    return heads


def parse_path(line: dict[str, Any]) -> tuple[int, int, list[bytes]]:
    if not isinstance(line["path"], list):
        raise Malformed("path")
    return _integer(line["index"]), _integer(line["tree_size"]), [_hash(s) for s in line["path"]]


# §5: verifying -----------------------------------------------------------------------


@dataclass
class Verdict:
    kinds: list[str] = field(default_factory=list)
    events: int = 0
    unanchored: int = 0
    statement_version: int | None = None

    @property
    def clean(self) -> bool:
        return not self.kinds


@dataclass
class _Stream:
    at: dict[int, Event] = field(default_factory=dict)  # version -> the event holding it
    highest: int = 0
    waiting: dict[int, Event] = field(default_factory=dict)


def verify(
    lines: Iterable[str],
    *,
    trusted_key: bytes | None = None,
    expect_head: bytes | None = None,
    require_anchored: bool = False,
    expect_session: str | None = None,
) -> Verdict:
    out = Verdict()
    found = out.kinds.append
    header: dict[str, Any] | None = None
    scope, session = "all", None
    end: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    proofs: list[tuple[Head, int, int, list[bytes]]] = []
    members: list[dict[str, Any]] = []
    members_seen = False
    streams: dict[bytes, _Stream] = {}
    placed: list[Event] = []
    late: list[Event] = []
    log: list[Event] = []  # whole-store: the sealed events, by ordinal
    previous_log, expect_seen = GENESIS, False
    forks: list[Event] = []
    chain_began, unchained, unsealed = False, 0, 0
    sharded = False  # §5.1.3: a sealed record with a shard read

    def check_link(event: Event) -> None:
        before = streams[event.oid].at.get(event.first - 1)
        previous = before.own if before is not None and before.own is not None else GENESIS
        if stream_hash(previous, event.oid, event.version, event.topic, event.state) != event.own:
            found("altered")

    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text, object_pairs_hook=_unique)
        except (ValueError, RecursionError):
            found("malformed")
            continue
        kind = data.get("type") if isinstance(data, dict) else None
        if end is not None:
            found("inserted")
            continue
        try:
            if header is None:
                header = {"scope": "all"}
                if kind != "header":
                    raise Malformed("header")
                _members(data, {"scope"}, {"format", "version", "session"})
                if data.get("format", "sessionwire-audit-export") != "sessionwire-audit-export":
                    raise Malformed("format")
                if _integer(data.get("version", 3)) not in (1, 2, 3):
                    raise Malformed("version")
                if data["scope"] not in ("all", "session"):
                    raise Malformed("scope")
                if data.get("session") is not None:
                    _text(data["session"])
                header = data
                scope, session = data["scope"], data.get("session")
            elif kind == "event":
                event = parse_event(data, number)
                if event.shard is not None and scope == "session":
                    raise Malformed("a shard in a bundle")  # §2.2
                out.events += 1
                stream = streams.setdefault(event.oid, _Stream())
                if (
                    event.version < 1
                    or event.version > stream.highest + MAX_JUMP
                    or event.first < 1
                ):
                    found("altered")
                    continue
                if any(v in stream.at for v in range(event.first, event.version + 1)):
                    found("inserted")
                    continue
                event.placed = True
                placed.append(event)
                if event.version < stream.highest:
                    late.append(event)
                if event.own is None:
                    if chain_began:
                        found("altered")
                    else:
                        unchained += 1
                else:
                    chain_began = True
                    if event.logged is None:
                        unsealed += 1
                    elif scope == "all":
                        log.append(event)
                        event.ordinal = len(log)
                        if log_hash(previous_log, event.position, event.own) != event.logged:
                            found("deleted")
                        previous_log = event.logged
                        expect_seen = expect_seen or event.logged == expect_head
                        if event.log_seq is not None and event.log_seq != event.ordinal:
                            found("reordered")
                        if event.shard is not None:
                            sharded = True
                        elif sharded:
                            found("altered")
                for v in range(event.first, event.version + 1):
                    stream.at[v] = event
                if event.topic in FORK_TOPICS:
                    forks.append(event)
                stream.highest = max(stream.highest, event.version)
                if event.own is not None:
                    if event.first == 1 or (event.first - 1) in stream.at:
                        check_link(event)
                    else:
                        stream.waiting[event.first] = event
                follower = stream.waiting.pop(event.version + 1, None)
                if follower is not None:
                    check_link(follower)
            elif kind == "checkpoint":
                if checkpoint is not None:
                    found("inserted")
                    continue
                _members(data, {"statement", "public_key", "signature"})
                statement = data["statement"]
                if not isinstance(statement, dict):
                    raise Malformed("statement")
                key_text = _text(data["public_key"])
                if not key_text.startswith("ed25519:"):
                    raise Malformed("public key")
                public = _base64(key_text[len("ed25519:") :])
                if not isinstance(data["signature"], str) or not _SIGNATURE.fullmatch(
                    data["signature"]
                ):
                    raise Malformed("signature")
                statement_version(statement)
                checkpoint = {**data, "public": public}
            elif kind == "proof":
                _members(
                    data, {"originator_id", "version", "stream_hash", "index", "tree_size", "path"}
                )
                head = Head(
                    _stream(data["originator_id"]),
                    _integer(data["version"]),
                    _hash(data["stream_hash"]),
                )
                proof = (head, *parse_path(data))
                if scope == "all":
                    found("inserted")
                else:
                    proofs.append(proof)
            elif kind == "members":
                if scope != "all" and members_seen:
                    found("inserted")
                    continue
                _members(data, {"session", "streams", "order", "index", "tree_size", "path"})
                _text(data["session"])
                parsed = {
                    **data,
                    "heads": parse_heads(data["streams"]),
                    "order": _hash(data["order"]),
                }
                parsed["proof"] = parse_path(data)
                members.append(parsed)
                members_seen = True
            elif kind == "end":
                _members(
                    data, {"events"}, {"head_notification_id", "head_log_hash", "head_log_seq"}
                )
                _integer(data["events"])
                for name in ("head_notification_id", "head_log_seq"):
                    if data.get(name) is not None:
                        _integer(data[name])
                if data.get("head_log_hash") is not None:
                    _hash(data["head_log_hash"])
                end = data
            else:
                found("malformed")
        except (Malformed, KeyError, TypeError):
            found("malformed")

    if header is None:
        return Verdict(kinds=["truncated"])
    # §5.2.1 order, 2 gaps
    keys = [event.key() for event in placed]
    if any(a >= b for a, b in itertools.pairwise(keys)) or late:
        found("reordered")
    for stream in streams.values():
        previous = 0
        for version in sorted(stream.at):
            if version > previous + 1:
                found("deleted")
            previous = version
    # 3 the end line, 4 the session asked for
    if end is None:
        found("truncated")
    elif end["events"] != out.events:
        found("truncated" if end["events"] > out.events else "inserted")
    if expect_session is not None and session != expect_session:
        found("checkpoint")
    # 5 the anchor
    hashed = [event for event in placed if event.own is not None]
    if checkpoint is None:
        out.unanchored = out.events - unchained
        if trusted_key is not None or expect_head is not None:
            found("checkpoint")
    else:
        _anchor(
            out,
            checkpoint,
            scope,
            session,
            trusted_key,
            expect_head,
            expect_seen,
            log,
            unsealed,
            streams,
            placed,
            hashed,
            proofs,
            members,
        )
    # 6 the end head, 7 anchored
    if end is not None and not out.kinds:
        sealed = [event for event in placed if event.logged is not None]
        last = max(sealed, key=Event.key, default=None)
        actual = (
            (None, None, None) if last is None else (last.position, last.logged.hex(), last.log_seq)
        )  # type: ignore[union-attr]
        named = (end.get("head_notification_id"), end.get("head_log_hash"), end.get("head_log_seq"))
        if named != actual:
            beyond = named[2] is not None and (
                last is None or last.log_seq is None or named[2] > last.log_seq
            )
            found("truncated" if beyond else "altered")
    # 7 the fork points, in a whole-store file
    if scope == "all":
        for fork in forks:
            check_fork(fork, streams, found)
    # 8 anchored
    if require_anchored and out.unanchored:
        found("unanchored")
    return out


def fork_point(state: bytes) -> tuple[str, int, int, bytes | None] | None:
    """§2.7: a fork event's (source_key, version, record_version, stream_hash) from its
    state, or None when the state holds no such point."""
    try:
        data = json.loads(state.decode(), object_pairs_hook=_unique)
    except (ValueError, RecursionError, Malformed):
        return None
    point = data.get("point") if isinstance(data, dict) else None
    if not isinstance(point, dict):
        return None
    source, version, record, recorded = (
        point.get(name) for name in ("source_key", "version", "record_version", "stream_hash")
    )
    for number in (version, record):
        if type(number) is not int or not 1 <= number < 2**63:
            return None
    if not isinstance(source, str):
        return None
    if recorded is None:
        return source, version, record, None
    try:
        return source, version, record, _hash(recorded)
    except Malformed:
        return None


def check_fork(fork: Event, streams: dict[bytes, _Stream], found: Any) -> None:
    """§5.2 step 7: the source's event at record_version holds version and has the
    recorded stream hash; a source whose stream the file lacks is unresolved."""
    point = fork_point(fork.state)
    if point is None:
        found("fork")
        return
    source, version, record, recorded = point
    held = streams.get(session_stream(source))
    if held is None:
        found("unresolved")
        return
    event = held.at.get(record)
    holds = event is not None and event.version == record and event.first <= version <= record
    if not holds or event.own != recorded:  # type: ignore[union-attr]
        found("fork")


def _anchor(
    out: Verdict,
    checkpoint: dict[str, Any],
    scope: str,
    session: str | None,
    trusted_key: bytes | None,
    expect_head: bytes | None,
    expect_seen: bool,
    log: list[Event],
    unsealed: int,
    streams: dict[bytes, _Stream],
    placed: list[Event],
    hashed: list[Event],
    proofs: list[tuple[Head, int, int, list[bytes]]],
    members: list[dict[str, Any]],
) -> None:
    found = out.kinds.append
    statement, public = checkpoint["statement"], checkpoint["public"]
    version = out.statement_version = statement_version(statement)
    try:
        holds = len(public) == 32 and key_id(public) == statement["key_id"]
        if holds:
            Ed25519PublicKey.from_public_bytes(public).verify(
                bytes.fromhex(checkpoint["signature"]), signed_bytes(statement)
            )
    except (InvalidSignature, ValueError):
        holds = False
    if not holds:
        found("checkpoint")
    if trusted_key is not None and public != trusted_key:
        found("checkpoint")
    signed_log = bytes.fromhex(statement["log_hash"])
    if (
        expect_head is not None
        and signed_log != expect_head
        and not (scope == "all" and expect_seen)
    ):
        found("checkpoint")
    size = statement["log_size"]
    sessions_root = statement.get("sessions_root")
    if scope == "all":
        if len(log) < size:
            found("truncated")
            return
        out.unanchored = len(log) - size + unsealed
        if size == 0:
            return
        if log[size - 1].logged != signed_log:
            found("altered")
        best: dict[bytes, Event] = {}
        for event in log[:size]:
            if event.version > (best[event.oid].version if event.oid in best else 0):
                best[event.oid] = event
        heads = {oid: Head(oid, e.version, e.own) for oid, e in best.items()}  # type: ignore[arg-type]
        ordered_heads = [heads[oid] for oid in sorted(heads)]
        root = tree_root([leaf(head_data(h.oid, h.version, h.own)) for h in ordered_heads])
        if root.hex() != statement["heads_root"] or statement.get("heads_count", len(heads)) != len(
            heads
        ):
            found("altered")
        if version == 4:
            shards, count = shards_root_of((e.shard, e.position, e.own) for e in log[:size])  # type: ignore[misc]
            if shards.hex() != statement["shards_root"] or count != statement["shards_count"]:
                found("altered")
        if out.kinds:
            return
        if sessions_root is None:
            if members:
                found("inserted")
            return
        if not members:
            if version >= 3:
                found("truncated")
            return
        proven: dict[int, dict[str, Any]] = {}
        tree_size = 0
        for line in members:
            if not _member_proven(out, statement, version, line):
                continue
            index = line["proof"][0]
            if index in proven:
                found("inserted")
                continue
            proven[index] = line
            tree_size = line["proof"][1]
            if session_stream(line["session"]) not in {h.oid for h in line["heads"]}:
                found("checkpoint")
            for head in line["heads"]:
                if heads.get(head.oid) != head:
                    found("altered")
        if len(proven) < tree_size:
            found("truncated")
        for line in proven.values():
            wanted = {h.oid for h in line["heads"]}
            events = [
                (e.ordinal, e.position, e.oid, e.version, e.logged)
                for e in log[:size]
                if e.oid in wanted
            ]
            if order_digest(version, events) != line["order"]:  # type: ignore[arg-type]
                found("reordered")
        return
    # A bundle: its proofs (§5.3.1)
    proven_at: dict[bytes, int] = {}
    for head, index, tree_size, path in proofs:
        if "heads_count" in statement and tree_size != statement["heads_count"]:
            found("checkpoint")
            continue
        root = proof_root(leaf(head_data(head.oid, head.version, head.own)), index, tree_size, path)
        if root is None or root.hex() != statement["heads_root"]:
            found("checkpoint")
            continue
        proven_at[head.oid] = head.version
        held = streams.get(head.oid)
        event = None if held is None else held.at.get(head.version)
        if event is None:
            found("truncated")
        elif event.own != head.own:
            found("altered")
    out.unanchored = sum(1 for e in hashed if e.version > proven_at.get(e.oid, 0))
    if sessions_root is None:
        return
    # Its members line (§5.3.2)
    if not members:
        found("truncated")
        return
    line = members[0]
    if not _member_proven(out, statement, version, line):
        return
    if line["session"] != session:
        found("checkpoint")
        return
    signed = {head.oid: head for head in line["heads"]}
    if session_stream(line["session"]) not in signed:
        found("checkpoint")
    for head in line["heads"]:
        if head.oid in proven_at:
            continue
        held = streams.get(head.oid)
        event = None if held is None else held.at.get(head.version)
        if event is None:
            found("truncated")
        elif event.own != head.own:
            found("altered")
    covered = sorted(
        (
            (e.sealed_seq(), n, e)
            for n, e in enumerate(placed)
            if (e.sealed_seq() or size + 1) <= size
        ),
        key=lambda item: (item[0], item[1]),
    )
    foreign = {e.oid for _, _, e in covered if e.oid not in signed}
    out.kinds.extend("inserted" for _ in foreign)
    ordered = [
        (seq, e.position, e.oid, e.version, e.logged) for seq, _, e in covered if e.oid in signed
    ]
    if order_digest(version, ordered) != line["order"] and not out.kinds:  # type: ignore[arg-type]
        found("reordered")
    out.unanchored = len(hashed) - len(ordered)


def _member_proven(
    out: Verdict, statement: dict[str, Any], version: int, line: dict[str, Any]
) -> bool:
    index, tree_size, path = line["proof"]
    data = members_data(version, line["session"], line["heads"], line["order"])
    root = proof_root(leaf(data), index, tree_size, path)
    if "sessions_count" in statement and tree_size != statement["sessions_count"]:
        out.kinds.append("checkpoint")
        return False
    if root is None or root.hex() != statement["sessions_root"]:
        out.kinds.append("checkpoint")
        return False
    return True
