"""``audit import`` of a file nobody vouches for: only sessionwire's own event topics are
taken (a topic is never resolved to an arbitrary module), every hash is recomputed while
loading, and any failure leaves the target store exactly as it was."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from audit_rig import assert_same_log, distributed, populate, rechained, run_cli, stored_contents
from postgres_server import POSTGRES_URL, schema_of
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import VirtualClock

Line = dict[str, Any]


async def exported(capsys: pytest.CaptureFixture[str], url: str, clock: VirtualClock) -> list[Line]:
    await populate(url, clock)
    code, out, err = run_cli(capsys, "--store", url, "audit", "export")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def appended(lines: list[Line], topic: str, state: dict[str, Any]) -> list[Line]:
    """The export with one more event (a new stream's first) before its end line."""
    last = lines[-2]
    extra = {
        "type": "event",
        "notification_id": last["notification_id"] + 1,
        "originator_id": str(uuid.uuid4()),
        "originator_version": 1,
        "topic": topic,
        "state": json.dumps(state),
    }
    return rechained([*lines[:-1], extra, lines[-1]])


def write(path: Path, lines: list[Line]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def import_file(capsys: pytest.CaptureFixture[str], url: str, path: Path) -> tuple[int, str]:
    code, out, err = run_cli(capsys, "--store", url, "audit", "import", str(path))
    return code, out + err


def opened_state(lines: list[Line]) -> dict[str, Any]:
    first = next(line for line in lines if line.get("topic", "").endswith("SessionOpened"))
    return dict(json.loads(first["state"]))


CRAFTED: dict[str, Callable[[list[Line]], list[Line]]] = {
    # The topic names a module and a name in it; resolving it would import the module.
    "event topic": lambda lines: appended(lines, "this:s", {}),
    # A creation event resolves its aggregate's topic when it builds the aggregate.
    "aggregate topic": lambda lines: appended(
        lines,
        "sessionwire.domain.session:Session.SessionOpened",
        {**opened_state(lines), "originator_topic": "this:s"},
    ),
}


@pytest.mark.parametrize("craft", CRAFTED, ids=list(CRAFTED))
async def test_a_crafted_topic_is_never_imported_as_a_module(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
    craft: str,
) -> None:
    source, copy = f"sqlite:///{tmp_path}/source.db", f"sqlite:///{tmp_path}/copy.db"
    lines = await exported(capsys, source, clock)
    monkeypatch.delitem(sys.modules, "this", raising=False)
    crafted = CRAFTED[craft](lines)

    code, output = import_file(capsys, copy, write(tmp_path / "crafted.jsonl", crafted))

    assert "this" not in sys.modules
    assert "Beautiful is better than ugly" not in output
    assert code == 1
    assert f"line {len(crafted) - 1}:" in output
    assert "this:s" in output
    assert "nothing was imported" in output
    assert stored_contents(copy) == ([], stored_contents(copy)[1])
    assert import_file(capsys, copy, write(tmp_path / "good.jsonl", lines))[0] == 0


async def test_hashes_deleted_or_altered_are_refused_at_their_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clock: VirtualClock
) -> None:
    source, copy = f"sqlite:///{tmp_path}/source.db", f"sqlite:///{tmp_path}/copy.db"
    lines = await exported(capsys, source, clock)
    middle = len(lines) // 2  # an event line (0-based), reported as line middle + 1

    def edited(change: Callable[[Line], None], *, at: int = middle) -> list[Line]:
        copied = [dict(line) for line in lines]
        change(copied[at])
        return copied

    def drop_hashes(line: Line) -> None:
        line.pop("stream_hash", None)
        line.pop("log_hash", None)

    def flip(name: str) -> Callable[[Line], None]:
        def change(line: Line) -> None:
            value = bytes.fromhex(line[name])
            line[name] = (bytes([value[0] ^ 1]) + value[1:]).hex()

        return change

    def alter_state(line: Line) -> None:
        line["state"] += " "

    cases = {
        "deleted": (edited(drop_hashes), f"line {middle + 1}: no chain hashes"),
        "stream hash altered": (edited(flip("stream_hash")), f"line {middle + 1}: the stream"),
        "log hash altered": (edited(flip("log_hash")), f"line {middle + 1}: the log hash"),
        "event edited": (edited(alter_state), f"line {middle + 1}: the stream hash"),
        "event dropped": (
            [*lines[:middle], *lines[middle + 1 :]],
            f"line {middle + 1}:",
        ),
        "head altered": (
            edited(flip("head_log_hash"), at=len(lines) - 1),
            f"line {len(lines)}: the end line names head",
        ),
    }
    everywhere = [dict(line) for line in lines]
    for line in everywhere:
        drop_hashes(line)
    cases["deleted everywhere"] = (everywhere, f"line {len(lines)}: the end line names head")

    for name, (changed, where) in cases.items():
        code, output = import_file(capsys, copy, write(tmp_path / "changed.jsonl", changed))
        assert (code, where in output, "nothing was imported" in output) == (1, True, True), (
            name,
            output,
        )
    assert stored_contents(copy)[0] == []
    assert import_file(capsys, copy, write(tmp_path / "good.jsonl", lines))[0] == 0


async def test_a_failed_import_leaves_the_store_as_it_was(
    capsys: pytest.CaptureFixture[str],
    urls: tuple[str, str],
    tmp_path: Path,
    clock: VirtualClock,
) -> None:
    source, copy = urls
    lines = await exported(capsys, source, clock)
    empty = stored_contents(copy)
    # Correctly chained, so only loading the events can find them wrong: a message
    # whose state is not a message, and an event for a stream that was never opened.
    broken = {
        "unreadable state": appended(
            lines, "sessionwire.domain.session:Session.MessageAppended", {"message": 5}
        ),
        "no stream to apply to": appended(
            lines,
            "sessionwire.domain.session:Session.SessionArchived",
            {"timestamp": "2026-01-01T00:00:00+00:00", "reason": "crafted"},
        ),
    }
    for name, crafted in broken.items():
        code, output = import_file(capsys, copy, write(tmp_path / "broken.jsonl", crafted))
        assert code == 1, (name, output)
        assert f"line {len(crafted) - 1}:" in output, (name, output)
        assert "nothing was imported" in output
        assert stored_contents(copy) == empty, name

    # Still a store like any other: written, rebuilt, and imported into.
    assert run_cli(capsys, "--store", copy, "audit", "rebuild", "--check")[0] == 0
    gateway = await Gateway.open(config=GatewayConfig(), store=copy, clock=clock)
    await gateway.record_message("main", role="user", content="a store after all")
    await gateway.close()
    assert stored_contents(copy)[0] != []
    fresh = copy.replace("copy.db", "fresh.db") if copy.startswith("sqlite") else None
    target = fresh or copy
    if fresh is None:
        import psycopg

        schema = schema_of(copy)
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    code, output = import_file(capsys, target, write(tmp_path / "good.jsonl", lines))
    assert code == 0, output
    (copy_log, copy_models), (source_log, source_models) = (
        stored_contents(target),
        stored_contents(source),
    )
    # On Citus the copy's records are on its own shards, with their own chains (ADR 0067 §5).
    assert_same_log(copy_log, source_log, on_shards=distributed(source))
    assert copy_models == source_models


@pytest.mark.parametrize(
    ("line_type", "field"),
    [
        ("event", "notification_id"),
        ("event", "originator_version"),
        ("event", "log_seq"),
        ("end", "events"),
        ("end", "head_notification_id"),
    ],
)
async def test_a_position_past_64_bits_is_a_named_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    clock: VirtualClock,
    line_type: str,
    field: str,
) -> None:
    """Issue 27 finding 8: 2^63 in a position was an OverflowError traceback from deep in
    the import; it is the line's problem, named on one line, and nothing is imported."""
    lines = await exported(capsys, f"sqlite:///{tmp_path}/source.db", clock)
    at = next(i for i, line in enumerate(lines) if line["type"] == line_type)
    lines[at] = {**lines[at], field: 2**63}
    copy = f"sqlite:///{tmp_path}/copy.db"
    code, output = import_file(capsys, copy, write(tmp_path / "huge.jsonl", lines))
    assert code == 1, output
    assert "Traceback" not in output
    assert "OverflowError" not in output
    [message] = output.strip().splitlines()
    assert f"line {at + 1}: " in message
    assert f"{field}: Input should be less than or equal to 9223372036854775807" in message
    assert message.endswith("nothing was imported")
