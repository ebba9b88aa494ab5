"""The audit port on the event store: paged log reads, imports and read-model comparison."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import MapperDeserialisationError, StoredEvent
from pydantic import BaseModel, ValidationError
from sessionwire.adapters.store.chain import pages
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.read_model_diff import (
    compare_and_replace,
    drop_statements,
    shadow_model,
)
from sessionwire.adapters.store.read_models import SqlReadModel
from sessionwire.adapters.store.serialisation import (
    MESSAGE_CODE,
    aggregate_topics,
    expand_message,
    known_event_class,
)
from sessionwire.adapters.store.shard_keys import shard_key_of
from sessionwire.application.ports.audit_log import (
    AuditLog,
    CheckedRecord,
    ImportRefused,
    ImportRejected,
    LoadedRecord,
    LogBounds,
    SealedHead,
    StoredRecord,
    TableDifference,
)
from sessionwire.application.projection import Replay, ReplayFailed
from sessionwire.domain.base import Aggregate, DomainEvent
from sessionwire.domain.checkpoint import (
    Checkpoint,
    ShardHead,
    StreamHead,
    sort_heads,
    sort_shard_heads,
)
from sessionwire.domain.exchange import Exchange, ExchangeState
from sessionwire.domain.hash_chain import ChainLink, RecordContent
from sessionwire.domain.run import Run, RunState
from sessionwire.domain.run_yield import RunYield, RunYieldState
from sessionwire.domain.schedule import Schedule, ScheduleState
from sessionwire.domain.session import Session, session_uuid
from sessionwire.domain.spawn import Spawn, SpawnState

REBUILD_PAGE = 500
# Aggregates the rebuild keeps in memory; others are restored from the rows it wrote.
REPLAY_KEEP = 10_000
_WORK_CLASSES: dict[str, tuple[type[Aggregate], type[BaseModel]]] = {
    "run": (Run, RunState),
    "spawn": (Spawn, SpawnState),
    "exchange": (Exchange, ExchangeState),
    "yield": (RunYield, RunYieldState),
    "schedule": (Schedule, ScheduleState),
}


class StoreAuditLog(AuditLog):
    def __init__(self, store: EventSourcedStore) -> None:
        self.store = store
        self.chain = store.chain
        self.datastore = store.datastore
        self._one_pass_classes: dict[str, type[Aggregate.Event] | None] = {}

    def _reading(self) -> Any:
        return self.datastore.transaction(commit=False)

    def _writing(self) -> Any:
        return self.store.writing()

    def seal(self) -> int:
        return self.store.seal()

    def log_bounds(self) -> LogBounds:
        with self._reading() as cursor:
            last_event, last_link, first_link = self.chain.bounds(cursor)
            sealed, unsealed = self.chain.sealed_bounds(cursor)
        return LogBounds(
            last_event=last_event,
            last_link=last_link,
            first_link=first_link,
            sealed=sealed,
            unsealed=unsealed,
        )

    def _page(self, method: Any) -> Any:
        def fetch(after: int, stop: int) -> Any:
            with self._reading() as cursor:
                return method(cursor, after, stop)

        return fetch

    def checked_records(self, *, stop: int) -> Iterator[CheckedRecord]:
        return cast(
            Iterator[CheckedRecord],
            pages(
                self._page(self.chain.checked_page),
                lambda found: found.record.notification_id,
                stop,
            ),
        )

    def chain_links(self, *, stop: int) -> Iterator[ChainLink]:
        return cast(
            Iterator[ChainLink],
            pages(self._page(self.chain.links_page), lambda link: link.notification_id, stop),
        )

    def sealed_links(self, *, stop: int) -> Iterator[ChainLink]:
        return cast(
            Iterator[ChainLink],
            pages(
                self._page(self.chain.sealed_links_page),
                lambda link: link.log_seq,
                stop,
            ),
        )

    def stored_records(self, bounds: LogBounds) -> Iterator[tuple[StoredRecord, ChainLink | None]]:
        by_position = lambda found: found[0].notification_id  # noqa: E731
        before_chain = bounds.last_event if bounds.first_link is None else bounds.first_link - 1
        yield from pages(self._page(self.chain.unchained_page), by_position, before_chain)
        yield from pages(
            self._page(self.chain.sealed_records_page),
            lambda found: found[1].log_seq,
            bounds.sealed,
        )
        tail = partial(self.chain.unsealed_records_page, sealed=bounds.sealed)
        yield from pages(self._page(tail), by_position, bounds.last_event)
        if bounds.first_link is not None:
            # Events slipped in among chained ones: last, for the importer to refuse.
            yield from pages(
                self._page(self.chain.unchained_page),
                by_position,
                bounds.last_event,
                after=before_chain,
            )

    def sealed_head(self, size: int | None = None) -> SealedHead | None:
        with self._reading() as cursor:
            found = self.chain.sealed_head(cursor, size)
        return None if found is None else SealedHead(*found)

    def stream_heads(self, head: SealedHead) -> list[StreamHead]:
        with self._reading() as cursor:
            return sort_heads(self.chain.stream_heads(cursor, head.size))

    def shard_heads(self, size: int) -> list[ShardHead]:
        with self._reading() as cursor:
            return sort_shard_heads(self.chain.shard_heads(cursor, size))

    def record_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._writing() as cursor:
            self.chain.record_checkpoint(cursor, checkpoint)

    def checkpoints(self, *, limit: int = 1) -> list[Checkpoint]:
        with self._reading() as cursor:
            return self.chain.checkpoints(cursor, limit=limit)

    def session_records(
        self, session_key: str
    ) -> list[tuple[StoredRecord, ChainLink | None]] | None:
        indexed = self.store.session_streams(session_key)
        if indexed is None:
            return None
        ids = [session_uuid(session_key), *indexed]
        with self._reading() as cursor:
            return self.chain.stream_records_linked(cursor, ids)

    def session_keys(self) -> list[str]:
        model = self.store.read_model
        with self._reading() as cursor:
            cursor.execute(f"SELECT key FROM {model.sessions} ORDER BY key")
            return [str(found["key"]) for found in cursor.fetchall()]

    def decode(self, record: StoredRecord) -> DomainEvent:
        event = self._one_pass(record.content)
        if event is not None:
            return event
        content = record.content
        stored = StoredEvent(
            originator_id=content.originator_id,
            originator_version=content.originator_version,
            topic=content.topic,
            state=content.state,
        )
        return cast(DomainEvent, self.store.app.mapper.to_domain_event(stored))

    def _one_pass(self, content: RecordContent) -> DomainEvent | None:
        """The event parsed and validated from its stored bytes in one pydantic call, when
        that gives exactly what the mapper gives; None otherwise (the mapper then decodes
        it, and gives the reason when it cannot).

        The mapper parses the JSON, upcasts by ``class_version``, checks a creation
        event's aggregate topic and validates the state with the record's coordinates.
        Here the coordinates are appended to the JSON object (the last of duplicate keys
        wins, as the mapper's assignment does), and strict validation takes only what
        json.loads reads alike and what needs no conversion; an event class that upcasts,
        a store that compresses or encrypts, a topic or aggregate topic that is not
        sessionwire's, and any error go the mapper's way. A compact message (its time and
        origin under short keys) is read by json.loads first, its keys put back, and
        validated as the mapper does."""
        cls = self._one_pass_class(content.topic)
        state = content.state
        if cls is None or not state.endswith(b"}"):
            return None
        if content.topic == MESSAGE_CODE:
            return self._compact_message(cls, content)
        coordinates = b',"originator_id":"%s","originator_version":%d}' % (
            content.originator_id.hex.encode(),
            content.originator_version,
        )
        try:
            event = cls.model_validate_json(state[:-1] + coordinates, strict=True)
        except ValueError:  # a ValidationError, or JSON pydantic cannot read
            return None
        # (isinstance first: a missing attribute costs a pydantic model an exception)
        if (
            isinstance(event, Aggregate.Created)
            and event.originator_topic not in aggregate_topics()
        ):
            return None
        return cast(DomainEvent, event)

    @staticmethod
    def _compact_message(cls: type[Aggregate.Event], content: RecordContent) -> DomainEvent | None:
        try:
            fields = json.loads(content.state)
            expand_message(fields)
            fields["originator_id"] = content.originator_id
            fields["originator_version"] = content.originator_version
            return cast(DomainEvent, cls.model_validate(fields))
        except (ValueError, TypeError, AttributeError):  # a ValidationError among them
            return None

    def _one_pass_class(self, topic: str) -> type[Aggregate.Event] | None:
        """The event class a topic names, when its records can take the one pass."""
        if topic not in self._one_pass_classes:
            mapper = self.store.app.mapper
            cls = known_event_class(topic)
            plain = (
                cls is not None
                and getattr(cls, "class_version", 1) == 1
                and mapper.cipher is None
                and mapper.compressor is None
            )
            self._one_pass_classes[topic] = cls if plain else None
        return self._one_pass_classes[topic]

    def transcript_rows(self, session: UUID, first: int, last: int) -> dict[int, str]:
        model = self.store.read_model
        m = model.m
        if model.transcript_in_log:
            # Storage v3: the message is stored once, in the event; there is no second
            # copy to tell an edited message of a batch from the others by.
            return {}
        with self._reading() as cursor:
            cursor.execute(
                f"SELECT seq, message FROM {model.transcript} WHERE session = {m} "
                f"AND seq >= {m} AND seq <= {m}",
                (session.hex, first, last),
            )
            return {int(found["seq"]): found["message"] for found in cursor.fetchall()}

    def stream_names(self, ids: Iterable[UUID]) -> dict[UUID, str]:
        wanted = sorted(i.hex for i in ids)
        if not wanted:
            return {}
        model = self.store.read_model
        marks = ", ".join([model.m] * len(wanted))
        names: dict[UUID, str] = {}
        with self._reading() as cursor:
            for query in (
                f"SELECT id, key AS name FROM {model.sessions} WHERE id IN ({marks})",
                f"SELECT id, session_key AS name FROM {model.work_table} WHERE id IN ({marks})",
            ):
                cursor.execute(query, wanted)
                for found in cursor.fetchall():
                    names[UUID(found["id"])] = found["name"]
        return names

    def import_records(self, records: Iterable[LoadedRecord]) -> int:
        count = 0
        model = self.store.read_model
        replay = Replay()
        batch: list[tuple[int, DomainEvent]] = []
        stored: list[StoredRecord] = []
        links: list[ChainLink] = []
        # Each stream's shard key, from its first event (a store distributed by session
        # key writes it on every row, ADR 0062; the others take no key).
        shard_keys: dict[UUID, str] = {}
        # Each stream's first position: a work row's place is its creation's (ADR 0061).
        created: dict[UUID, int] = {}

        def project(cursor: Any) -> None:
            # A batch at a time: its events and links in one statement each, then the
            # read models projected from it (rows in one statement per table).
            self.chain.insert_records(cursor, stored, shard_keys=shard_keys)
            self.chain.write_links_many(cursor, links)
            stored.clear()
            links.clear()
            events, lines = runs_as_batches(batch)
            try:
                changes = replay.apply(events)
            except ReplayFailed as error:
                raise ImportRejected(f"line {lines[error.index]}: {error}") from error
            model.write(cursor, changes)
            batch.clear()

        # One transaction for the events, their links and the read models projected from
        # them: a failure anywhere (a bad line, an unknown topic, an event that cannot be
        # applied) rolls all of it back and leaves the store as it was.
        with self._writing() as cursor:
            if not self.chain.is_empty(cursor):
                raise ImportRefused(f"the store {self.store.location} already holds events")
            for loaded in records:
                try:
                    event = self.decode(loaded.record)
                except (MapperDeserialisationError, ValidationError, ValueError) as error:
                    raise ImportRejected(f"line {loaded.line}: {error}") from error
                content = loaded.record.content
                if content.originator_version == 1:
                    shard_keys[content.originator_id] = shard_key_of(content.originator_id, event)
                    created[content.originator_id] = loaded.record.notification_id
                elif content.originator_id not in shard_keys:
                    raise ImportRejected(
                        f"line {loaded.line}: stream {content.originator_id} has no first "
                        "event before it"
                    )
                stored.append(loaded.record)
                if loaded.link is not None:
                    links.append(loaded.link)
                batch.append((loaded.line, event))
                if len(batch) >= REBUILD_PAGE:
                    project(cursor)
                count += 1
            project(cursor)
            self._number_work_as_created(cursor, created)
            self.chain.imported(cursor)
            # Last: PostgreSQL's setval is not undone by a rollback.
            self.store.backend.follow_explicit_ids(cursor, self.chain)
        self.store.analyze()
        return count

    def _number_work_as_created(self, cursor: Any, created: dict[UUID, int]) -> None:
        """The work rows' positions in the order their streams were created, as the
        source numbered them and a rebuild does (ADR 0061: in notification-id order).
        The import replays the file's order, the sealed log's, which can differ: on
        Citus it interleaves the shards pass by pass. Only rows out of place change."""
        model = self.store.read_model
        m = model.m
        cursor.execute(f"SELECT id, session_key, position FROM {model.work_table}")
        rows = [
            (UUID(row["id"]), row["session_key"], int(row["position"])) for row in cursor.fetchall()
        ]
        places = sorted(position for _, _, position in rows)
        moved = [
            (place, row_id.hex, session_key)
            for place, (row_id, session_key, position) in zip(
                places, sorted(rows, key=lambda row: created[row[0]]), strict=True
            )
            if place != position
        ]
        if moved:
            cursor.executemany(
                f"UPDATE {model.work_table} SET position = {m} "
                f"WHERE id = {m} AND session_key = {m}",
                moved,
            )

    def rebuild_and_compare(self, *, replace: bool) -> dict[str, TableDifference]:
        live = self.store.read_model
        shadow = shadow_model(live)
        with self._writing() as cursor:
            for statement in [*drop_statements(shadow), *shadow.create_statements()]:
                cursor.execute(statement)
        replay = Replay(keep=REPLAY_KEEP, load=partial(self._restore, shadow))
        batch: list[DomainEvent] = []
        for _, event in self.store.events():
            batch.append(event)
            if len(batch) >= REBUILD_PAGE:
                self._write(shadow, replay.apply(batch))
                batch = []
        if batch:
            self._write(shadow, replay.apply(batch))
        with self._writing() as cursor:
            differences = compare_and_replace(cursor, live, shadow, replace=replace)
        if replace:
            self.store.analyze()
        return differences

    def _restore(self, model: SqlReadModel, aggregate_id: UUID) -> Aggregate | None:
        with self._reading() as cursor:
            session = model.session_row(cursor, aggregate_id)
            if session is not None:
                return session.to_aggregate()
            work = model.work(cursor, aggregate_id)
        if work is None:
            return None
        cls, state_class = _WORK_CLASSES[work.kind]
        return work.to_aggregate(cls, state_class)

    def _write(self, model: Any, changes: Any) -> None:
        with self._writing() as cursor:
            model.write(cursor, changes)


def runs_as_batches(
    loaded: list[tuple[int, DomainEvent]],
) -> tuple[list[DomainEvent], list[int]]:
    """The events to replay for ``loaded`` (line, event) and the line each stands for.

    A run of single appends to one session, one after another in the log (consecutive
    versions, the same origin and provenance), is replayed as the one batch
    (MessagesAppended) it amounts to: the session state is copied once for the run
    instead of once a message, and its transcript rows are written together. The rows
    are those of the single appends (ADR 0025: a batch leaves what its single appends
    leave); the events stored are the file's, untouched. A run that cannot be applied
    fails at its first event, as that event alone would.
    """
    events: list[DomainEvent] = []
    lines: list[int] = []
    run: list[Session.MessageAppended] = []

    def end_run() -> None:
        if len(run) == 1:
            events.append(run[0])
        elif run:
            first, last = run[0], run[-1]
            events.append(
                Session.MessagesAppended.model_construct(
                    originator_id=first.originator_id,
                    originator_version=last.originator_version,
                    timestamp=last.timestamp,
                    count=len(run),
                    messages=[event.message for event in run],
                    origin=first.origin,
                    provenance=first.provenance,
                )
            )
        run.clear()

    for line, event in loaded:
        if type(event) is Session.MessageAppended:
            if (
                run
                and event.originator_id == run[0].originator_id
                and event.originator_version == run[-1].originator_version + 1
                and event.origin == run[0].origin
                and event.provenance == run[0].provenance
            ):
                run.append(event)
                continue
            end_run()
            run.append(event)
        else:
            end_run()
            events.append(event)
        lines.append(line)
    end_run()
    return events, lines
