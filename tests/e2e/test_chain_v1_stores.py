"""Stores written with chain v1 (every row sealed as it was written, no ``log_seq``) keep
verifying after the upgrade to chain v2, with the same head, and new events extend their
log (ADR 0016). The SQLite store is a file written by the v1 code and kept in
tests/fixtures; the PostgreSQL one is the real v2 store of tests/fixtures/storage_v2 put
back into the v1 layout with plain SQL (storage v3, ADR 0036, has no chain table to
strip), then upgraded through v2 to v3 when opened."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from audit_rig import RawStore, verify_json
from postgres_server import ON_CITUS
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import VirtualClock
from storage_v2_postgres import load_v2_dump

V1_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "chain_v1.db"
# What `sessionwire audit verify` printed for the file when the v1 code wrote it.
V1_EVENTS = 25
V1_HEAD = "8ef20059fcbec5ef099c63ac1e666a293976bb5c463df62b7d368bcaedd70b17"


async def v1_postgres_store(url: str, clock: VirtualClock) -> None:
    """A PostgreSQL store in chain v1's layout: one writer's chain, whose rows v1 would
    have written alike (the log hash rule is v1's, over rows in notification order: the
    demo's one gateway sealed them in that order)."""
    load_v2_dump(url)
    RawStore(url).run(
        ("DROP INDEX sw_chain_seq", ()),
        ("DROP INDEX sw_chain_unsealed", ()),
        ("ALTER TABLE sw_chain DROP COLUMN log_seq", ()),
        ("ALTER TABLE sw_chain DROP COLUMN xact_id", ()),
        ("ALTER TABLE sw_chain ALTER COLUMN log_hash SET NOT NULL", ()),
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def v1_store(request: pytest.FixtureRequest, tmp_path: Path, clock: VirtualClock) -> str:
    if request.param == "sqlite":
        copy = tmp_path / "v1.db"
        shutil.copyfile(V1_FILE, copy)
        return f"sqlite:///{copy}"
    url = str(request.getfixturevalue("postgres_url"))
    await v1_postgres_store(url, clock)
    # On Citus the restored schema's tables are local: a store opened with upgrade=yes
    # distributes them (ADR 0051's steps), and every later open finds them done.
    return f"{url}&upgrade=yes" if ON_CITUS else url


def columns(url: str) -> set[str]:
    raw = RawStore(url)
    if raw.is_sqlite:
        return {str(row[1]) for row in raw.rows("PRAGMA table_info(sw_chain)")}
    return {
        str(row[0])
        for row in raw.rows(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'sw_chain' "
            "AND table_schema = current_schema()"
        )
    }


async def test_a_v1_store_verifies_and_its_log_goes_on(
    capsys: pytest.CaptureFixture[str], v1_store: str, clock: VirtualClock
) -> None:
    assert "log_seq" not in columns(v1_store)
    code, before = verify_json(capsys, v1_store)
    assert (code, before["findings"], before["unsealed"]) == (0, [], 0)
    assert "log_seq" in columns(v1_store)  # upgraded on opening (a view's, on PostgreSQL)
    count = before["checked"]
    assert before["head"]["log_seq"] == count
    if v1_store.startswith("sqlite:"):
        assert (count, before["head"]["log_hash"]) == (V1_EVENTS, V1_HEAD)

    # resume=False: only the one message is new (no due archive timers fire on this open).
    gateway = await Gateway.open(config=GatewayConfig(), store=v1_store, clock=clock, resume=False)
    await gateway.record_message("main", role="user", content="after the upgrade")
    await gateway.close()

    code, after = verify_json(capsys, v1_store)
    assert (code, after["findings"], after["unsealed"]) == (0, [], 0)
    assert after["checked"] == after["head"]["log_seq"] == count + 1


async def test_a_v1_store_still_finds_an_edit_of_a_v1_record(
    capsys: pytest.CaptureFixture[str], v1_store: str
) -> None:
    raw = RawStore(v1_store)
    position = raw.positions()[3]
    raw.run(
        ("UPDATE sw_chain SET stream_hash = ? WHERE notification_id = ?", (b"\1" * 32, position))
    )
    code, report = verify_json(capsys, v1_store)
    assert code == 1
    kinds: set[Any] = {(f["kind"], f["position"]["notification_id"]) for f in report["findings"]}
    # The row's own stream link, and the sealed log at that row.
    assert ("altered", position) in kinds
    assert ("deleted", position) in kinds
