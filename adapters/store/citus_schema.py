"""A store's schema distributed on Citus (``?distribution=citus``, contract decision 39,
ADR 0051).

Every per-session table is distributed by the key of the session its rows belong to,
and colocated with the events, so a save that touches one session is one shard's
transaction on one worker:

- the events and ``sw_saves`` by ``shard_key`` (``shard_keys.py``), a column of their own;
- ``sw_sessions`` by ``key``; ``sw_work``, ``sw_session_streams`` and ``sw_runs`` by
  ``session_key``.

Citus takes a unique index only when it includes the distribution column: the events'
primary key becomes ``(shard_key, originator_id, originator_version)`` (a stream's shard
key never changes, so two writers of one version still meet there), and the global
uniqueness of ``notification_id`` (a sequence on the coordinator) and of ``log_seq`` (the
one sealer under its lock) is kept by what assigns them, their indexes plain ones.

The gateway tables (``sw_gateways``, ``sw_session_leases``), ``sw_checkpoints`` and
``sw_format`` stay local on the coordinator, which every gateway connects to: the lease
statements, their ``clock_timestamp()``, the liveness locks (ADR 0049), the work-order
lock and LISTEN/NOTIFY all live on that one node, as on plain PostgreSQL.

The writing transaction's id: a column default is evaluated on the coordinator, so the
distributed events table has none; a ``BEFORE INSERT`` trigger, which runs on the
worker for its shard, writes the worker's own ``pg_current_xact_id()``, the id the
sealer's finality rule needs (``citus.py``), and the row's Citus shard id (``log_shard``,
from the shard table's name), whose own chain the sealer keeps (``shard_seq``,
``shard_hash``: ADR 0067).

Distributing is a list of steps, each one done once and looked for before it runs: a
new schema is distributed when it is made; an existing one (made without the option, or
an interrupted distribution) is refused until opened once with ``&upgrade=yes``, which
runs the steps still missing, with progress.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from sessionwire.adapters.store.event_store import StoreURLError
from sessionwire.adapters.store.sqlite_format import Progress, stderr_progress

CITUS = "citus"
DISTRIBUTIONS = ("none", CITUS)

# (table, distribution column, primary key with it) of every per-session table but the
# events, distributed after them and colocated with them.
_SESSION_TABLES = (
    ("sw_saves", "shard_key", "shard_key, save_id"),
    ("sw_sessions", "key", "key, id"),
    ("sw_work", "session_key", "session_key, id"),
    ("sw_session_streams", "session_key", "session_key, stream_id"),
    ("sw_runs", "session_key", "session_key, run_id"),
)


class NotDistributed(StoreURLError):
    """A schema whose tables do not match the URL's ``distribution``."""


def distribution_of(query: dict[str, list[str]]) -> str:
    """``?distribution=``: ``citus`` or ``none`` (the default)."""
    given = query.get("distribution", ["none"])[0]
    if given not in DISTRIBUTIONS:
        raise StoreURLError(
            f"distribution {given!r} is not one this store knows; use "
            f"{' or '.join(map(repr, DISTRIBUTIONS))}"
        )
    return given


def citus_version(connection: psycopg.Connection[Any]) -> str | None:
    """The Citus extension's version in the connection's database, None without it."""
    found = connection.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'citus'"
    ).fetchone()
    return None if found is None else str(found[0])


def require_citus(connection: psycopg.Connection[Any], where: str) -> str:
    """Citus's version, or a refusal: ``distribution=citus`` on a server without it
    would otherwise run undistributed without a word."""
    version = citus_version(connection)
    if version is None:
        raise StoreURLError(
            f"distribution=citus, but {where} has no Citus extension in this database "
            "(CREATE EXTENSION citus, on a Citus coordinator); without the option the "
            "store's tables stay local"
        )
    found = connection.execute("SELECT citus_is_coordinator()").fetchone()
    if found is None or not found[0]:
        raise StoreURLError(
            f"distribution=citus, but {where} is not a Citus coordinator; connect to the "
            "coordinator"
        )
    return version


def is_distributed(connection: psycopg.Connection[Any], table: str) -> bool:
    """Is ``table`` (qualified) a Citus distributed table?"""
    if citus_version(connection) is None:
        return False
    found = connection.execute(
        "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s)", (table,)
    ).fetchone()
    return found is not None


def distribute_command(location: str) -> str:
    """What distributes an existing schema (named in the refusal)."""
    joined = "&" if "?" in location else "?"
    return f"sessionwire --store '{location}{joined}distribution=citus&upgrade=yes' sessions list"


