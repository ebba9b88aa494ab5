"""eventsourcing's own recorder contract, run on our two recorder subclasses.

``SQLiteSessionRecorder`` and ``PostgresSessionRecorder`` override protected hooks of
eventsourcing's recorders (``_insert_events``; ``_insert_stored_events`` and
``_fetch_ids_after_insert_events``) to write the read models and the hash chain in the
events' transaction. ``ApplicationRecorderTestCase`` is the test eventsourcing's own
recorders pass; running it here means an eventsourcing upgrade that changes those hooks
fails these tests instead of silently losing or misnumbering events.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
import pytest
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import ApplicationRecorderTestCase
from sessionwire.adapters.store.postgres import PostgresSessionRecorder
from sessionwire.adapters.store.sqlite import SQLiteSessionRecorder


class TestSQLiteSessionRecorder(ApplicationRecorderTestCase[SQLiteSessionRecorder]):
    db_uri = ":memory:"

    def setUp(self) -> None:
        self._files = tempfile.TemporaryDirectory()

    def tearDown(self) -> None:
        self._files.cleanup()

    def create_recorder(self) -> SQLiteSessionRecorder:
        recorder = SQLiteSessionRecorder(SQLiteDatastore(db_name=self.db_uri, pool_size=100))
        recorder.create_table()
        return recorder

    def _use_file(self) -> None:
        # Concurrent writers need a database their connections share, as eventsourcing's
        # own SQLite tests use for these two.
        self.db_uri = os.path.join(self._files.name, "events.db")

    def test_concurrent_no_conflicts(self) -> None:
        self._use_file()
        super().test_concurrent_no_conflicts()

    def test_concurrent_throughput(self) -> None:
        self._use_file()
        super().test_concurrent_throughput()


class TestPostgresSessionRecorder(ApplicationRecorderTestCase[PostgresSessionRecorder]):
    @pytest.fixture(autouse=True)
    def _datastore(self, postgres_url: str) -> Iterator[None]:
        # postgres_url: a fresh schema name (dropped afterwards); the read-model and chain
        # tables our recorder adds live in the datastore's schema.
        url = urlsplit(postgres_url)
        schema = parse_qs(url.query)["schema"][0]
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{schema}"')
        self.datastore = PostgresDatastore(
            dbname=url.path.lstrip("/"),
            host=url.hostname or "127.0.0.1",
            port=url.port or 5432,
            user=unquote(url.username or "postgres"),
            password=unquote(url.password or ""),
            schema=schema,
            pool_size=4,
            max_overflow=8,
        )
        yield
        self.datastore.close()

    def create_recorder(self) -> PostgresSessionRecorder:
        recorder = PostgresSessionRecorder(self.datastore, events_table_name="stored_events")
        recorder.create_table()
        return recorder
