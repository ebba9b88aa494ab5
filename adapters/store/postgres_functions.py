"""The PostgreSQL store's server-side functions (ADR 0058): a save and a sealing pass,
each one call and one round trip.

``sw_append_one`` / ``sw_append_many`` do a whole save's fixed part in the server: the
events table's lock first (before the transaction has an id: the sealer's bound counts
only writers that hold it, ADR 0021), the fence check (``sw_hold_lease``), the work-order
lock for a save that makes a work row, the save's id (``sw_saves``), the events with
their history columns and stream links, and a session row's narrow update (a message's:
its columns given as one JSON object, so one fixed statement serves every set of changed
fields), with its span of history views and the views its messages have (ADR 0054). A
conflict is the events' primary key as before, a moved fence ``sw_hold_lease``'s
SQLSTATE: nothing changes for the caller.

``sw_seal`` is one batch of the sealer: its advisory lock (waited for or tried), the head,
the bound, the final rows below it in ``(xact_id, notification_id)`` order, their log
hashes (``hash_chain.log_hash``, computed with the server's ``sha256``) and their update.
A volatile plpgsql function takes a fresh snapshot for each statement in READ COMMITTED,
so the rows are read in a later snapshot than the bound, as the client's three round
trips did. The pass's commit does not wait for the disk (a lost seal is given again,
identically, by the next pass).

The definitions carry ``VERSION``: a store records it in ``sw_format`` (``functions``)
and replaces them, under the setup lock, when it opens a schema of an older version.
"""

from __future__ import annotations

from typing import Any

from sessionwire.adapters.store.read_models import HOT_FIELDS, HOT_TYPES
from sessionwire.domain.hash_chain import GENESIS, LOG_DOMAIN

VERSION = 2
"""Bump with any change to the definitions below: every store opening an older schema
replaces them. 2: the session row's span of history views and the views (ADR 0054)."""

SEALER_LOCK_SPACE = 7252
"""The first key of the schema's one sealer's advisory lock (the second: the schema's
``hashtext``)."""

SESSION_COLUMNS = ("label", "status", *HOT_FIELDS)
"""The session row's columns a narrow update may change (``SqlReadModel._narrow_update``)."""


def _cast(name: str) -> str:
    kind = HOT_TYPES.get(name, "text").split()[0].lower()
    return f"(r->>'{name}')" if kind == "text" else f"(r->>'{name}')::{kind}"


def _session_update(sessions: str) -> str:
    """The narrow update of the session row ``r`` (a JSON object: its ``id``, ``version``,
    ``modified_on`` and the changed columns, only those)."""
    assigned = "".join(
        f", {name} = CASE WHEN r ? '{name}' THEN {_cast(name)} ELSE {name} END"
        for name in SESSION_COLUMNS
    )
    return (
        f"UPDATE {sessions} SET version = (r->>'version')::bigint, "
        f"modified_on = (r->>'modified_on'){assigned}{_views_span} WHERE id = (r->>'id')"
    )


# The span of history views (ADR 0054, ``SqlReadModel.views_covered`` and ``views_kept``;
# the right-hand sides read the row's old values): a message's save (``view_stamp``)
# keeps the span when it was whole and of its stamp and starts it at its first message
# otherwise; another save (``view_keep``) carries a whole span to the new version; a save
# that says neither (an older gateway's) moves the version only, so the span is broken.
_views_span = (
    ", view_since = CASE WHEN r ? 'view_stamp' THEN CASE WHEN view_stamp = (r->>'view_stamp') "
    "AND view_upto = version THEN view_since ELSE (r->>'view_since')::bigint END "
    "ELSE view_since END, "
    "view_stamp = CASE WHEN r ? 'view_stamp' THEN (r->>'view_stamp') ELSE view_stamp END, "
    "view_upto = CASE WHEN r ? 'view_stamp' THEN (r->>'version')::bigint "
    "WHEN r ? 'view_keep' AND view_upto = version THEN (r->>'version')::bigint "
    "ELSE view_upto END"
)


def _views_insert(views: str) -> str:
    """The views of the save's messages that are not their lines (``r->'views'``: each
    message's version, own view, other view and ``exact``), in the session row's stream."""
    return (
        f"IF r ? 'views' THEN INSERT INTO {views} (originator_id, originator_version, own, "
        "other, exact) SELECT (r->>'id')::uuid, (v->>0)::bigint, v->>1, v->>2, "
        "(v->>3)::integer FROM jsonb_array_elements(r->'views') AS v; END IF; "
    )


def _bytea(value: bytes) -> str:
    return f"'\\x{value.hex()}'::bytea"