@dataclass(frozen=True)
class Step:
    """One step of distributing a schema: done once, looked for first."""

    name: str
    done: Callable[[psycopg.Connection[Any]], bool]
    run: Callable[[psycopg.Connection[Any]], None]


def _exists(query: str, *params: Any) -> Callable[[psycopg.Connection[Any]], bool]:
    def done(connection: psycopg.Connection[Any]) -> bool:
        found = connection.execute(query, params).fetchone()
        return found is not None and bool(found[0])

    return done


def _statements(*statements: str) -> Callable[[psycopg.Connection[Any]], None]:
    def run(connection: psycopg.Connection[Any]) -> None:
        with connection.transaction():
            for statement in statements:
                connection.execute(statement)

    return run


def _column(schema: str, table: str, column: str) -> Callable[[psycopg.Connection[Any]], bool]:
    return _exists(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name = %s AND column_name = %s",
        schema,
        table,
        column,
    )


def _primary_key(schema: str, table: str, first: str) -> Callable[[psycopg.Connection[Any]], bool]:
    # Its first column is the distribution column once replaced.
    return _exists(
        "SELECT a.attname = %s FROM pg_index i JOIN pg_attribute a "
        "ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisprimary",
        first,
        f'"{schema}".{table}',
    )


def _distributed(qualified: str) -> Callable[[psycopg.Connection[Any]], bool]:
    return _exists(
        "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s)", qualified
    )


def _distribute(
    qualified: str, column: str, colocate_with: str | None
) -> Callable[[psycopg.Connection[Any]], None]:
    def run(connection: psycopg.Connection[Any]) -> None:
        # Citus distributes no table with triggers: the worker's transaction id's, made
        # by a distribution interrupted before, comes back in its own later step.
        connection.execute(f"DROP TRIGGER IF EXISTS sw_worker_xact ON {qualified}")
        if colocate_with is None:
            connection.execute("SELECT create_distributed_table(%s, %s)", (qualified, column))
        else:
            connection.execute(
                "SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                (qualified, column, colocate_with),
            )
        # The rows copied into the shards stay in the coordinator's own table, unseen.
        connection.execute("SELECT truncate_local_data_after_distributing_table(%s)", (qualified,))

    return run


# The trigger's body: the worker's own transaction id, and the row's Citus shard id
# from the shard table the trigger runs on (``<table>_<shardid>``, ADR 0067).
_WORKER_XACT_BODY = (
    "BEGIN NEW.xact_id := pg_current_xact_id(); "
    "NEW.log_shard := substring(TG_TABLE_NAME from '_([0-9]+)$')::bigint; RETURN NEW; END"
)


def worker_xact_function(schema: str) -> str:
    """The trigger's function (Citus propagates its replacement to the workers)."""
    return (
        f'CREATE OR REPLACE FUNCTION "{schema}".sw_worker_xact() RETURNS trigger '
        f"LANGUAGE plpgsql AS $$ {_WORKER_XACT_BODY} $$"
    )


def worker_xact_statements(schema: str, events: str) -> list[str]:
    # ``events``: the events table, qualified.
    """The trigger that writes the worker's own transaction id and the row's shard id on
    every event row: a default would be the coordinator's (Citus evaluates it before
    routing the row)."""
    s = f'"{schema}"'
    return [
        worker_xact_function(schema),
        f"ALTER TABLE {events} ALTER COLUMN xact_id DROP DEFAULT",
        # Citus takes triggers on distributed tables only when told (it cannot check
        # what a trigger does); this one touches nothing but its own row.
        "SET LOCAL citus.enable_unsafe_triggers = on",
        f"CREATE TRIGGER sw_worker_xact BEFORE INSERT ON {events} "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.sw_worker_xact()",
    ]


