"""Stored form of events: pydantic models dumped to compact JSON.

eventsourcing's default mapper builds events with ``object.__new__`` and so skips
pydantic; this mapper validates on the way back in and upcasts by ``class_version``.

A field whose value is its default is left out of the stored JSON (validation puts it
back): a message's ``null`` usage, model and origin fields were a third of its event.
Records written before that keep every field; both read the same. An upcaster
(``upcast_vN_vN+1``) must therefore not expect a defaulted field to be present.

A stored topic is looked up only among sessionwire's own events: a crafted record (an
edited store, an imported export) can never make the mapper import an arbitrary module.
The same holds for the aggregate topic a creation event carries, which eventsourcing
resolves when the event builds its aggregate.

Storage v3 (ADR 0036) writes every topic as its short code, the event's qualified class
name (``Run.RunStarted``; a message's is ``Msg``, below); records written before keep
their long topic
(``sessionwire.domain.session:Session.MessageAppended``): the stream hash covers the
topic as stored, so old records are never rewritten, and both read alike.

A message (``Session.MessageAppended``, code ``Msg``) is stored message first:
``{"message":LINE,"provenance":PROV,"t":…,"o":{…}}``, where LINE is the message's JSON
and PROV its provenance in the shape ``sessions_history`` shows (``Provenance.for_reader``,
which ``Provenance`` also reads). The row keeps LINE's length (``StoredMessage.body``):
history reads the line as a slice of the stored bytes (PROV appended to it when there is
one), so one encoding of a message serves the row, the hash and the history.

The rest of a message's record is compact, since it is beside every message (ADR 0036,
amendment): the event's time as integer microseconds since the epoch under ``t`` (an
ISO string there when its zone is not UTC) and its origin under ``o`` with one-letter
keys (``_ORIGIN_KEYS``); 60 bytes a message less, with the code, than the
``Session.MessageAppended`` records written before, which keep their layout and read as
before (``_MESSAGE_QUALNAME``).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, cast
from uuid import UUID

import orjson
import sessionwire.domain
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent, Transcoder
from eventsourcing.utils import get_topic
from pydantic import BaseModel
from sessionwire.domain.base import Aggregate
from sessionwire.domain.errors import SessionwireError

_COORDINATES = {"originator_id", "originator_version"}
# A message's fields besides those written by hand (the line, its provenance, time, origin).
_MESSAGE_REST = {"originator_id", "originator_version", "message", "provenance", "timestamp"}
_MESSAGE_REST_AND_ORIGIN = frozenset(_MESSAGE_REST | {"origin"})
_MESSAGE_QUALNAME = "Session.MessageAppended"
MESSAGE_CODE = "Msg"
"""A message's code: its compact layout (module docstring)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ZERO = timedelta(0)
# MessageOrigin's fields and their keys in a compact record.
_ORIGIN_KEYS = (
    ("channel", "c"),
    ("chat_type", "t"),
    ("display_name", "n"),
    ("to", "to"),
    ("account_id", "a"),
)
_ORIGIN_NAMES = {key: name for name, key in _ORIGIN_KEYS}
_MESSAGE_HEAD = b'{"message":'
MESSAGE_BODY_OFFSET = len(_MESSAGE_HEAD)
"""Where the transcript line starts in a v3 message's stored bytes (0-based)."""
_PROVENANCE = b',"provenance":'
PROVENANCE_MARKER = _PROVENANCE
"""What stands between a v3 message's line and its provenance in its stored bytes."""
_DECODER = json.JSONDecoder()


class UnknownTopic(SessionwireError, MapperDeserialisationError):
    """A stored record whose topic is not one of sessionwire's events."""


@cache
def event_classes() -> dict[str, type[Aggregate.Event]]:
    """Every event class of every aggregate in sessionwire.domain, by topic."""
    for module in pkgutil.iter_modules(sessionwire.domain.__path__):
        importlib.import_module(f"{sessionwire.domain.__name__}.{module.name}")
    found: dict[str, type[Aggregate.Event]] = {}
    for aggregate in _subclasses(Aggregate):
        for value in vars(aggregate).values():
            if isinstance(value, type) and issubclass(value, Aggregate.Event):
                found[get_topic(value)] = value
    return found


@cache
def topic_codes() -> dict[type[Aggregate.Event], str]:
    """Each event class's short code: its qualified name (``Session.SessionOpened``), but
    a message's, which is ``Msg``."""
    codes = {
        cls: MESSAGE_CODE if cls.__qualname__ == _MESSAGE_QUALNAME else cls.__qualname__
        for cls in event_classes().values()
    }
    assert len(set(codes.values())) == len(codes), "two events share a short code"
    return codes


