"""A store may send a save's read-model change within its insert of the events only when
that change is all ``write`` would send: one session row's narrow UPDATE (ADR 0021's
amendment "a message's save is one statement")."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

import orjson
from sessionwire.adapters.store.event_store import no_kind
from sessionwire.adapters.store.postgres import postgres_dialect
from sessionwire.adapters.store.read_models import SqlReadModel
from sessionwire.adapters.store.serialisation import StoredMessage
from sessionwire.application.projection import ReadModelChanges, SessionRow, StreamMember
from store_sessions import opened

POSTGRES = postgres_dialect("public", "stored_events")
MODEL = SqlReadModel(POSTGRES, kind_of=no_kind, transcript_in_log=True, session_columns=True)
SESSION = opened("agent:main:a")
ROW = SessionRow(
    id=SESSION.id,
    version=2,
    created_on_iso="2026-11-27T00:00:00+00:00",
    modified_on_iso="2026-11-27T00:00:01+00:00",
    state=SESSION.state,
    is_new=False,
    changed=frozenset({"updated_at", "message_count"}),
)


def test_a_lone_narrow_update_is_given_as_write_sends_it() -> None:
    found = MODEL.narrow_only(ReadModelChanges(rows={ROW.id: ROW}))
    assert found is not None
    statement, values = found
    assert statement.startswith('UPDATE "public".sw_sessions SET version=%s, modified_on=%s, ')
    assert statement.count("%s") == len(values)
    assert values[:2] == (2, ROW.modified_on_iso)
    assert values[-1] == ROW.id.hex


def test_anything_beside_it_or_another_row_shape_keeps_the_statements_apart() -> None:
    member = StreamMember(session_key="agent:main:a", stream_id=SESSION.id, kind="run")
    other = replace(ROW, id=opened("agent:main:b").id)
    for changes in [
        ReadModelChanges(rows={ROW.id: ROW}, members=[member]),
        ReadModelChanges(rows={ROW.id: ROW, other.id: other}),
        ReadModelChanges(rows={ROW.id: replace(ROW, is_new=True)}),
        ReadModelChanges(rows={ROW.id: replace(ROW, changed=None)}),
        ReadModelChanges(rows={ROW.id: replace(ROW, changed=frozenset({"state"}))}),
    ]:
        assert MODEL.narrow_only(changes) is None, changes


def test_a_store_with_a_transcript_table_keeps_its_message_rows_apart() -> None:
    v2 = SqlReadModel(POSTGRES, kind_of=no_kind, session_columns=True)
    assert v2.narrow_only(ReadModelChanges(rows={ROW.id: ROW})) is not None
    rows = [("a", 1, "user", "{}")]
    assert v2.narrow_only(ReadModelChanges(rows={ROW.id: ROW}, transcript_rows=rows)) is None


def test_the_same_update_by_column_names_only_the_changed_columns() -> None:
    # PostgreSQL's save function takes it as one JSON object (ADR 0058): a column it
    # names is set, one it does not name keeps its value.
    assert MODEL.narrow_row(ReadModelChanges(rows={ROW.id: ROW})) == {
        "id": ROW.id.hex,
        "version": 2,
        "modified_on": ROW.modified_on_iso,
        "updated_at": SESSION.state.updated_at,
        "message_count": SESSION.state.message_count,
    }
    other = replace(ROW, id=opened("agent:main:b").id)
    assert MODEL.narrow_row(ReadModelChanges(rows={ROW.id: ROW, other.id: other})) is None


def _message(stream: UUID, version: int, text: str) -> StoredMessage:
    """A v3 message record as the mapper stores it: the line after ``{"message":``."""
    line = orjson.dumps({"role": "user", "content": [{"type": "text", "text": text}]})
    return StoredMessage(
        originator_id=stream,
        originator_version=version,
        topic="message",
        state=b'{"message":' + line + b',"t":0}',
        role="user",
        body=len(line),
    )


def test_with_history_views_the_update_carries_the_span_and_the_views() -> None:
    # ADR 0054 on PostgreSQL: the save function sets the row's span from these keys and
    # inserts the views that are not their lines (an envelope cleaned away here).
    views = SqlReadModel(
        POSTGRES, kind_of=no_kind, transcript_in_log=True, session_columns=True, history_views=True
    )
    changes = ReadModelChanges(rows={ROW.id: ROW})
    plain = _message(SESSION.id, 2, "plain words only")
    envelope = "[WhatsApp +1555 2026-01-01 10:00] hi there\n[message_id: a1]"
    enveloped = _message(SESSION.id, 2, envelope)
    found = views.narrow_row(changes, [plain])
    assert found is not None
    assert (found["view_stamp"], found["view_since"], "views" in found) == (views.stamp, 2, False)
    found = views.narrow_row(changes, [enveloped])
    assert found is not None
    ((version, own, other, exact),) = found["views"]
    assert (version, other, exact) == (2, None, 0)
    assert orjson.loads(own)["content"][0]["text"] == "hi there"
    # A save with no message carries a whole span on; one with another session's
    # message is written by statements (``write`` breaks that session's span).
    assert views.narrow_row(changes) == {**MODEL.narrow_row(changes), "view_keep": True}
    stranger = _message(opened("agent:main:b").id, 2, "plain words only")
    assert views.narrow_row(changes, [plain, stranger]) is None
