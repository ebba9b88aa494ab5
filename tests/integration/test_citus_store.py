"""A store distributed on Citus (``?distribution=citus``, contract decision 39, ADR 0051
and 0052): its tables distributed by session key and colocated, a message's save one
shard's transaction, each event row stamped with its worker's own transaction id, the log
sealed and verified across shards. These run where ``SESSIONWIRE_TEST_POSTGRES`` is a
Citus coordinator (the Citus tier) and skip elsewhere."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from audit_rig import populate, run_cli
from citus_cluster import EVENTS, distributed_url, is_coordinator, local_url
from command_line import run_in_process
from postgres_server import POSTGRES_URL, schema_of
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.citus_schema import NotDistributed
from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.ports.event_log import StoreConflict
from sessionwire.application.ports.session_read_model import SessionQuery, TranscriptWindow
from sessionwire.application.ports.transcript_search import TranscriptSearchQuery
from sessionwire.testing import ScriptedRuntime, VirtualClock
from store_sessions import opened, started_run, with_message


@pytest.fixture
def citus_url(postgres_url: str) -> str:
    return distributed_url(postgres_url)


@pytest.fixture
def store(citus_url: str) -> Iterator[EventSourcedStore]:
    opened_store = EventSourcedStore(citus_url, kind_of=no_kind)
    yield opened_store
    opened_store.close()


def test_every_per_session_table_is_distributed_and_colocated(
    store: EventSourcedStore, citus_url: str
) -> None:
    schema = schema_of(citus_url)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT logicalrelid::text, column_to_column_name(logicalrelid, partkey), "
            "colocationid FROM pg_dist_partition "
            "WHERE logicalrelid::regclass::text LIKE %s ORDER BY 1",
            (f"{schema}.%",),
        ).fetchall()
        local = connection.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
            "AND c.relkind = 'r' AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p "
            "WHERE p.logicalrelid = c.oid) ORDER BY 1",
            (schema,),
        ).fetchall()
    assert {(name.split(".", 1)[1], column) for name, column, _ in rows} == {
        (EVENTS, "shard_key"),
        ("sw_saves", "shard_key"),
        ("sw_sessions", "key"),
        ("sw_work", "session_key"),
        ("sw_session_streams", "session_key"),
        ("sw_runs", "session_key"),
    }
    assert len({colocation for _, _, colocation in rows}) == 1
    # The gateway tables, the work positions' counter and the schema's own records stay
    # on the coordinator.
    assert [name for (name,) in local] == [
        "sw_checkpoints",
        "sw_format",
        "sw_gateways",
        "sw_session_leases",
        "sw_work_last_position",
    ]


@contextmanager
def remote_commands(store: EventSourcedStore) -> Iterator[list[tuple[str, str]]]:
    """The commands Citus sends to the workers for this store's saves (its remote
    command log, read as notices on the store's own connections: other tests' writes
    on the cluster do not show)."""
    datastore: Any = store.datastore
    original = datastore.get_connection
    seen: list[tuple[str, str]] = []

    @contextmanager
    def logging() -> Iterator[Any]:
        with original() as conn:
            conn.execute("SET citus.log_remote_commands = on")
            conn.execute("SET client_min_messages = notice")

            def heard(notice: Any) -> None:
                seen.append((notice.message_primary or "", notice.message_detail or ""))

            conn.add_notice_handler(heard)
            try:
                yield conn
            finally:
                conn.execute("RESET citus.log_remote_commands")
                conn.execute("RESET client_min_messages")
                conn.remove_notice_handler(heard)

    datastore.get_connection = logging
    try:
        yield seen
    finally:
        datastore.get_connection = original


def test_a_message_save_is_one_shards_transaction(store: EventSourcedStore) -> None:
    session = opened("agent:main:one-shard")
    store.save(session)
    store.recorder.stop_sealing()  # the saves' commands alone
    with remote_commands(store) as seen:
        for text in ("one", "two", "three"):
            session = with_message(session, text)
            store.save(session)
    issued = [(line, detail) for line, detail in seen if line.startswith("issuing ")]
    assert any(f"{EVENTS}_" in line for line, _ in issued), seen
    # No two-phase commit, and every command to one worker ("on server …").
    assert not any("PREPARE TRANSACTION" in line for line, _ in issued), issued
    servers = {detail.split(" connectionId")[0] for _, detail in issued}
    assert len(servers) == 1, issued


def test_each_event_row_carries_its_workers_own_transaction_id(
    store: EventSourcedStore, citus_url: str
) -> None:
    schema = schema_of(citus_url)
    session = opened("agent:main:worker-xid")
    store.save(with_message(session, "hi"))
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        placements = connection.execute(
            "SELECT shard_name, nodename, nodeport FROM citus_shards "
            "WHERE table_name = %s::regclass",
            (f"{schema}.{EVENTS}",),
        ).fetchall()
    checked = 0
    for shard, host, port in placements:
        with psycopg.connect(
            host=host, port=port, user="postgres", dbname="postgres", autocommit=True
        ) as worker:
            rows = worker.execute(
                f"SELECT xmin::text::bigint, xact_id::text::bigint FROM {shard}"
            ).fetchall()
        for xmin, xact in rows:
            # The row's own version was made by the worker's transaction: its 32-bit xid.
            assert xact % 2**32 == xmin
            checked += 1
    assert checked == 2  # the session's creation and its message


def test_transcripts_are_searched_across_shards(store: EventSourcedStore) -> None:
    # Sessions on both workers (four shards), each row joined to its session within its
    # shard; hidden sessions filtered in the same query.
    for number in range(6):
        session = with_message(opened(f"agent:main:find{number}"), f"the needle {number}")
        store.save(with_message(session, f"hay {number}"))
    everyone = SessionQuery(limit=1)
    query = TranscriptSearchQuery(
        words=("needle",), scopes=(everyone,), include_tools=False, limit=4
    )
    first = store.search_transcripts(query)
    assert [match.session_key for match in first] == [
        f"agent:main:find{number}" for number in (5, 4, 3, 2)
    ]
    rest = store.search_transcripts(
        TranscriptSearchQuery(
            words=("needle",),
            scopes=(everyone,),
            include_tools=False,
            limit=4,
            before=first[-1].position,
        )
    )
    assert [match.session_key for match in rest] == ["agent:main:find1", "agent:main:find0"]
    hidden = replace(everyone, exclude_keys=frozenset({"agent:main:find5"}))
    narrowed = store.search_transcripts(replace(query, scopes=(hidden,), limit=1))
    assert [match.session_key for match in narrowed] == ["agent:main:find4"]
    # The match's index in its transcript: the second message of its session is 1.
    (hay,) = store.search_transcripts(replace(query, words=("hay", "3")))
    assert store.messages_before(hay) == 1


def _verified(url: str) -> str:
    ran = run_in_process("--store", url, "audit", "verify")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("clean: "), ran.stdout
    return ran.stdout


def test_the_log_is_sealed_and_verified_across_shards(
    store: EventSourcedStore, citus_url: str
) -> None:
    for number in range(6):
        session = opened(f"agent:main:s{number}")
        store.save(with_message(session, f"m{number}"))
    store.seal()
    assert store.sealed_position() == 12
    shown = [position for position, _ in store.records_after(0, 100)]
    assert shown == list(range(1, 13))
    # The head is named by its record's position (a sequence's number, in no set order
    # against the seals across workers).
    assert "clean: 12 event(s) checked; head #" in _verified(citus_url)


def test_an_existing_schema_is_refused_until_distributed_then_distributed_resumably(
    postgres_url: str,
) -> None:
    if not is_coordinator():
        pytest.skip("the test server is not a Citus coordinator")
    # The Citus tier's server URL carries the option itself (tests/postgres_server.py).
    postgres_url = local_url(postgres_url)
    local = EventSourcedStore(postgres_url, kind_of=no_kind)
    session = opened("agent:main:before")
    local.save(with_message(session, "kept"))
    local.close()
    with pytest.raises(NotDistributed, match="distribution=citus&upgrade=yes"):
        EventSourcedStore(f"{postgres_url}&distribution=citus", kind_of=no_kind)
    distributed = EventSourcedStore(
        f"{postgres_url}&distribution=citus&upgrade=yes", kind_of=no_kind
    )
    try:
        found = distributed.session_for_update("agent:main:before")
        assert found is not None
        distributed.save(with_message(found.to_aggregate(), "after"))
    finally:
        distributed.close()
    assert "clean: 3 event(s) checked; head #" in _verified(f"{postgres_url}&distribution=citus")
    with pytest.raises(NotDistributed, match="open it with distribution=citus"):
        EventSourcedStore(postgres_url, kind_of=no_kind)


def test_a_reader_of_the_log_stops_at_a_position_whose_worker_has_not_committed_yet(
    store: EventSourcedStore, citus_url: str
) -> None:
    """A read across shards reads each at its own moment: it can see a later sealing
    pass's positions on one shard without an earlier pass's on another. The stream gives
    the unbroken prefix, then the rest once it is there, never a gap (ADR 0023, 0051,
    0067)."""
    for number in range(4):
        session = opened(f"agent:main:lag{number}")
        store.save(with_message(session, f"m{number}"))
    store.seal()
    events = f"{schema_of(citus_url)}.{EVENTS}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        # Position 5 as a reader sees it before its pass's shard has committed.
        seal_of_5 = connection.execute(
            f"SELECT notification_id, log_hash FROM {events} WHERE log_seq = 5"
        ).fetchone()
        assert seal_of_5 is not None
        connection.execute(
            f"UPDATE {events} SET log_seq = NULL, log_hash = NULL WHERE notification_id = %s",
            (seal_of_5[0],),
        )
        assert [position for position, _ in store.records_after(0, 100)] == [1, 2, 3, 4]
        assert store.records_after(4, 100) == []
        connection.execute(
            f"UPDATE {events} SET log_seq = 5, log_hash = %s WHERE notification_id = %s",
            (seal_of_5[1], seal_of_5[0]),
        )
    assert [position for position, _ in store.records_after(4, 100)] == list(range(5, 9))


_TABLES = (EVENTS, "sw_saves", "sw_sessions", "sw_work", "sw_session_streams", "sw_runs")
_CANDIDATES = [f"cron:pair{number}" for number in range(64)]


def _placements(schema: str, keys: list[str]) -> dict[str, tuple[frozenset[int], str]]:
    """Each key's shards (one per distributed table, colocated) and the worker holding
    them, as Citus's own functions place them."""
    found: dict[str, tuple[frozenset[int], str]] = {}
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for key in keys:
            shards = frozenset(
                int(row[0])
                for row in connection.execute(
                    "SELECT get_shard_id_for_distribution_column(t, %s::text) "
                    "FROM unnest(%s::regclass[]) AS t",
                    (key, [f"{schema}.{table}" for table in _TABLES]),
                ).fetchall()
            )
            (node,) = connection.execute(
                "SELECT DISTINCT n.nodename || ':' || n.nodeport FROM pg_dist_placement p "
                "JOIN pg_dist_node n USING (groupid) WHERE p.shardid = ANY(%s)",
                (list(shards),),
            ).fetchone() or ("",)
            found[key] = (shards, str(node))
    return found