@cache
def _by_code() -> dict[str, type[Aggregate.Event]]:
    found = {code: cls for cls, code in topic_codes().items()}
    found[_MESSAGE_QUALNAME] = found[MESSAGE_CODE]  # the records written before ``Msg``
    return found


def is_message_first(topic: str) -> bool:
    """A record stored message first (its line at ``MESSAGE_BODY_OFFSET``) when it has a
    ``body``: the compact code, or the short code written before it."""
    return topic in (MESSAGE_CODE, _MESSAGE_QUALNAME)


def long_topic(topic: str) -> str:
    """The long form (``module:Class``) of a stored topic, short or long; an unknown one
    as it is."""
    found = _by_code().get(topic)
    return get_topic(found) if found is not None else topic


@cache
def aggregate_topics() -> frozenset[str]:
    return frozenset(get_topic(cls) for cls in _subclasses(Aggregate))


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    direct: list[type] = cls.__subclasses__()
    for sub in direct:
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def known_event_class(topic: str) -> type[Aggregate.Event] | None:
    """The event class a stored topic (short or long) names, or None."""
    return _by_code().get(topic) or event_classes().get(topic)


def event_class(topic: str) -> type[Aggregate.Event]:
    """The event class a stored topic names; UnknownTopic for anything else."""
    found = known_event_class(topic)
    if found is None:
        raise UnknownTopic(f"{topic!r} is not a sessionwire event topic")
    return found


