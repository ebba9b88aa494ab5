"""What the audit-command tests share: a populated store, raw SQL on its tables, the CLI."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import pytest
from postgres_server import ON_CITUS
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.loop_guard import blocking_access_allowed
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.audit.checkpoint import Checkpointed
from sessionwire.application.audit.export import export_lines
from sessionwire.application.ports.audit_log import AuditLog
from sessionwire.domain.hash_chain import (
    GENESIS,
    RecordContent,
    ShardChains,
    log_hash,
    stream_hash,
)
from sessionwire.testing import CapturingDelivery, ScriptedRuntime, VirtualClock

QUICK = [
    {"step": "subagent_task", "reply": "done"},
    {"step": "subagent_announce", "reply": "Result: all done\nNotes: none"},
]


async def open_populated(url: str, clock: VirtualClock) -> Gateway:
    """A gateway on ``url`` holding two sessions with messages and a patch, and a
    sub-agent spawned from main (open: a memory store lives as long as its gateway)."""
    gateway = await Gateway.open(
        config=GatewayConfig(),
        store=url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict({"rules": QUICK}),
        delivery=CapturingDelivery(),
    )
    try:
        await gateway.record_message("main", role="user", content="hello", channel="whatsapp")
        await gateway.record_message("main", role="assistant", content="hi there")
        await gateway.record_message(
            "discord:group:dev", role="user", content="standup", channel="discord"
        )
        await gateway.patch_session("discord:group:dev", label="dev room")
        spawned = await gateway.call_tool("main", "sessions_spawn", {"task": "sum up"})
        assert spawned["status"] == "accepted", spawned
        await gateway.wait_idle()
        await gateway.record_message("discord:group:dev", role="assistant", content="noted")
    except BaseException:
        await gateway.close()
        raise
    return gateway


async def populate(url: str, clock: VirtualClock) -> None:
    """``open_populated``, closed."""
    await (await open_populated(url, clock)).close()


@contextmanager
def audit_log_of(gateway: Gateway) -> Iterator[StoreAuditLog]:
    """The audit port on the store behind a live gateway, read blocking on purpose (the
    way the CLI reads a store), between the gateway's own steps."""
    store = internals(gateway).store
    assert isinstance(store, OffLoopStore)
    with blocking_access_allowed():
        yield StoreAuditLog(store.event_store)


