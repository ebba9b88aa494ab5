"""PostgreSQL schemas made once per test process and emptied between its tests.

A new schema costs sessionwire's whole DDL (about sixty statements, their round trips and
the server's catalog writes) and its drop: most of what a PostgreSQL gateway test cost
over the same test on memory. A test here gets a schema the store made (through its own
open, so the tables are the product's), with every table as on a new store. A schema
given back is looked at one test later (the server processes of connections just closed
leave a moment after the close) and emptied (its rows deleted, its sequences restarted)
for the test taking it, but only when it is still as the store made it:

- every object in it (tables, views, sequences, indexes, constraints, defaults, triggers,
  functions, types, columns) the same catalog row version, so any DDL a test ran (a
  dropped table, an added column, a replaced function, a TRUNCATE) shows;
- the rows the store seeded (the storage version) unchanged;
- no connection the test opened still live: every connection made during a test (its
  subprocesses' too) carries the schema's name as libpq's ``PGAPPNAME``.

A changed schema is dropped, as every schema was before; one with a connection still open
is looked at again later. A test then gets a newly made schema: whether it gets a reused
one depends on the tests before it, what it gets never does.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field

import psycopg
import psycopg.errors
import psycopg.sql
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store

# Every object in the schema, found through what depends on the schema (and on those, in
# turn), with the version (xmin) of its catalog row and a table's of each column. Catalog
# lookups by index, so cheap however many schemas the database holds.
_OBJECTS = """
WITH RECURSIVE objects(classid, objid) AS (
    SELECT classid, objid FROM pg_depend
    WHERE refclassid = 'pg_namespace'::regclass AND refobjid = {schema}::regnamespace
    UNION
    SELECT d.classid, d.objid FROM pg_depend d
    JOIN objects o ON d.refclassid = o.classid AND d.refobjid = o.objid
)
SELECT string_agg(o.classid::regclass::text || ' ' || o.objid || ' ' || coalesce(CASE o.classid
    WHEN 'pg_class'::regclass THEN (SELECT c.xmin || ' ' || (
        SELECT string_agg(a.attnum || ':' || a.xmin, ',' ORDER BY a.attnum)
        FROM pg_attribute a WHERE a.attrelid = c.oid) FROM pg_class c WHERE c.oid = o.objid)
    WHEN 'pg_proc'::regclass THEN (SELECT xmin::text FROM pg_proc WHERE oid = o.objid)
    WHEN 'pg_type'::regclass THEN (SELECT xmin::text FROM pg_type WHERE oid = o.objid)
    WHEN 'pg_trigger'::regclass THEN (SELECT xmin::text FROM pg_trigger WHERE oid = o.objid)
    WHEN 'pg_constraint'::regclass THEN (SELECT xmin::text FROM pg_constraint WHERE oid = o.objid)
    WHEN 'pg_attrdef'::regclass THEN (SELECT xmin::text FROM pg_attrdef WHERE oid = o.objid)
    WHEN 'pg_rewrite'::regclass THEN (SELECT xmin::text FROM pg_rewrite WHERE oid = o.objid)
    END, '?'), E'\\n' ORDER BY o.classid, o.objid)
FROM objects o
"""

# Schemas with a connection still open, kept to be looked at again; beyond this many the
# oldest is dropped.
_KEEP_IN_USE = 3

# Emptied tables keep their dead rows until vacuumed: every so many uses, vacuum.
_VACUUM_EVERY = 16


@dataclass
class _Made:
    """A schema as the store made it, and how to empty it."""

    fingerprint: tuple[object, ...]
    """What ``check`` answered when the schema was new (its live connections: 0)."""
    check: str
    """One query: the test's live connections, the objects' versions, the seeded rows."""
    empty: str
    """The statements that delete every row but the seeds' and restart the sequences."""
    tables: list[str]
    uses: int = 0