class JSONBytesTranscoder(Transcoder):
    def encode(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


@dataclass(frozen=True)
class StoredMessage(StoredEvent):
    """A transcript message's record: its role, and the length of its line at the start
    of ``state`` (after ``{"message":``), for the row's history columns."""

    role: str = ""
    body: int = 0
    provenance: int | None = None
    """The length of the provenance stored after the line (None: it has none)."""


def message_record(event: Any, code: str) -> StoredMessage | None:
    """A message's v3 record (message first, see the module's docstring), or None when
    its message carries a field named ``provenance`` of its own (stored as before)."""
    message = event.message
    extra = message.model_extra
    if extra and "provenance" in extra:
        return None
    line = message.__pydantic_serializer__.to_json(message, exclude_none=True)
    state = _MESSAGE_HEAD + line
    provenance = event.provenance
    shown_length = None
    if provenance is not None:
        shown = compact_json(provenance.for_reader())
        state += _PROVENANCE + shown
        shown_length = len(shown)
    state += b',"t":' + _compact_time(event.timestamp)
    if event.origin is not None:
        state += b',"o":' + _compact_origin(event.origin)
    kind: type[BaseModel] = type(event)
    if event.sender_is_owner is False and _owner_is_the_rest(kind):
        # The fields written by pydantic below all hold their defaults (the common case):
        # what it writes is ``{}``, known without asking it.
        return _message_of(event, code, state + b"}", message.role, len(line), shown_length)
    rest = event.__pydantic_serializer__.to_json(
        event, exclude=_MESSAGE_REST_AND_ORIGIN, exclude_defaults=True
    )
    state += b"}" if rest == b"{}" else b"," + rest[1:]
    return _message_of(event, code, state, message.role, len(line), shown_length)


def _message_of(
    event: Any, code: str, state: bytes, role: str, body: int, provenance: int | None
) -> StoredMessage:
    return StoredMessage(
        originator_id=event.originator_id,
        originator_version=event.originator_version,
        topic=code,
        state=state,
        role=role,
        body=body,
        provenance=provenance,
    )


def compact_json(value: Any) -> bytes:
    """``value`` as compact JSON, non-ASCII as UTF-8: ``json.dumps(value, separators=(",",
    ":"), ensure_ascii=False).encode()`` byte for byte (orjson writes the same bytes for
    the strings, integers, booleans and nulls stored here, several times faster); what
    orjson refuses (a lone surrogate) goes the old way and fails as it did."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _compact_time(at: datetime) -> bytes:
    if at.utcoffset() == _ZERO:
        return str((at - _EPOCH) // _MICROSECOND).encode()
    return json.dumps(at.isoformat()).encode()


def _compact_origin(origin: Any) -> bytes:
    shown = {}
    for name, key in _ORIGIN_KEYS:
        value = getattr(origin, name)
        if value is not None:
            shown[key] = value
    return compact_json(shown)


@cache
def _owner_is_the_rest(cls: type[BaseModel]) -> bool:
    """Is ``sender_is_owner`` (default False) the one field of a message's event left to
    pydantic's writer? Then a record whose flag is False ends with ``}``, as that writer
    would give it (``exclude_defaults``)."""
    rest = set(cls.model_fields) - _MESSAGE_REST_AND_ORIGIN
    return rest == {"sender_is_owner"} and cls.model_fields["sender_is_owner"].default is False


def expand_message(state: dict[str, Any]) -> None:
    """A compact message's fields back under the event's own names."""
    if "t" in state:
        at = state.pop("t")
        state["timestamp"] = _EPOCH + at * _MICROSECOND if type(at) is int else at
    origin = state.pop("o", None)
    if isinstance(origin, dict):
        state["origin"] = {_ORIGIN_NAMES.get(key, key): value for key, value in origin.items()}
    elif origin is not None:
        state["origin"] = origin  # validation refuses it


def history_line(state: bytes, body: int) -> str:
    """A v3 message's transcript line, as ``sessions_history`` returns it: its message's
    bytes, with its provenance (stored beside it in the reader's shape) added last."""
    end = MESSAGE_BODY_OFFSET + body
    line = state[MESSAGE_BODY_OFFSET:end]
    if state.startswith(_PROVENANCE, end):
        tail = state[end + len(_PROVENANCE) :].decode()
        _, stop = _DECODER.raw_decode(tail)
        return line[:-1].decode() + ',"provenance":' + tail[:stop] + "}"
    return line.decode()


class PydanticMapper(Mapper):  # type: ignore[type-arg]
    short_topics = True
    """Write v3 records (short topics, messages message first). A store whose tables are
    still v2 and may have v2 gateways beside it (PostgreSQL, ADR 0036 §6) writes long
    topics and v2 layouts, which every gateway reads."""

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        model = cast(BaseModel, domain_event)
        if not self.short_topics:
            return self._to_stored(domain_event, model, get_topic(type(domain_event)))
        code = topic_codes()[type(domain_event)]
        if code == MESSAGE_CODE:
            if self.compressor or self.cipher:
                # Its bytes are not sliced: the event's own layout, under the code that says so.
                return self._to_stored(domain_event, model, _MESSAGE_QUALNAME)
            record = message_record(domain_event, code)
            if record is not None:
                return record
            # Stored as before (its long topic says so): a role column, no slice.
            stored = self._to_stored(domain_event, model, get_topic(type(domain_event)))
            return StoredMessage(
                originator_id=stored.originator_id,
                originator_version=stored.originator_version,
                topic=stored.topic,
                state=stored.state,
                role=domain_event.message.role,
            )
        return self._to_stored(domain_event, model, code)

    def _to_stored(self, domain_event: Any, model: BaseModel, code: str) -> StoredEvent:
        class_version = getattr(type(domain_event), "class_version", 1)
        if class_version > 1:
            state = model.model_dump(mode="json", exclude=_COORDINATES, exclude_defaults=True)
            state["class_version"] = class_version
            data = self.transcoder.encode(state)
        else:
            # pydantic's own JSON writer: the same compact JSON, several times faster.
            data = model.model_dump_json(exclude=_COORDINATES, exclude_defaults=True).encode()
        if self.compressor:
            data = self.compressor.compress(data)
        if self.cipher:
            data = self.cipher.encrypt(data)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=code,
            state=data,
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        cls = event_class(stored_event.topic)
        data = stored_event.state
        try:
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
            state: dict[str, Any] = self.transcoder.decode(data)
            if not isinstance(state, dict):
                raise TypeError("the stored state is not a JSON object")
        except Exception as error:
            raise MapperDeserialisationError(
                f"cannot read {stored_event.topic} of {stored_event.originator_id} "
                f"v{stored_event.originator_version}: {error}"
            ) from error
        if stored_event.topic == MESSAGE_CODE:
            expand_message(state)
        version = state.pop("class_version", 1)
        while version < getattr(cls, "class_version", 1):
            getattr(cls, f"upcast_v{version}_v{version + 1}")(state)
            version += 1
        created = state.get("originator_topic")
        if created is not None and created not in aggregate_topics():
            raise UnknownTopic(
                f"{stored_event.topic} of {stored_event.originator_id} creates {created!r}, "
                "which is not a sessionwire aggregate"
            )
        state["originator_id"] = stored_event.originator_id
        state["originator_version"] = stored_event.originator_version
        return cls.model_validate(state)


_READER = PydanticMapper(transcoder=JSONBytesTranscoder())


def transcript_lines(
    originator_id: UUID, version: int, topic: str, state: bytes, body: int | None
) -> list[tuple[str, str]]:
    """(role, line) of each transcript message a stored record holds, oldest first: a v3
    message's line is a slice of its bytes; a v2 message and a batch are decoded."""
    if body:
        # The role is the line's first field: the caller filters on the row's column.
        return [("", history_line(state, body))]
    event = _READER.to_domain_event(
        StoredEvent(
            originator_id=originator_id, originator_version=version, topic=topic, state=state
        )
    )
    messages = (
        event.transcript_messages()
        if hasattr(event, "transcript_messages")
        else [event.transcript_message()]
    )
    return [(message.role, message.to_json()) for message in messages]