@dataclass
class RawStore:
    """The store's tables reached with plain SQL, the way someone editing the file would."""

    url: str

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite:")

    @property
    def distributed(self) -> bool:
        """A schema distributed on Citus: its event rows carry their stream's shard key."""
        return "distribution=citus" in self.url

    @property
    def position(self) -> str:
        return "rowid" if self.is_sqlite else "notification_id"

    def _connect(self) -> Any:
        if self.is_sqlite:
            return sqlite3.connect(self.url[len("sqlite://") :])
        import psycopg

        parts = urlsplit(self.url)
        schema = parse_qs(parts.query)["schema"][0]
        connection = psycopg.connect(self.url.split("?")[0])
        connection.execute(f'SET search_path TO "{schema}"')
        return connection

    def run(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        """Statements in one transaction; ``{pos}`` names the log-position column."""
        connection = self._connect()
        try:
            for sql, params in statements:
                connection.execute(self._sql(sql), params)
            connection.commit()
        finally:
            connection.close()

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        connection = self._connect()
        try:
            return [tuple(row) for row in connection.execute(self._sql(sql), params).fetchall()]
        finally:
            connection.close()

    def _sql(self, sql: str) -> str:
        sql = sql.replace("{pos}", self.position)
        if self.is_sqlite:
            return sql
        # What the chain view's own delete trigger does, on the events table: Citus
        # modifies no view over its tables.
        sql = sql.replace(
            "DELETE FROM sw_chain",
            "UPDATE stored_events SET stream_hash = NULL, log_hash = NULL, log_seq = NULL",
        )
        return sql.replace("?", "%s").replace("stored_events", "sessionwire_events")

    def event(self, position: int) -> tuple[str, int, str, bytes]:
        """(originator id as text, version, topic, state) of the event at ``position``."""
        ((originator, version, topic, state),) = self.rows(
            "SELECT originator_id, originator_version, topic, state FROM stored_events "
            "WHERE {pos} = ?",
            (position,),
        )
        return str(originator), int(version), str(topic), bytes(state)

    def positions(self) -> list[int]:
        return [int(row[0]) for row in self.rows("SELECT {pos} FROM stored_events ORDER BY 1")]


def signed_lines(log: AuditLog, made: Checkpointed, session_key: str | None = None) -> list[str]:
    """The export under checkpoint ``made``: ``session_key``'s bundle, or (None) the whole
    store's export, each line without its newline."""
    return list(
        export_lines(
            log,
            session_key=session_key,
            checkpoint=made.checkpoint,
            heads=made.heads,
            members=made.members,
        )
    )


def signed_records(
    log: AuditLog, made: Checkpointed, session_key: str | None = None
) -> list[dict[str, Any]]:
    """``signed_lines`` parsed, each line a JSON object."""
    return [json.loads(line) for line in signed_lines(log, made, session_key)]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def verify_json(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(capsys, "--store", url, "--json", "audit", "verify")
    assert out, err
    return code, json.loads(out)


def stored_contents(url: str) -> tuple[list[Any], dict[str, list[tuple[object, ...]]]]:
    """The stored log (positions, bytes, chain) and the read-model rows of a store."""
    store = EventSourcedStore(
        url, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key, state.chat_type)
    )
    try:
        audit = StoreAuditLog(store)
        log = list(audit.stored_records(audit.log_bounds()))
        return log, store.read_model_snapshot()
    finally:
        store.close()


def distributed(url: str) -> bool:
    """Whether ``url`` is a store distributed by session (the PostgreSQL tier on Citus):
    its sealed records carry shard links (ADR 0067)."""
    return ON_CITUS and url.startswith("postgresql")


def assert_same_log(copy: list[Any], source: list[Any], *, on_shards: bool) -> None:
    """``copy`` (an import's stored log) is ``source``'s: the same positions, bytes, stream
    and log hashes. ``on_shards`` (both distributed, ADR 0067 §5): the copy's records are
    on its own shards, so their shard links are not the source's; each sealed record of
    either has the link its own shard's chain gives it (followed along the sealed log,
    as ``audit verify`` does), and records that share a shard in the source share one in
    the copy (the same shard count: the same hash ranges)."""
    if not on_shards:
        assert copy == source
        return
    placed = []
    for log in (source, copy):
        chains = ShardChains()
        shards: dict[int, list[int]] = {}
        for record, link in log:
            if link is None or link.log_hash is None:
                assert link is None or link.shard is None, record.notification_id
                continue
            assert link.shard is not None, f"sealed record {record.notification_id} has no shard"
            shard = link.shard.shard
            assert link.shard == chains.follow(shard, record.notification_id, link.stream_hash)
            shards.setdefault(shard, []).append(record.notification_id)
        placed.append(shards)
    assert not set(placed[0]) & set(placed[1]), "the copy's shards are its own"
    assert sorted(placed[0].values()) == sorted(placed[1].values())
    assert without_shards(copy) == without_shards(source)


def without_shards(log: list[Any]) -> list[Any]:
    """``log`` (records and their links) with no link's shard link."""
    return [(record, link if link is None else replace(link, shard=None)) for record, link in log]


def rechained(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The export with every hash recomputed, as someone who knows the rule would."""
    streams: dict[str, bytes] = {}
    head = GENESIS
    seq = 0
    out: list[dict[str, Any]] = []
    for line in lines:
        line = dict(line)
        if line["type"] == "event":
            content = RecordContent(
                originator_id=UUID(line["originator_id"]),
                originator_version=line["originator_version"],
                topic=line["topic"],
                state=line["state"].encode(),
            )
            own = stream_hash(streams.get(line["originator_id"], GENESIS), content)
            streams[line["originator_id"]] = own
            head = log_hash(head, line["notification_id"], own)
            seq += 1
            line.update(stream_hash=own.hex(), log_hash=head.hex(), log_seq=seq)
        elif line["type"] == "end":
            events = [item for item in out if item["type"] == "event"]
            line.update(
                events=len(events),
                head_notification_id=events[-1]["notification_id"],
                head_log_hash=head.hex(),
                head_log_seq=seq,
            )
        out.append(line)
    return out


def sealed_now(log: StoreAuditLog, *, passes: int = 10_000) -> None:
    """Seal until no record is left unsealed. On PostgreSQL a record is sealed once no
    older transaction is in flight anywhere on the server, and a shared test server
    always has some: a few passes (no waiting between them) find a moment with none."""
    for _ in range(passes):
        log.seal()
        if log.log_bounds().unsealed == 0:
            return
    pytest.fail(f"records still unsealed after {passes} sealing passes")


def seal_store(url: str) -> None:
    store = EventSourcedStore(
        url, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key, state.chat_type)
    )
    try:
        sealed_now(StoreAuditLog(store))
    finally:
        store.close()