async def _exchange_commands(
    citus_url: str, pick: Any
) -> tuple[list[tuple[str, str]], frozenset[int], str]:
    """The remote commands of one ``sessions_send`` between two sessions that ``pick``
    chooses from their placements (reply awaited, the sealer stopped: its passes are
    its own transactions), and the shards of those two sessions."""
    gateway = await Gateway.open(
        config=GatewayConfig.load(
            {
                "session": {"agentToAgent": {"maxPingPongTurns": 0}},
                "tools": {"sessions": {"visibility": "agent"}},
            }
        ),
        store=citus_url,
        runtime=ScriptedRuntime.from_dict(
            {"rules": [{"step": "announce", "reply": "ANNOUNCE_SKIP"}, {"reply": "done"}]}
        ),
    )
    try:
        # A session's rows live under its full key (``cron:x`` is the main agent's).
        full = _placements(schema_of(citus_url), [f"agent:main:{key}" for key in _CANDIDATES])
        placed = {key: full[f"agent:main:{key}"] for key in _CANDIDATES}
        source, target = pick(placed)
        for key in (source, target):
            await gateway.record_message(key, role="user", content="hi")
        await gateway.wait_idle()
        store = store_of(gateway)
        store.recorder.stop_sealing()
        with remote_commands(store) as seen:
            result = await gateway.call_tool(
                source,
                "sessions_send",
                {"sessionKey": target, "message": "m", "timeoutSeconds": 30},
            )
            assert result["status"] == "ok", result
            await gateway.wait_idle()
    finally:
        await gateway.close()
    issued = [(line, detail) for line, detail in seen if line.startswith("issuing ")]
    assert any(f"{EVENTS}_" in line for line, _ in issued), seen
    return issued, placed[source][0] | placed[target][0], source


