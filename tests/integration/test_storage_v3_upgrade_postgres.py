"""Storage v3 on PostgreSQL (ADR 0036 §6) from a real v2 store: ``v2_demo_postgres.sql``
was dumped from a schema the v2 code wrote (``tests/fixtures/storage_v2``). Opening it
upgrades it in place, resumably, under the schema's storage lock, with progress on
stderr; it then verifies with the same head and reads as it did, and its log goes on. A
v2 gateway is refused afterwards; a v2 schema that live gateways hold is not upgraded
unless the URL says so.

On Citus the schema, made without distribution, is distributed by the same open: only
one with ``&upgrade=yes`` (ADR 0062's refusal of a schema not distributed), which
upgrades it to v3 first and then runs the distribution steps.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from audit_rig import run_cli, verify_json
from postgres_server import ON_CITUS, schema_of
from psycopg.rows import dict_row
from sessionwire.adapters.store import postgres_format
from storage_v2_postgres import V2, V2_PG_EVENTS, golden, load_v2_dump

HISTORY_FLAGS = ("truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes")


@pytest.fixture
def v2_url(postgres_url: str) -> str:
    load_v2_dump(postgres_url)
    return postgres_url


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url.split("?")[0], autocommit=True, row_factory=dict_row)


def chain_kind(url: str) -> str:
    with connect(url) as connection:
        cursor = connection.cursor()
        assert postgres_format._relkind(cursor, schema_of(url), "sw_chain") is not None
        return "table" if postgres_format.needs_upgrade(cursor, schema_of(url)) else "view"


def reads(capsys: pytest.CaptureFixture[str], url: str) -> dict[str, Any]:
    """What list and history print, as the goldens were taken."""
    common = ["--store", url, "--config", str(V2 / "demo.config.json"), "--json"]
    found: dict[str, Any] = {}
    for name, args in (
        ("list", ["sessions", "list"]),
        ("history_main", ["sessions", "history", "main"]),
        ("history_main_tools", ["sessions", "history", "main", "--include-tools"]),
    ):
        if name == "history_main_tools":
            args = [*args, "--limit", "1000"]
        code, out, err = run_cli(capsys, *common, *args)
        assert code == 0, err
        found[name] = json.loads(out)
    for row in found["list"]["sessions"]:
        row.pop("transcriptPath", None)
    return found


def goldens() -> dict[str, Any]:
    found = {name: golden(name) for name in ("list", "history_main", "history_main_tools")}
    for row in found["list"]["sessions"]:
        row.pop("transcriptPath", None)
    return found


def upgrading(url: str) -> str:
    """The URL of the open that upgrades the v2 schema: on Citus the one that distributes
    it too, which only ``&upgrade=yes`` runs; any other open is refused, changing nothing
    (``refused_on_citus``)."""
    return f"{url}&upgrade=yes" if ON_CITUS else url


def refused_on_citus(capsys: pytest.CaptureFixture[str], url: str) -> None:
    """On Citus, an open of the undistributed v2 schema without ``&upgrade=yes`` is
    refused (exit 2, the command that distributes it named) and leaves it v2."""
    if not ON_CITUS:
        return
    code, out, err = run_cli(capsys, "--store", url, "--json", "audit", "verify")
    assert (code, out) == (2, ""), err
    assert "is not distributed on Citus" in err
    assert "distribution=citus&upgrade=yes" in err
    assert chain_kind(url) == "table"


@contextmanager
def transaction(url: str) -> Iterator[psycopg.Cursor[Any]]:
    with connect(url) as connection, connection.transaction():
        yield connection.cursor()


def test_a_real_v2_schema_upgrades_in_place_and_reads_as_it_did(
    capsys: pytest.CaptureFixture[str], v2_url: str
) -> None:
    assert chain_kind(v2_url) == "table"
    refused_on_citus(capsys, v2_url)
    code, out, err = run_cli(capsys, "--store", upgrading(v2_url), "--json", "audit", "verify")
    report = json.loads(out)
    assert (code, report["findings"]) == (0, [])
    assert report == golden("verify")  # the same records, the same head
    assert f"storage v3: upgrading {V2_PG_EVENTS} events in place (resumable)" in err
    assert "storage v3: upgrade done" in err
    assert chain_kind(v2_url) == "view"
    assert reads(capsys, v2_url) == goldens()
    # The session rows were moved to their v3 shape exactly as the read model writes it.
    code, out, err = run_cli(capsys, "--store", v2_url, "--json", "audit", "rebuild", "--check")
    assert code == 0, out
    # Opened again: nothing left to upgrade, nothing printed.
    code, _, err = run_cli(capsys, "--store", v2_url, "--json", "audit", "verify")
    assert code == 0
    assert "storage v3" not in err


def test_an_upgrade_that_fails_midway_resumes_where_it_stopped(
    capsys: pytest.CaptureFixture[str], v2_url: str
) -> None:
    lines: list[str] = []
    schema = schema_of(v2_url)
    events = f'"{schema}"."sessionwire_events"'
    with pytest.raises(postgres_format.UpgradeInterrupted):
        postgres_format.upgrade(
            lambda: transaction(v2_url),
            schema,
            events,
            progress=lines.append,
            batch=10,
            fail_batch=2,  # the third batch fails inside its transaction
        )
    assert lines == [
        f"storage v3: upgrading {V2_PG_EVENTS} events in place (resumable)",
        f"storage v3: 10/{V2_PG_EVENTS} events",
        f"storage v3: 20/{V2_PG_EVENTS} events",
    ]
    assert chain_kind(v2_url) == "table"  # as a crash would leave it
    with connect(v2_url) as connection:
        reached = connection.execute(
            f'SELECT value FROM "{schema}".sw_format WHERE name = %s', ("upgraded_to",)
        ).fetchone()
        filled = connection.execute(
            f"SELECT COUNT(*) AS n FROM {events} WHERE stream_hash IS NOT NULL"
        ).fetchone()
    assert reached == {"value": 20}
    assert filled == {"n": 20}  # the failed batch's rows were rolled back with it

    refused_on_citus(capsys, v2_url)
    code, out, err = run_cli(capsys, "--store", upgrading(v2_url), "--json", "audit", "verify")
    assert (code, json.loads(out)) == (0, golden("verify")), err
    assert f"storage v3: resuming the upgrade at event 20 of {V2_PG_EVENTS}" in err
    assert chain_kind(v2_url) == "view"
    assert reads(capsys, v2_url) == goldens()


async def test_the_log_of_an_upgraded_schema_goes_on(
    capsys: pytest.CaptureFixture[str], v2_url: str
) -> None:
    from sessionwire import Gateway, GatewayConfig
    from sessionwire.testing import VirtualClock

    gateway = await Gateway.open(
        config=GatewayConfig(), store=upgrading(v2_url), clock=VirtualClock(), resume=False
    )
    try:
        await gateway.record_message("main", role="user", content="after the upgrade")
        await gateway.record_many(
            "main", [{"role": "assistant", "content": "one"}, {"role": "user", "content": "two"}]
        )
        result = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "main", "limit": 4}
        )
    finally:
        await gateway.close()
    texts = [m["content"][0]["text"] for m in result["messages"]]
    assert texts == ["after the batch", "after the upgrade", "one", "two"]
    code, report = verify_json(capsys, v2_url)
    assert (code, report["findings"], report["checked"]) == (0, [], V2_PG_EVENTS + 3)


def test_a_v2_gateway_is_refused_after_the_upgrade(
    capsys: pytest.CaptureFixture[str], v2_url: str
) -> None:
    assert verify_json(capsys, upgrading(v2_url))[0] == 0  # upgraded
    schema = schema_of(v2_url)
    s = f'"{schema}"'
    # What the v2 code's save sends after its event rows: its stream link (every save)
    # and, for a message, its transcript line. Each is refused, so is the whole save.
    v2_link = (
        f"INSERT INTO {s}.sw_chain (notification_id, originator_id, originator_version, "
        "stream_hash) SELECT e.notification_id, v.id, v.version, v.hash "
        "FROM unnest(%s::uuid[], %s::bigint[], %s::bytea[]) AS v(id, version, hash) "
        f"JOIN {s}.sessionwire_events e ON e.originator_id = v.id "
        "AND e.originator_version = v.version"
    )
    v2_line = f"INSERT INTO {s}.sw_transcript (session, seq, role, message) VALUES (%s, %s, %s, %s)"
    with connect(v2_url) as connection:
        first = connection.execute(
            f"SELECT originator_id, originator_version FROM {s}.sessionwire_events "
            "ORDER BY notification_id LIMIT 1"
        ).fetchone()
        assert first is not None
        for statement, params in (
            (v2_link, ([first["originator_id"]], [first["originator_version"]], [b"\0" * 32])),
            (v2_line, ("x", 1, "user", "{}")),
        ):
            with pytest.raises(psycopg.DatabaseError) as refused:
                connection.execute(statement, params)
            assert refused.value.sqlstate == postgres_format.REFUSE_CODE
            assert (
                "this store is storage v3 (ADR 0036); open it with a sessionwire that reads v3"
                in str(refused.value)
            )
        # A v3 import's links (``SqlChain.write_links_many``) may be unsealed: it marks
        # its transaction, and the same insert lands on the row.
        with connection.transaction(force_rollback=True):
            connection.execute("SELECT set_config('sessionwire.writer', 'v3', true)")
            connection.execute(
                v2_link, ([first["originator_id"]], [first["originator_version"]], [b"\1" * 32])
            )
            row = connection.execute(
                f"SELECT stream_hash FROM {s}.sessionwire_events WHERE originator_id = %s "
                "AND originator_version = %s",
                (first["originator_id"], first["originator_version"]),
            ).fetchone()
            assert row == {"stream_hash": b"\1" * 32}
    code, report = verify_json(capsys, v2_url)
    assert (code, report["findings"]) == (0, [])  # nothing was changed


def test_a_v2_schema_held_by_live_gateways_is_upgraded_only_when_asked(
    capsys: pytest.CaptureFixture[str], v2_url: str
) -> None:
    schema = schema_of(v2_url)
    with connect(v2_url) as connection:
        connection.execute(
            f'INSERT INTO "{schema}".sw_gateways (gateway_id, expires_at) VALUES '
            "('v2-host-a:41', now() + interval '1 hour'), "
            "('v2-host-b:7', now() + interval '1 hour'), "
            "('gone:1', now() - interval '1 hour')"
        )
    code, _, err = run_cli(capsys, "--store", v2_url, "audit", "verify")
    assert code != 0
    assert "storage v2" in err
    assert "v2-host-a:41, v2-host-b:7" in err  # the live holders, not the expired one
    assert "upgrade=yes" in err
    assert chain_kind(v2_url) == "table"  # untouched
    # On Citus the refusal is the distribution's (no open of it but one with upgrade=yes,
    # ADR 0062), which names the v2 storage and the holders as well.
    refused_on_citus(capsys, v2_url)

    code, out, err = run_cli(
        capsys, "--store", f"{v2_url}&upgrade=yes", "--json", "audit", "verify"
    )
    assert (code, json.loads(out)) == (0, golden("verify")), err
    assert chain_kind(v2_url) == "view"


def test_a_gateway_opening_during_an_upgrade_waits_for_the_storage_lock(
    capsys: pytest.CaptureFixture[str], v2_url: str
) -> None:
    from sessionwire.adapters.store.event_store import EventSourcedStore, no_kind

    schema = schema_of(v2_url)
    key = postgres_format.storage_lock_key(schema)
    opened: list[str] = []
    with connect(v2_url) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))

        def open_store() -> None:
            store = EventSourcedStore(upgrading(v2_url), kind_of=no_kind)
            try:
                opened.append(chain_kind(v2_url))
            finally:
                store.close()

        opening = threading.Thread(target=open_store)
        opening.start()
        # The opener waits on the lock (seen by the server), and has not upgraded.
        waiting = False
        for _ in range(100_000):
            found = holder.execute(
                "SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'advisory' "
                "AND NOT granted AND objid::bigint = (hashtext(%s)::bigint & 4294967295)",
                (key,),
            ).fetchone()
            if found is not None and found["n"]:
                waiting = True
                break
        assert waiting
        assert chain_kind(v2_url) == "table"
        holder.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
        opening.join()
    assert opened == ["view"]