def function_statements(schema: str, events: str, final_bound: str) -> list[str]:
    """``CREATE OR REPLACE`` of each function (``final_bound``: the sealer's bound
    query, one row whose ``bound`` is a transaction id as text)."""
    s = f'"{schema}"'
    literal = schema.replace("'", "''")
    fenced = (
        f"LOCK TABLE {events} IN ROW EXCLUSIVE MODE; "
        "IF p_lease_key IS NOT NULL THEN "
        f"PERFORM {s}.sw_hold_lease(p_lease_key, p_lease_owner, p_lease_fence); END IF; "
        f"IF p_work_lock THEN PERFORM pg_advisory_xact_lock(hashtext('{literal}'), 1); END IF; "
        f"INSERT INTO {s}.sw_saves (save_id) VALUES (p_save_id); "
    )
    session = (
        f"IF r IS NOT NULL THEN {_session_update(f'{s}.sw_sessions')}; "
        f"{_views_insert(f'{s}.sw_history_views')}END IF; "
    )
    head = (
        "p_save_id uuid, p_lease_key text, p_lease_owner text, p_lease_fence bigint, "
        "p_work_lock boolean, r jsonb, "
    )
    columns = (
        f"INSERT INTO {events} (originator_id, originator_version, topic, state, role, body, "
        "provenance, stream_hash) "
    )
    return [
        f"CREATE OR REPLACE FUNCTION {s}.sw_append_one({head}p_id uuid, p_version bigint, "
        "p_topic text, p_state bytea, p_role text, p_body integer, p_provenance integer, "
        "p_stream_hash bytea) RETURNS bigint LANGUAGE plpgsql AS $$ "
        "DECLARE v_id bigint; BEGIN "
        f"{fenced}{columns}VALUES (p_id, p_version, p_topic, p_state, p_role, p_body, "
        "p_provenance, p_stream_hash) RETURNING notification_id INTO v_id; "
        f"{session}RETURN v_id; END $$",
        f"CREATE OR REPLACE FUNCTION {s}.sw_append_many({head}p_ids uuid[], "
        "p_versions bigint[], p_topics text[], p_states bytea[], p_roles text[], "
        "p_bodies integer[], p_provenances integer[], p_stream_hashes bytea[]) "
        "RETURNS SETOF bigint LANGUAGE plpgsql AS $$ BEGIN "
        f"{fenced}RETURN QUERY {columns}SELECT * FROM unnest(p_ids, p_versions, p_topics, "
        "p_states, p_roles, p_bodies, p_provenances, p_stream_hashes) "
        f"RETURNING notification_id; {session}END $$",
        f"CREATE OR REPLACE FUNCTION {s}.sw_seal(p_wait boolean, p_page integer) "
        "RETURNS integer LANGUAGE plpgsql AS $$ "
        "DECLARE v_seq bigint; v_hash bytea; v_bound xid8; v_row record; "
        "v_ns bigint[] := '{}'; v_seqs bigint[] := '{}'; v_hashes bytea[] := '{}'; BEGIN "
        "PERFORM set_config('synchronous_commit', 'off', true); "
        f"IF p_wait THEN PERFORM pg_advisory_xact_lock({SEALER_LOCK_SPACE}, "
        f"hashtext('{literal}')); "
        f"ELSIF NOT pg_try_advisory_xact_lock({SEALER_LOCK_SPACE}, hashtext('{literal}')) "
        "THEN RETURN NULL; END IF; "
        f"SELECT log_seq, log_hash INTO v_seq, v_hash FROM {events} "
        "WHERE log_seq IS NOT NULL ORDER BY log_seq DESC LIMIT 1; "
        f"IF v_seq IS NULL THEN v_seq := 0; v_hash := {_bytea(GENESIS)}; END IF; "
        f"SELECT f.bound::xid8 INTO v_bound FROM ({final_bound}) AS f; "
        f"FOR v_row IN SELECT notification_id, stream_hash FROM {events} "
        "WHERE log_seq IS NULL AND stream_hash IS NOT NULL AND xact_id < v_bound "
        "ORDER BY xact_id, notification_id LIMIT p_page LOOP "
        "v_seq := v_seq + 1; "
        f"v_hash := sha256({_bytea(LOG_DOMAIN)} || v_hash || int8send(v_row.notification_id) "
        "|| v_row.stream_hash); "
        "v_ns := v_ns || v_row.notification_id; v_seqs := v_seqs || v_seq; "
        "v_hashes := v_hashes || v_hash; END LOOP; "
        "IF cardinality(v_ns) > 0 THEN "
        f"UPDATE {events} AS e SET log_seq = u.seq, log_hash = u.hash "
        "FROM unnest(v_ns, v_seqs, v_hashes) AS u(n, seq, hash) WHERE e.notification_id = u.n; "
        "END IF; RETURN cardinality(v_ns); END $$",
    ]


def ensure_functions(cursor: Any, schema: str, events: str, final_bound: str) -> bool:
    """Create or replace the functions when the schema records none or an older
    version (a new schema, or one made by an older gateway); True if it did. A newer
    version is left alone: an older gateway opening it would otherwise take its
    definitions back (signatures are kept across versions, so its calls still work).
    The caller holds the setup lock and commits."""
    s = f'"{schema}"'
    cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {s}.sw_format (name text PRIMARY KEY, value bigint NOT NULL)"
    )
    cursor.execute(f"SELECT value FROM {s}.sw_format WHERE name = 'functions'")
    found = cursor.fetchone()
    if found is not None and int(found["value"]) >= VERSION:
        return False
    for statement in function_statements(schema, events, final_bound):
        cursor.execute(statement)
    cursor.execute(
        f"INSERT INTO {s}.sw_format (name, value) VALUES ('functions', %s) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (VERSION,),
    )
    return True
