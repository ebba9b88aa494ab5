"""A damaged SQLite file, and one held by a live gateway (issue 36, item 7; decision 20).

The file is damaged as a disk or a copy damages one: its tail overwritten (the header
and the first pages still read), or its second half. Every command that meets the damage
refuses in one line, exit 2, naming the store and what SQLite found; ``serve`` reads
every page before it opens its port; a server that meets it answers 503, never a 500.
Beside a live writer, a second ``serve`` does not start, and the gateway methods of a
second gateway answer as its tools do (no 500, no path), with a log that renders.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from command_line import Ran, run_process
from sessionwire import Gateway, SyncGateway
from sessionwire.adapters.cli.context import configure_logging
from sessionwire.adapters.http.app import create_app
from store_holder import holding

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "damaged-store-token-0123456789abcdefghij"
LAST = "webchat:dm:u40"


def recorded(path: Path) -> str:
    store = f"sqlite:///{path}"
    with SyncGateway.open(store=store) as gateway:
        gateway.record_message("main", role="user", content="hello")
        for n in range(1, 41):
            gateway.record_message(f"webchat:dm:u{n}", role="user", content="x" * 3000)
    return store


def overwrite(path: Path, start: int) -> None:
    with path.open("r+b") as file:
        file.seek(start)
        file.write(b"\x07" * (path.stat().st_size - start))


@pytest.fixture
def damaged_tail(tmp_path: Path) -> str:
    path = tmp_path / "tail.db"
    store = recorded(path)
    overwrite(path, path.stat().st_size - 8192)
    return store


@pytest.fixture
def damaged_half(tmp_path: Path) -> str:
    path = tmp_path / "half.db"
    store = recorded(path)
    overwrite(path, path.stat().st_size // 2)
    return store


async def answered(store: str, *requests: tuple[str, dict[str, Any]]) -> list[httpx.Response]:
    """Each (path, body) posted with an operator token to a gateway opened beside
    whatever holds ``store`` (it opens without resuming, as a reader does)."""
    gateway = await Gateway.open(store=store, resume=False)
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Sessionwire-Session": "main"}
    transport = httpx.ASGITransport(app=create_app(gateway, TOKEN), raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
            return [await http.post(path, json=body, headers=auth) for path, body in requests]
    finally:
        await gateway.close()


def assert_refused_in_one_line(answer: Ran, store: str, streamed: bool = False) -> None:
    returncode, stdout, stderr = answer.returncode, answer.stdout, answer.stderr
    assert "Traceback" not in stderr
    assert returncode == 2, stderr
    # An export streams: what it wrote before the damaged page stays written.
    assert streamed or stdout == ""
    [line] = stderr.splitlines()
    assert f"the SQLite store {store} is damaged (" in line
    assert "restore the file from a backup" in line


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "history", LAST],
        ["sessions", "history", LAST, "--json"],
        ["audit", "verify"],
        ["audit", "export"],
        ["record", LAST, "one more"],
    ],
)
def test_a_command_meeting_a_damaged_tail_says_so_in_one_line(
    damaged_tail: str, command: list[str]
) -> None:
    answer = run_process("--store", damaged_tail, *command)
    assert_refused_in_one_line(answer, damaged_tail, streamed=command[1:] == ["export"])


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "list"],
        ["sessions", "history", LAST],
        ["audit", "verify"],
        ["record", "main", "x"],
    ],
)
def test_a_command_on_a_file_damaged_through_says_so_in_one_line(
    damaged_half: str, command: list[str]
) -> None:
    assert_refused_in_one_line(run_process("--store", damaged_half, *command), damaged_half)


def test_serve_reads_every_page_before_it_listens(damaged_tail: str, damaged_half: str) -> None:
    for store in (damaged_tail, damaged_half):
        answer = run_process(
            "--store", store, "serve", "--port", "0", env={"SESSIONWIRE_TOKEN": "t"}
        )
        assert "Traceback" not in answer.stderr
        assert answer.returncode == 2, answer.stderr
        [line] = answer.stderr.splitlines()
        assert line.startswith(f"sessionwire: cannot serve: the SQLite store {store} is damaged")
    # Where: the page quick_check found first.
    assert "Page " in line or "malformed" in line


async def test_a_server_meeting_damage_answers_503_not_500(damaged_tail: str) -> None:
    tool, method = await answered(
        damaged_tail,
        ("/v1/tools/sessions_history", {"sessionKey": LAST}),
        ("/v1/methods/chat.history", {"sessionKey": LAST}),
    )
    for answer in (tool, method):
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "store_damaged"
        assert "tail.db" not in answer.text


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[str]:
    store = f"sqlite:///{tmp_path}/held.db"
    with holding(store):
        yield store


def test_a_second_serve_on_a_held_file_does_not_start(holder: str) -> None:
    answer = run_process("--store", holder, "serve", "--port", "0", env={"SESSIONWIRE_TOKEN": "t"})
    assert "Traceback" not in answer.stderr
    assert answer.returncode == 2, answer.stderr
    [line] = answer.stderr.splitlines()
    assert line.startswith("sessionwire: cannot serve: SQLite store ")
    assert "held by another gateway (pid " in line


async def test_sessions_patch_beside_a_live_writer_answers_as_the_tools_do(holder: str) -> None:
    written = io.StringIO()
    configure_logging(False)  # the handler `serve` logs through, to a stream we read
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "sessionwire_cli", 0))
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(written)
    try:
        patched, sent = await answered(
            holder,
            ("/v1/methods/sessions.patch", {"key": "main", "label": "x"}),
            (
                "/v1/tools/sessions_send",
                {"sessionKey": "main", "message": "hi", "timeoutSeconds": 0},
            ),
        )
    finally:
        logging.getLogger().removeHandler(handler)
    assert patched.status_code == 409, patched.text
    assert patched.json()["error"]["code"] == "store_held"
    tool_text = sent.json()["error"]
    assert patched.json()["error"]["message"] == tool_text
    assert "held.db" not in patched.text
    logged = written.getvalue()
    assert "Logging error" not in logged
    assert "Traceback" not in logged
    assert "request refused: the store has another writer" in logged