def steps(
    schema: str,
    events_table: str,
    fill_shard_keys: Callable[[psycopg.Connection[Any], Progress], None],
    seal_shards: Callable[[psycopg.Connection[Any], Progress], None],
) -> list[Step]:
    """Every step of distributing ``schema``, in order (``seal_shards``: gives the rows
    already sealed their shard chains, ADR 0067)."""
    s = f'"{schema}"'
    events = f"{s}.{events_table}"
    unique_ids = f"{events_table}_notification_id_idx"
    found: list[Step] = [
        Step(
            "events: shard_key column",
            _column(schema, events_table, "shard_key"),
            _statements(f"ALTER TABLE {events} ADD COLUMN shard_key text"),
        ),
        Step(
            "events: every row's shard key",
            _exists(
                "SELECT attnotnull FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                "AND attname = 'shard_key'",
                events,
            ),
            lambda connection: _fill_then_require(connection, events, fill_shard_keys),
        ),
        Step(
            "events: primary key with the shard key",
            _primary_key(schema, events_table, "shard_key"),
            _statements(
                f"ALTER TABLE {events} DROP CONSTRAINT {events_table}_pkey",
                f"ALTER TABLE {events} ADD PRIMARY KEY (shard_key, originator_id, "
                "originator_version)",
                # eventsourcing reads a stream by its id alone.
                f"CREATE INDEX IF NOT EXISTS sw_events_stream ON {events} "
                "(originator_id, originator_version)",
            ),
        ),
        Step(
            "events: positions and seals indexed, kept unique by what assigns them",
            _exists(
                "SELECT NOT indisunique FROM pg_index WHERE indexrelid = to_regclass(%s)",
                f"{s}.sw_chain_seq",
            ),
            _statements(
                f"DROP INDEX IF EXISTS {s}.{unique_ids}",
                f"CREATE INDEX IF NOT EXISTS sw_events_position ON {events} (notification_id)",
                f"DROP INDEX IF EXISTS {s}.sw_chain_seq",
                f"CREATE INDEX sw_chain_seq ON {events} (log_seq) WHERE log_seq IS NOT NULL",
            ),
        ),
        Step(
            "events: distributed by shard_key",
            _distributed(events),
            _distribute(events, "shard_key", None),
        ),
        Step(
            "events: each shard's chain (log_shard, shard_seq, shard_hash)",
            _column(schema, events_table, "shard_hash"),
            _statements(
                f"ALTER TABLE {events} ADD COLUMN log_shard bigint, "
                "ADD COLUMN shard_seq bigint, ADD COLUMN shard_hash bytea"
            ),
        ),
        Step(
            "events: the worker's transaction id",
            _exists(
                "SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(%s) "
                "AND tgname = 'sw_worker_xact'",
                events,
            ),
            _statements(*worker_xact_statements(schema, events)),
        ),
        Step(
            "events: the trigger also writes the row's shard id",
            _exists(
                "SELECT prosrc LIKE '%%log_shard%%' FROM pg_proc WHERE oid = to_regprocedure(%s)",
                f"{s}.sw_worker_xact()",
            ),
            _statements(worker_xact_function(schema)),
        ),
        Step(
            "events: every row's shard, the sealed rows' shard chains",
            _exists(
                "SELECT attnotnull FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                "AND attname = 'log_shard'",
                events,
            ),
            lambda connection: _fill_shard_chains(connection, events, seal_shards),
        ),
        Step(
            "events: each shard's head indexed",
            _exists("SELECT to_regclass(%s) IS NOT NULL", f"{s}.sw_shard_seq"),
            _statements(
                f"CREATE INDEX IF NOT EXISTS sw_shard_seq ON {events} (log_shard, shard_seq) "
                "WHERE shard_seq IS NOT NULL"
            ),
        ),
        Step(
            "sw_chain: the shard key, for joins within a shard",
            _column(schema, "sw_chain", "shard_key"),
            _statements(_chain_view(s, events)),
        ),
        Step(
            "sw_chain: each shard's chain",
            _column(schema, "sw_chain", "shard_hash"),
            _statements(_chain_view(s, events)),
        ),
        Step(
            "sw_work: positions from a counter on the coordinator",
            _exists("SELECT to_regclass(%s) IS NOT NULL", last_work_position(schema)),
            lambda connection: _work_positions(connection, schema),
        ),
        Step(
            "sw_saves: shard_key column",
            _column(schema, "sw_saves", "shard_key"),
            # Ids recorded before are of saves long settled (a retry comes within
            # minutes): they go, as a prune would take them.
            _statements(
                f"DELETE FROM {s}.sw_saves",
                f"ALTER TABLE {s}.sw_saves ADD COLUMN shard_key text NOT NULL",
            ),
        ),
    ]
    for table, column, key in _SESSION_TABLES:
        qualified = f"{s}.{table}"
        found.append(
            Step(
                f"{table}: primary key with {column}",
                _primary_key(schema, table, column),
                _statements(
                    f"ALTER TABLE {qualified} DROP CONSTRAINT {table}_pkey",
                    f"ALTER TABLE {qualified} ADD PRIMARY KEY ({key})",
                ),
            )
        )
        found.append(
            Step(
                f"{table}: distributed by {column}, colocated",
                _distributed(qualified),
                _distribute(qualified, column, events),
            )
        )
    return found


