"""``sessionwire audit export`` and ``audit import``: a complete JSONL export loads into an
empty store as the same log (positions, bytes, chain) and the same read models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_rig import (
    assert_same_log,
    distributed,
    populate,
    rechained,
    run_cli,
    stored_contents,
    verify_json,
)
from sessionwire import Gateway, GatewayConfig
from sessionwire.domain.session import session_uuid
from sessionwire.testing import VirtualClock


async def test_an_export_imports_as_the_same_store(
    capsys: pytest.CaptureFixture[str],
    urls: tuple[str, str],
    tmp_path: Path,
    clock: VirtualClock,
) -> None:
    source, copy = urls
    await populate(source, clock)
    exported = tmp_path / "log.jsonl"

    code, _, err = run_cli(
        capsys, "--store", source, "audit", "export", "--format", "jsonl", "-o", str(exported)
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "import", str(exported))
    assert code == 0, err

    source_log, source_models = stored_contents(source)
    copy_log, copy_models = stored_contents(copy)
    assert json.loads(out)["imported"] == len(source_log) > 10
    # On Citus the copy places its records on its own shards, with their own chains
    # (ADR 0067 §5): a complete distributed store, not the source's shard links.
    assert_same_log(copy_log, source_log, on_shards=distributed(source))
    assert copy_models == source_models
    assert len(copy_models["work"]) >= 2
    (_, source_report), (code, copy_report) = verify_json(capsys, source), verify_json(capsys, copy)
    assert code == 0
    assert copy_report == source_report

    # The copy carries on: new events follow the imported ones and extend their chain.
    gateway = await Gateway.open(config=GatewayConfig(), store=copy, clock=clock)
    await gateway.record_message("main", role="user", content="after the import")
    await gateway.close()
    code, report = verify_json(capsys, copy)
    assert (code, report["checked"]) == (0, len(source_log) + 1)


async def test_an_import_numbers_work_in_creation_order_whatever_the_logs_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clock: VirtualClock
) -> None:
    """A work row's position is its creation's place in notification-id order, as the
    source and a rebuild number it (ADR 0061). A sealed log may hold records in another
    order (on Citus it interleaves shards pass by pass, ADR 0067): here the announce run
    is sealed before the spawn made before it, and the copy still numbers them as the
    source did, and its rebuild agrees."""
    source, copy = f"sqlite:///{tmp_path}/source.db", f"sqlite:///{tmp_path}/copy.db"
    await populate(source, clock)
    code, out, err = run_cli(capsys, "--store", source, "audit", "export")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    [announce] = [
        i
        for i, line in enumerate(lines)
        if line.get("topic", "").endswith("Run.RunStarted") and "subagent_announce" in line["state"]
    ]
    spawn = next(
        line["originator_id"] for line in lines if "SubagentSpawned" in line.get("topic", "")
    )
    early = [i for i, line in enumerate(lines[:announce]) if line.get("originator_id") == spawn]
    assert early, "the spawn is made before the announce run"
    moved = [line for i, line in enumerate(lines) if i not in early]
    at = moved.index(lines[announce]) + 1
    reordered = rechained([*moved[:at], *(lines[i] for i in early), *moved[at:]])
    file = tmp_path / "reordered.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in reordered))

    code, _, err = run_cli(capsys, "--store", copy, "audit", "import", str(file))
    assert code == 0, err
    positions = {
        url: [(row[0], row[1], row[4]) for row in stored_contents(url)[1]["work"]]
        for url in (source, copy)
    }
    assert len(positions[source]) == 3
    assert positions[copy] == positions[source]
    assert run_cli(capsys, "--store", copy, "audit", "rebuild", "--check")[0] == 0


def test_the_export_is_a_header_one_line_per_event_and_an_end_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path}/small.db"
    assert run_cli(capsys, "--store", store, "record", "main", "hello")[0] == 0
    code, out, _ = run_cli(capsys, "--store", store, "audit", "export")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["type"] for line in lines] == ["header", "event", "event", "end"]
    assert lines[0]["format"] == "sessionwire-audit-export"
    assert lines[0]["version"] == 3  # 2: checkpoint and proof lines; 3: members lines
    assert [line["notification_id"] for line in lines[1:3]] == [1, 2]
    assert json.loads(lines[2]["state"])["message"]["content"][0]["text"] == "hello"
    assert lines[3] == {
        "type": "end",
        "events": 2,
        "head_notification_id": 2,
        "head_log_hash": lines[2]["log_hash"],
        "head_log_seq": 2,
    }
    assert [line["log_seq"] for line in lines[1:3]] == [1, 2]


async def test_a_session_export_holds_its_stream_and_the_work_it_took_part_in(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clock: VirtualClock
) -> None:
    source = f"sqlite:///{tmp_path}/source.db"
    await populate(source, clock)
    code, out, _ = run_cli(capsys, "--store", source, "audit", "export", "--session", "main")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["scope"] == "session"
    assert lines[0]["session"] == "agent:main:main"
    topics = {line["topic"].split(":")[-1] for line in lines[1:-1]}
    assert {"Session.SessionOpened", "Spawn.SubagentSpawned", "Run.RunStarted"} <= topics
    streams = {line["originator_id"] for line in lines[1:-1]}
    assert str(session_uuid("agent:main:main")) in streams
    assert str(session_uuid("agent:main:discord:group:dev")) not in streams
    assert lines[-1]["events"] == len(lines) - 2

    session_file = tmp_path / "main.jsonl"
    session_file.write_text(out)
    code, _, err = run_cli(
        capsys, "--store", f"sqlite:///{tmp_path}/copy.db", "audit", "import", str(session_file)
    )
    assert code == 1
    assert "import needs a complete export" in err


async def test_a_cut_off_or_garbled_file_imports_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clock: VirtualClock
) -> None:
    source = f"sqlite:///{tmp_path}/source.db"
    copy = f"sqlite:///{tmp_path}/copy.db"
    await populate(source, clock)
    code, out, _ = run_cli(capsys, "--store", source, "audit", "export")
    lines = out.splitlines()

    cut_off = tmp_path / "cut.jsonl"
    cut_off.write_text("\n".join(lines[:-1]) + "\n")
    code, _, err = run_cli(capsys, "--store", copy, "audit", "import", str(cut_off))
    assert code == 1
    assert "cut off after line" in err
    assert "nothing was imported" in err

    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text("\n".join([*lines[:3], lines[3][:40], *lines[4:]]) + "\n")
    code, _, err = run_cli(capsys, "--store", copy, "audit", "import", str(garbled))
    assert code == 1
    assert "line 4: not an event line of an export" in err

    code, _, err = run_cli(capsys, "--store", copy, "audit", "import", str(tmp_path / "no.jsonl"))
    assert code == 2
    assert "cannot read" in err

    assert stored_contents(copy)[0] == []  # nothing half-imported: a good file still goes in
    whole = tmp_path / "whole.jsonl"
    whole.write_text(out)
    assert run_cli(capsys, "--store", copy, "audit", "import", str(whole))[0] == 0


def test_import_refuses_a_store_that_holds_events(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path}/busy.db"
    assert run_cli(capsys, "--store", store, "record", "main", "hello")[0] == 0
    exported = tmp_path / "log.jsonl"
    assert run_cli(capsys, "--store", store, "audit", "export", "-o", str(exported))[0] == 0
    code, _, err = run_cli(capsys, "--store", store, "audit", "import", str(exported))
    assert code == 2
    assert "already holds events; import only into an empty store" in err
    assert len(stored_contents(store)[0]) == 2


def test_a_session_export_needs_a_valid_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path}/keys.db"
    code, out, err = run_cli(capsys, "--store", store, "audit", "export", "--session", " ")
    assert (code, out) == (2, "")
    assert "session key is empty" in err
