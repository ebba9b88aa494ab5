"""Save ids on PostgreSQL: how a save run again after a dropped connection knows that
its first run had committed (issue 22, ADR 0021's amendment "Saves are idempotent").

eventsourcing retries a write on a connection error. When the connection dropped after
the server committed the save but before its answer came back, the retry meets the
save's own events at their primary key. Each save carries an id made where it was
prepared (``EventSourcedStore._prepare``); the save's function (``sw_append_one`` or
``sw_append_many``, ADR 0058) records that id in ``sw_saves`` with its events, in the
same transaction. On the conflict path
only, the save looks for its id: found, the save had committed (the retry is its own
echo); not found, another writer took the version (a real conflict).

Ids are kept for ``RETENTION``: a retry comes within about a minute of its first run
(eventsourcing: 10 attempts, each waiting at most the pool's 5 s, 0.2 s apart), so the
table holds a few minutes of saves, pruned by the sealer's thread every ``PRUNE_EVERY``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

RETENTION_MINUTES = 10
PRUNE_EVERY = 60.0  # seconds between two prunes by one process


def save_ids_table_statement(schema: str) -> str:
    # saved_at is the server's clock: gateways whose clocks disagree prune alike.
    return (
        f'CREATE TABLE IF NOT EXISTS "{schema}".sw_saves '
        "(save_id uuid PRIMARY KEY, saved_at timestamptz NOT NULL DEFAULT now())"
    )


class SaveIds:
    """The ``sw_saves`` table of one schema: written with each save's events, read only
    when a save meets a conflict."""

    def __init__(self, schema: str, events_table: str) -> None:
        self.table = f'"{schema}".sw_saves'
        self.events = f'"{schema}".{events_table}'
        self._pruned_at = -PRUNE_EVERY
        self._pruning = threading.Lock()

    def own_commit(
        self, cursor: Any, save_id: UUID, stored_events: Sequence[StoredEvent]
    ) -> list[int] | None:
        """The log positions of the save's events, if the save ``save_id`` committed;
        None if it did not (its events' versions are another writer's)."""
        cursor.execute(
            "SELECT e.notification_id FROM "
            f"{self.table} s, unnest(%s::uuid[], %s::bigint[]) WITH ORDINALITY "
            "AS v(id, version, n) "
            f"JOIN {self.events} e ON e.originator_id = v.id AND e.originator_version = v.version "
            "WHERE s.save_id = %s ORDER BY v.n",
            (
                [stored.originator_id for stored in stored_events],
                [stored.originator_version for stored in stored_events],
                save_id,
            ),
        )
        found = [int(row["notification_id"]) for row in cursor.fetchall()]
        return found or None

    def prune(self, cursor: Any) -> int:
        """Forget the ids older than ``RETENTION_MINUTES``; how many."""
        cursor.execute(
            f"DELETE FROM {self.table} WHERE saved_at < now() - make_interval(mins => %s)",
            (RETENTION_MINUTES,),
        )
        return int(cursor.rowcount)

    def prune_if_due(self, datastore: Any) -> None:
        """``prune``, at most once every ``PRUNE_EVERY`` seconds in this process (a
        pass reads the whole table: it has no index but its key)."""
        with self._pruning:
            now = time.monotonic()
            if now - self._pruned_at < PRUNE_EVERY:
                return
            self._pruned_at = now
        with datastore.transaction(commit=True) as cursor:
            self.prune(cursor)