def _chain_view(s: str, events: str) -> str:
    # ``s``: the schema, quoted; ``events``: the events table, qualified.
    return (
        f"CREATE OR REPLACE VIEW {s}.sw_chain AS SELECT notification_id, originator_id, "
        "originator_version, stream_hash, log_hash, log_seq, xact_id, shard_key, log_shard, "
        f"shard_seq, shard_hash FROM {events} WHERE stream_hash IS NOT NULL"
    )


def _fill_shard_chains(
    connection: psycopg.Connection[Any],
    events: str,
    seal_shards: Callable[[psycopg.Connection[Any], Progress], None],
) -> None:
    """Rows written before their shard was recorded (a schema distributed by ADR 0051's
    build) get it from the shard table they are in, on every shard; the sealed ones then
    their shard chains (``seal_shards``), and the column is required from then on."""
    with connection.transaction():
        for row in connection.execute(
            "SELECT success, result FROM run_command_on_shards(%s, %s)",
            (
                events,
                "UPDATE %1$s SET log_shard = substring('%1$s' from '_([0-9]+)$')::bigint "
                "WHERE log_shard IS NULL",
            ),
        ).fetchall():
            if not row[0]:
                raise NotDistributed(f"a shard's rows could not be given their shard: {row[1]}")
    seal_shards(connection, stderr_progress)
    connection.execute(f"ALTER TABLE {events} ALTER COLUMN log_shard SET NOT NULL")


def last_work_position(schema: str) -> str:
    """The coordinator's one-row table of the last position given to a work row."""
    return f'"{schema}".sw_work_last_position'


def next_work_position(schema: str) -> str:
    """The call that gives a new work row its position: the counter's next number, in
    the save's transaction. Citus takes no subquery (``MAX + 1``) in an INSERT; it
    evaluates a function of the VALUES on the coordinator before routing the row. A
    sequence would do that too, but a number it gave is not taken back when the save
    fails, and the gap put every later row a position past a rebuild's (ADR 0061)."""
    return f'"{schema}".sw_next_work_position()'


def work_position_statements(schema: str) -> list[str]:
    """The counter's table, its row, and the function (plpgsql: Citus propagates the
    function to the workers, where the coordinator's table is not and is never read)."""
    counter = last_work_position(schema)
    return [
        f"CREATE TABLE {counter} (position bigint NOT NULL)",
        f"INSERT INTO {counter} VALUES (0)",
        f"CREATE OR REPLACE FUNCTION {next_work_position(schema)} RETURNS bigint "
        "LANGUAGE plpgsql VOLATILE AS $$ DECLARE given bigint; BEGIN "
        f"UPDATE {counter} SET position = position + 1 RETURNING position INTO given; "
        "RETURN given; END $$",
    ]


def follow_work_positions(schema: str) -> str:
    """The counter set to the work rows' last position, after those rows were replaced
    wholesale (a rebuild of the read models)."""
    return (
        f"UPDATE {last_work_position(schema)} SET position = "
        f'(SELECT COALESCE(MAX(position), 0) FROM "{schema}".sw_work)'
    )


def _work_positions(connection: psycopg.Connection[Any], schema: str) -> None:
    with connection.transaction():
        # The sequence a distribution made before the counter (positions it gave stay).
        connection.execute(f'DROP SEQUENCE IF EXISTS "{schema}".sw_work_positions')
        for statement in work_position_statements(schema):
            connection.execute(statement)
        connection.execute(follow_work_positions(schema))


def _fill_then_require(
    connection: psycopg.Connection[Any],
    events: str,
    fill_shard_keys: Callable[[psycopg.Connection[Any], Progress], None],
) -> None:
    fill_shard_keys(connection, stderr_progress)
    connection.execute(f"ALTER TABLE {events} ALTER COLUMN shard_key SET NOT NULL")


def missing_steps(connection: psycopg.Connection[Any], all_steps: list[Step]) -> list[Step]:
    return [step for step in all_steps if not step.done(connection)]


def distribute(
    connection: psycopg.Connection[Any],
    all_steps: list[Step],
    *,
    progress: Progress | None = None,
) -> int:
    """Run the steps not done yet, in order (``connection`` in autocommit); how many ran.
    Interrupted, a later run picks up at the first step not done."""
    ran = 0
    todo = missing_steps(connection, all_steps)
    for number, step in enumerate(todo, start=1):
        if progress is not None:
            progress(f"distributing: {step.name} ({number}/{len(todo)})")
        step.run(connection)
        ran += 1
    return ran