@dataclass
class SchemaPool:
    """One test process's schemas in one database: ``take`` one, ``give_back`` it."""

    server_url: str
    store_options: str = ""
    """Options every store URL carries (``distribution=citus``), after its schema."""
    made: dict[str, _Made] = field(default_factory=dict)
    returned: list[str] = field(default_factory=list)
    """Given back, oldest first; looked at when a test takes a schema."""
    _connection: psycopg.Connection[tuple[object, ...]] | None = None

    def url(self, schema: str) -> str:
        options = f"&{self.store_options}" if self.store_options else ""
        return f"{self.server_url}?schema={schema}{options}"

    @staticmethod
    def application_name(schema: str) -> str:
        """The ``PGAPPNAME`` a test on ``schema`` runs with."""
        return f"sw-test {schema}"

    def take(self) -> str:
        """An empty schema with sessionwire's tables, as the store made them."""
        # The schema given back last is left alone: the server processes of the
        # connections its test closed leave pg_stat_activity a moment after the close.
        # One test later they have, so a connection still there was left open.
        for schema in self.returned[:-1]:
            made = self.made[schema]
            found = self._connect().execute(made.check).fetchone()
            if found is None or found[1:] != made.fingerprint[1:]:
                self._drop(schema)
            elif found[0] == 0:
                self.returned.remove(schema)
                self._empty(schema, made)
                return schema
        if len(self.returned) > _KEEP_IN_USE:
            # Connections left open for several tests: drop the oldest schema.
            self._drop(self.returned[0])
        schema = f"t_{uuid.uuid4().hex[:16]}"
        open_event_store(self.url(schema), GatewayConfig()).close()
        self.made[schema] = self._describe(schema)
        return schema

    def give_back(self, schema: str) -> None:
        """``schema``'s test is over: a later ``take`` empties it, or drops it if the test
        left it changed."""
        self.returned.append(schema)

    def close(self) -> None:
        """Drop every schema this pool made."""
        for schema in list(self.made):
            self._drop(schema)
        if self._connection is not None:
            self._connection.close()

    def _empty(self, schema: str, made: _Made) -> None:
        connection = self._connect()
        with connection.transaction():
            connection.execute(made.empty)
        made.uses += 1
        if made.uses % _VACUUM_EVERY == 0:
            for table in made.tables:
                connection.execute(f'VACUUM "{schema}"."{table}"')

    def _drop(self, schema: str) -> None:
        self.made.pop(schema, None)
        if schema in self.returned:
            self.returned.remove(schema)
        # A connection left open may hold a lock in it: the schema then stays behind.
        with contextlib.suppress(psycopg.errors.LockNotAvailable):
            self._connect().execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def _describe(self, schema: str) -> _Made:
        connection = self._connect()
        tables = [
            str(row[0])
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (schema,),
            )
        ]
        seeded = [
            table
            for table in tables
            if connection.execute(f'SELECT 1 FROM "{schema}"."{table}" LIMIT 1').fetchone()
        ]
        sequences = [
            str(row[0])
            for row in connection.execute(
                "SELECT relname FROM pg_class WHERE relkind = 'S' "
                "AND relnamespace = %s::text::regnamespace ORDER BY relname",
                (schema,),
            )
        ]
        literal = psycopg.sql.Literal
        check = (
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            f"{literal(self.application_name(schema)).as_string(connection)}), "
            f"({_OBJECTS.format(schema=literal(schema).as_string(connection))})"
            + "".join(
                f", (SELECT string_agg(t::text, ',' ORDER BY t::text) "
                f'FROM "{schema}"."{table}" t)'
                for table in seeded
            )
        )
        empty = "".join(
            f'DELETE FROM "{schema}"."{table}";' for table in tables if table not in seeded
        ) + "".join(f'SELECT setval(\'"{schema}"."{name}"\', 1, false);' for name in sequences)
        fingerprint = connection.execute(check).fetchone()
        assert fingerprint is not None
        return _Made(fingerprint, check, empty, tables)

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        if self._connection is None or self._connection.closed:
            # Its own name, so the count of a test's live connections never counts this one.
            self._connection = psycopg.connect(
                self.server_url, autocommit=True, application_name="sw-test pool"
            )
            # A DROP waits for the locks of a connection a test left open: not forever.
            self._connection.execute("SET lock_timeout = '10s'")
        return self._connection
