"""Stored form of events: pydantic models dumped to compact JSON.

eventsourcing's default mapper builds events with ``object.__new__`` and so skips
pydantic; this mapper validates on the way back in and upcasts by ``class_version``.

A field whose value is its default is left out of the stored JSON (validation puts it
back): a message's ``null`` usage, model and origin fields were a third of its event.
Records written before that keep every field; both read the same. An upcaster
(``upcast_vN_vN+1``) must therefore not expect a defaulted field to be present.

A stored topic names a module to import (``module:Class``), so it is looked up only among
sessionwire's own events: a crafted record (an edited store, an imported export) can never
make the mapper import an arbitrary module. The same holds for the aggregate topic a
creation event carries, which eventsourcing resolves when the event builds its aggregate.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from functools import cache
from typing import Any, cast

import sessionwire.domain
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent, Transcoder
from eventsourcing.utils import get_topic
from pydantic import BaseModel
from sessionwire.domain.base import Aggregate
from sessionwire.domain.errors import SessionwireError

_COORDINATES = {"originator_id", "originator_version"}


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
def aggregate_topics() -> frozenset[str]:
    return frozenset(get_topic(cls) for cls in _subclasses(Aggregate))


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    direct: list[type] = cls.__subclasses__()
    for sub in direct:
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def event_class(topic: str) -> type[Aggregate.Event]:
    """The event class a stored topic names; UnknownTopic for anything else."""
    found = event_classes().get(topic)
    if found is None:
        raise UnknownTopic(f"{topic!r} is not a sessionwire event topic")
    return found


class JSONBytesTranscoder(Transcoder):
    def encode(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


class PydanticMapper(Mapper):  # type: ignore[type-arg]
    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        model = cast(BaseModel, domain_event)
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
            topic=get_topic(type(domain_event)),
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
