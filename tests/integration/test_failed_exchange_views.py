"""An exchange whose target's run failed reads as failed wherever it is shown (issue 37
§C): the exchange's closing reason, the console's session page (an outcome column) and
sequence diagram, and ``audit timeline``; a session's spawns link to their children.

One SQLite store, written by a gateway whose agent raises on the target's turn, then
read by the console in process and by the command line, as a user would look at it.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from command_line import run_in_process
from fastapi.testclient import TestClient
from sessionwire import AgentRuntime, Gateway, GatewayConfig, RunReply, RunRequest
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.http.app import create_app

TOKEN = "operator-token-for-the-failed-exchange"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REQUESTER, TARGET = "agent:main:main", "agent:main:cron:target"
CONFIG = {"tools": {"sessions": {"visibility": "agent"}}}


class FailingTarget(AgentRuntime):
    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "primary":
            raise RuntimeError("model overloaded")
        if request.step == "subagent_task":
            return RunReply("found it")
        return RunReply("ANNOUNCE_SKIP")


async def _record(url: str) -> None:
    gateway = await Gateway.open(
        config=GatewayConfig.load(CONFIG), store=url, runtime=FailingTarget()
    )
    try:
        await gateway.record_message(REQUESTER, role="user", content="hi")
        await gateway.record_message(TARGET, role="user", content="hi")
        sent = await gateway.call_tool(
            REQUESTER, "sessions_send", {"sessionKey": TARGET, "message": "deploy?"}
        )
        assert sent["status"] == "error", sent
        spawned = await gateway.call_tool(REQUESTER, "sessions_spawn", {"task": "look"})
        assert spawned["status"] == "accepted", spawned
        await gateway.wait_idle()
    finally:
        await gateway.close()


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/failed.db"
    asyncio.run(_record(url))
    return url


@pytest.fixture
def console(store: str) -> Iterator[TestClient]:
    tokens = TokenSet.from_data({"tokens": [{"token": TOKEN, "role": "operator"}]})
    loop = asyncio.new_event_loop()
    gateway = loop.run_until_complete(
        Gateway.open(config=GatewayConfig.load(CONFIG), store=store, resume=False)
    )
    try:
        with TestClient(create_app(gateway, tokens)) as client:
            yield client
    finally:
        loop.run_until_complete(gateway.close())
        loop.close()


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


FAILED = "the target's run failed (error: model overloaded)"


def test_the_session_page_gives_each_exchange_its_outcome(console: TestClient) -> None:
    page = console.get(f"/console/sessions/{TARGET}", headers=AUTH).text
    assert '<th scope="col">Outcome</th>' in page
    assert FAILED in _text(page)


def test_the_sequence_diagram_draws_the_failure_not_no_reply(console: TestClient) -> None:
    page = console.get(f"/console/sessions/{TARGET}", headers=AUTH).text
    (exchange,) = set(re.findall(r'href="(/console/exchanges/[0-9a-f-]+)"', page))
    svg = re.search(r"<svg.*?</svg>", console.get(exchange, headers=AUTH).text, re.S)
    assert svg is not None
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg.group(0))
    assert "(no reply)" not in labels
    assert "run failed: error: model overloaded" in labels
    assert '<g class="arrow failure">' in svg.group(0)


def test_the_spawns_list_links_each_child(console: TestClient) -> None:
    page = console.get(f"/console/sessions/{REQUESTER}", headers=AUTH).text
    spawns = page[page.index('id="spawns-heading"') :]
    spawns = spawns[: spawns.index("</section>")]
    (child,) = re.findall(r'href="/console/sessions/(agent%3Amain%3Asubagent%3A[^"]+)"', spawns)
    assert console.get(f"/console/sessions/{child}", headers=AUTH).status_code == 200


def test_audit_timeline_says_the_run_failed(store: str) -> None:
    shown = run_in_process("--store", store, "audit", "timeline", TARGET)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "target's run failed: 'error: model overloaded'" in text
    assert "target replied" not in text
    assert "exchange closed: the target's run failed (error:" in text
