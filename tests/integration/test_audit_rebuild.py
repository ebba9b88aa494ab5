"""``sessionwire audit rebuild``: project every read model again from the log, report how
the live tables differ (rows added, removed, changed), and put the rebuilt rows live."""

from __future__ import annotations

import json
from typing import Any

import pytest
from audit_rig import RawStore, populate, run_cli
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock


@pytest.fixture(params=["sqlite", "postgres"])
async def raw(request: pytest.FixtureRequest, tmp_path: Any, clock: VirtualClock) -> RawStore:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/rebuilt.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    await populate(url, clock)
    return RawStore(url)


def rebuild(capsys: pytest.CaptureFixture[str], url: str, *flags: str) -> tuple[int, Any]:
    code, out, err = run_cli(capsys, "--store", url, "--json", "audit", "rebuild", *flags)
    assert out, err
    return code, json.loads(out)


def counts(report: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    return {
        name: (table["added"], table["removed"], table["changed"])
        for name, table in report["tables"].items()
    }


ALL_NONE = {
    "sessions": (0, 0, 0),
    "transcript": (0, 0, 0),
    "work": (0, 0, 0),
    "session_streams": (0, 0, 0),
    "runs": (0, 0, 0),
}


def tables_of(raw: RawStore, table_counts: dict[str, tuple[int, int, int]]) -> dict[str, Any]:
    """The read models a store projects: with storage v3 (ADR 0036, both engines) the
    transcript is the log's own message rows, so nothing is rebuilt or compared for it."""
    return {name: value for name, value in table_counts.items() if name != "transcript"}


def test_live_read_models_that_match_the_log_rebuild_without_differences(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    code, report = rebuild(capsys, raw.url)
    assert code == 0
    assert counts(report) == tables_of(raw, ALL_NONE)
    assert report["replaced"] is False


def test_differences_are_reported_per_table_and_then_repaired(
    capsys: pytest.CaptureFixture[str], raw: RawStore
) -> None:
    dev = session_uuid("agent:main:discord:group:dev").hex
    raw.run(
        ("UPDATE sw_sessions SET label = 'tampered' WHERE id = ?", (dev,)),
        (
            "INSERT INTO sw_work (id, kind, status, session_key, position, version, "
            "created_on, modified_on, state) VALUES (?, 'run', 'queued', 'x', 999, 1, "
            "'2026-01-01', '2026-01-01', '{}')",
            ("f" * 32,),
        ),
    )

    code, checked = rebuild(capsys, raw.url, "--check")
    assert code == 1
    assert counts(checked) == tables_of(
        raw,
        {
            "sessions": (0, 0, 1),
            "transcript": (1, 0, 0),
            "work": (0, 1, 0),
            "session_streams": (0, 0, 0),
            "runs": (0, 0, 0),
        },
    )
    assert checked["tables"]["sessions"]["examples"] == [f"changed {dev}"]
    assert checked["replaced"] is False
    assert rebuild(capsys, raw.url, "--check")[0] == 1  # --check left them as they were

    code, repaired = rebuild(capsys, raw.url)
    assert code == 1
    assert counts(repaired) == counts(checked)
    assert repaired["replaced"] is True
    none = tables_of(raw, ALL_NONE)
    assert rebuild(capsys, raw.url) == (0, {"replaced": False, "tables": report_of(none)})


def report_of(table_counts: dict[str, tuple[int, int, int]]) -> dict[str, Any]:
    return {
        name: {"added": a, "removed": r, "changed": c, "examples": []}
        for name, (a, r, c) in table_counts.items()
    }


def test_the_table_view_names_each_read_model(
    raw: RawStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "--store", raw.url, "audit", "rebuild", "--check")
    assert code == 0
    for table in ("sessions", "work", *tables_of(raw, {"transcript": (0, 0, 0)})):
        assert table in out
    assert "the live read models equal the log's" in out


def test_a_rebuild_that_keeps_few_aggregates_in_memory_gives_the_same_rows(
    capsys: pytest.CaptureFixture[str], raw: RawStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every aggregate but the last used is restored from the rows the rebuild wrote.
    monkeypatch.setattr("sessionwire.adapters.store.audit.REPLAY_KEEP", 1)
    monkeypatch.setattr("sessionwire.adapters.store.audit.REBUILD_PAGE", 2)
    code, report = rebuild(capsys, raw.url, "--check")
    assert (code, counts(report)) == (0, tables_of(raw, ALL_NONE))