def _writes(issued: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The commands that write rows (reads by a stream's id alone still ask every shard:
    they commit nothing)."""
    return [
        (line, detail)
        for line, detail in issued
        if re.match(r"issuing (INSERT|UPDATE|DELETE|WITH saved AS \(INSERT)", line)
    ]


def _shards_written(schema: str, issued: list[tuple[str, str]]) -> set[int]:
    named = re.compile(rf"{re.escape(schema)}\.\"?(?:{'|'.join(_TABLES)})_(\d+)\b")
    return {int(shard) for line, _ in _writes(issued) for shard in named.findall(line)}


_TRACE_MEMBER = re.compile(
    r"sw_session_streams_\d+ .*VALUES \('trace:[^']*'::text, '(\w+)'::text, '(\w+)'"
)


def _two_phase_commits(issued: list[tuple[str, str]]) -> set[str]:
    # A prepared participant's gid: citus_<group>_<pid>_<transaction>_<connection>.
    gids = re.compile(r"PREPARE TRANSACTION 'citus_\d+_(\d+_\d+)_\d+'")
    return {found for line, _ in issued for found in gids.findall(line)}


async def test_an_exchange_within_one_shard_commits_in_one_phase_but_for_its_trace_index(
    citus_url: str,
) -> None:
    """Every statement of an exchange's saves carries the key its rows live under, so an
    exchange between two sessions of one shard writes to that shard only, but for the
    rows that index its runs by trace (``trace:<run id>``, a key of their own): a save
    that makes a run writes one of those, and only those saves commit in two phases
    (ADR 0062; by run id alone, a run's UPDATE went to every shard, and every save of
    several events was an INSERT ... SELECT, which Citus commits in two phases)."""

    def same_shard(placed: dict[str, tuple[frozenset[int], str]]) -> tuple[str, str]:
        first = _CANDIDATES[0]
        return first, next(k for k in _CANDIDATES[1:] if placed[k][0] == placed[first][0])

    issued, shards, _ = await _exchange_commands(citus_url, same_shard)
    schema = schema_of(citus_url)
    elsewhere = [
        line for line, _ in _writes(issued) if not _shards_written(schema, [(line, "")]) <= shards
    ]
    # The trace index's rows, wherever their random trace ids put them (the pair's shard
    # too, at times).
    assert all(_TRACE_MEMBER.search(line) for line in elsewhere), elsewhere
    runs = {
        stream
        for line, _ in _writes(issued)
        for stream, kind in _TRACE_MEMBER.findall(line)
        if kind == "run"
    }
    assert len(runs) == 2, elsewhere  # the target's run, and the requester's reply
    assert len(_two_phase_commits(issued)) <= len(runs), issued


async def test_an_exchange_across_workers_touches_only_its_two_sessions_shards(
    citus_url: str,
) -> None:
    """Across two workers, the saves that write both sessions' rows commit in two
    phases; no statement writes a third shard but the trace index's rows (ADR 0062)."""

    def two_workers(placed: dict[str, tuple[frozenset[int], str]]) -> tuple[str, str]:
        first = _CANDIDATES[0]
        return first, next(k for k in _CANDIDATES[1:] if placed[k][1] != placed[first][1])

    issued, shards, _ = await _exchange_commands(citus_url, two_workers)
    schema = schema_of(citus_url)
    elsewhere = [
        line for line, _ in _writes(issued) if not _shards_written(schema, [(line, "")]) <= shards
    ]
    assert all(_TRACE_MEMBER.search(line) for line in elsewhere), elsewhere
    # Each of the exchange's saves at most once, and some of them (its opening writes
    # both sessions' rows).
    saves = [line for line, _ in _writes(issued) if "sw_saves_" in line]
    assert 0 < len(_two_phase_commits(issued)) <= len(saves), issued


def test_an_export_of_a_plain_store_imports_into_a_distributed_one(
    citus_url: str, tmp_path: Path, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """``audit import`` gives every imported row its stream's shard key, from the stream's
    first event (as distributing an existing schema does): the log, its chain and the
    read models come out as on the plain store, spread over the shards (ADR 0062)."""
    source = f"sqlite:///{tmp_path}/source.db"
    asyncio.run(populate(source, clock))
    exported = tmp_path / "log.jsonl"
    code, _, err = run_cli(
        capsys, "--store", source, "audit", "export", "--format", "jsonl", "-o", str(exported)
    )
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "--json", "--store", citus_url, "audit", "import", str(exported)
    )
    assert code == 0, err
    count = json.loads(out)["imported"]
    assert count > 10
    assert f"clean: {count} event(s) checked; head #" in _verified(citus_url)
    schema = schema_of(citus_url)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows, keyless, split = (
            connection.execute(statement).fetchone()
            for statement in (
                f'SELECT count(*) FROM "{schema}".{EVENTS}',
                f'SELECT count(*) FROM "{schema}".{EVENTS} WHERE shard_key IS NULL',
                # A stream's rows all under one key.
                f'SELECT count(*) FROM (SELECT originator_id FROM "{schema}".{EVENTS} '
                "GROUP BY originator_id HAVING count(DISTINCT shard_key) > 1) AS s",
            )
        )
        # A session's own events under its key; the spawn's under its requester's.
        sessions = connection.execute(
            f'SELECT s.key, e.shard_key, count(*) FROM "{schema}".{EVENTS} e '
            f"JOIN \"{schema}\".sw_sessions s ON s.id = replace(e.originator_id::text, '-', '') "
            "AND s.key = e.shard_key GROUP BY 1, 2 ORDER BY 1"
        ).fetchall()
        (spawn,) = connection.execute(
            f"SELECT id::uuid FROM \"{schema}\".sw_work WHERE kind = 'spawn'"
        ).fetchone() or (None,)
        spawns = connection.execute(
            f'SELECT DISTINCT shard_key FROM "{schema}".{EVENTS} WHERE originator_id = %s',
            (spawn,),
        ).fetchall()
    assert (rows, keyless, split) == ((count,), (0,), (0,))
    assert [key for key, _, _ in sessions][:2] == [
        "agent:main:discord:group:dev",
        "agent:main:main",
    ]
    assert len(sessions) == 3  # and the child's
    assert spawns == [("agent:main:main",)]
    code, out, err = run_cli(capsys, "--json", "--store", citus_url, "sessions", "list")
    assert code == 0, err
    assert len(json.loads(out)["sessions"]) == 3


def test_a_sealing_pass_over_one_sessions_rows_is_one_shards_transaction(
    store: EventSourcedStore, citus_url: str
) -> None:
    """The sealer's UPDATE names the shard keys of the rows it seals, so Citus sends it
    to their shards only: a pass over one session's rows is no two-phase commit over
    every shard (ADR 0062)."""
    store.recorder.stop_sealing()
    session = opened("agent:main:sealed-alone")
    store.save(with_message(session, "one"))
    (placed,) = _placements(schema_of(citus_url), ["agent:main:sealed-alone"]).values()
    with remote_commands(store) as seen:
        assert store.seal() == 2
    issued = [(line, detail) for line, detail in seen if line.startswith("issuing ")]
    updates = [line for line, _ in _writes(issued)]
    assert updates, issued
    assert all(
        line.startswith(f"issuing UPDATE {schema_of(citus_url)}.{EVENTS}_") for line in updates
    )
    assert _shards_written(schema_of(citus_url), issued) <= placed[0], updates
    assert not _two_phase_commits(issued), issued


def test_a_sessions_history_and_a_matchs_index_are_read_from_its_shard(
    store: EventSourcedStore, citus_url: str
) -> None:
    """Where the session's key is known (a history read by key, a search match), its
    rows are read with it, from its shard only, not from every shard (ADR 0062)."""
    key = "agent:main:read-alone"
    session = with_message(with_message(opened(key), "first words"), "the needle")
    store.save(session)
    schema = schema_of(citus_url)
    (placed,) = _placements(schema, [key]).values()
    named = re.compile(rf"{re.escape(schema)}\.{EVENTS}_(\d+)\b")
    for window, lines in (
        (TranscriptWindow(limit=10, include_tools=True), 2),
        (TranscriptWindow(limit=1, include_tools=True, offset=1), 1),
    ):
        with remote_commands(store) as seen:
            found = store.session_transcript(key, window, lambda _: True)
        assert found.messages is not None
        assert len(found.messages) == lines
        shards = {int(shard) for line, _ in seen for shard in named.findall(line)}
        assert shards, seen
        assert shards <= placed[0], seen
    (match,) = store.search_transcripts(
        TranscriptSearchQuery(
            words=("needle",), scopes=(SessionQuery(limit=1),), include_tools=False, limit=4
        )
    )
    with remote_commands(store) as seen:
        assert store.messages_before(match) == 1
    shards = {int(shard) for line, _ in seen for shard in named.findall(line)}
    assert shards, seen
    assert shards <= placed[0], seen


def test_a_work_row_lost_with_its_save_leaves_no_gap_in_the_positions(
    store: EventSourcedStore, citus_url: str
) -> None:
    """A work row's position is its creation's number, with no gaps, as a rebuild from
    the log numbers them: one drawn by a save that then failed is drawn again."""
    work = f'"{schema_of(citus_url)}".sw_work'
    first = opened("agent:main:first")
    first_run = started_run("agent:main:first")
    store.save(first, first_run)
    second = opened("agent:main:second")
    second_run = started_run("agent:main:second")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        # The run's own row already there: the save fails at its work row's insert.
        connection.execute(
            f"INSERT INTO {work} (id, kind, status, session_key, position, version, "
            "created_on, modified_on, state) VALUES (%s, 'run', 'queued', %s, 0, 1, "
            "'', '', '{}')",
            (second_run.id.hex, "agent:main:second"),
        )
        with pytest.raises(StoreConflict):
            store.save(second, second_run)
        connection.execute(f"DELETE FROM {work} WHERE id = %s", (second_run.id.hex,))
    third_run = started_run("agent:main:third")
    store.save(opened("agent:main:third"), third_run)
    with store.reading() as cursor:
        cursor.execute(f"SELECT id, position FROM {work} ORDER BY position")
        assert [(row["id"], row["position"]) for row in cursor.fetchall()] == [
            (first_run.id.hex, 1),
            (third_run.id.hex, 2),
        ]


def test_a_rebuild_that_replaces_the_work_rows_numbers_new_ones_after_them(
    store: EventSourcedStore, citus_url: str
) -> None:
    """``audit rebuild --replace`` puts the rebuilt positions in; new work rows go on
    from the last of them, not from the counter's number before."""
    schema = schema_of(citus_url)
    runs = [started_run(f"agent:main:r{number}") for number in range(2)]
    for number, run in enumerate(runs):
        store.save(opened(f"agent:main:r{number}"), run)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        # Positions past the rows' own, as a store whose positions skipped numbers has.
        connection.execute(f'UPDATE "{schema}".sw_work SET position = position + 100')
        connection.execute(f'UPDATE "{schema}".sw_work_last_position SET position = 102')
    differences = StoreAuditLog(store).rebuild_and_compare(replace=True)
    assert differences["work"].changed == 2
    later = started_run("agent:main:later")
    store.save(opened("agent:main:later"), later)
    with store.reading() as cursor:
        cursor.execute(f'SELECT id, position FROM "{schema}".sw_work ORDER BY position')
        assert [(row["id"], row["position"]) for row in cursor.fetchall()] == [
            (runs[0].id.hex, 1),
            (runs[1].id.hex, 2),
            (later.id.hex, 3),
        ]
