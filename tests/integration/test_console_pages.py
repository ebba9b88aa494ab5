"""The web console's pages, in process (the browser tests are in tests/e2e).

Through ``serve``'s app (create_app mounts the console at /console) on a store with
something of everything (console_scenario): who may open it, what each page shows,
and that it shows a transcript masked while the log keeps every byte.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_scenario import MAIN, OPS, SECRET, SESSION_TOKEN, TOKEN, Recorded, record_scenario
from fastapi import FastAPI
from fastapi.testclient import TestClient
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.cli.main import main
from sessionwire.adapters.console.app import create_console
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.store.off_loop import OffLoopStore

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Recorded]:
    url = f"sqlite:///{tmp_path_factory.mktemp('console')}/store.db"
    return url, asyncio.run(record_scenario(url))


@pytest.fixture
def client(recorded: tuple[str, Recorded]) -> Iterator[TestClient]:
    url, _ = recorded
    tokens = TokenSet.from_data(
        {
            "tokens": [
                {"token": TOKEN, "role": "operator"},
                {"token": SESSION_TOKEN, "session": "main"},
            ]
        }
    )

    async def opened() -> Gateway:
        return await Gateway.open(config=GatewayConfig.load(before_scopes()), store=url)

    loop = asyncio.new_event_loop()
    gateway = loop.run_until_complete(opened())
    try:
        with TestClient(create_app(gateway, tokens)) as test_client:
            yield test_client
    finally:
        loop.run_until_complete(gateway.close())
        loop.close()


def words(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_only_an_operator_opens_the_console(client: TestClient) -> None:
    anonymous = client.get("/console/", follow_redirects=False)
    assert anonymous.status_code == 303
    assert anonymous.headers["location"] == "/console/login"
    bound = client.get(
        "/console/", headers={"Authorization": f"Bearer {SESSION_TOKEN}"}, follow_redirects=False
    )
    assert bound.status_code == 303, "a session's token does not open the operator's view"
    refused = client.post("/console/login", content=f"token={SESSION_TOKEN}")
    assert refused.status_code == 401
    assert "operator token is needed" in refused.text
    # The stylesheet is the one thing served to anyone (the login page needs it).
    css = client.get("/console/static/console.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    # The API beside it still wants its bearer token.
    assert client.get("/v1/tools").status_code == 401


def test_the_login_form_sets_a_strict_http_only_cookie(client: TestClient) -> None:
    answer = client.post(
        "/console/login",
        content=f"token={TOKEN}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert "path=/console" in cookie
    page = client.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'none'")


def test_sessions_are_paged_filtered_and_searched(client: TestClient) -> None:
    first = client.get("/console/", headers=AUTH)
    keys = re.findall(r'href="/console/sessions/([^"]+)"', first.text)
    assert len(keys) == 50
    after = re.search(r'rel="next" href="([^"]+)"', first.text)
    assert after is not None
    second = client.get(after.group(1).replace("&amp;", "&"), headers=AUTH)
    more = re.findall(r'href="/console/sessions/([^"]+)"', second.text)
    assert more
    assert not set(keys) & set(more), "a row is on one page only"
    assert len(set(keys) | set(more)) == len(keys) + len(more)

    searched = client.get("/console/", params={"q": "GROUP:OPS"}, headers=AUTH)
    assert re.findall(r'href="/console/sessions/([^"]+)"', searched.text) == [
        "agent%3Amain%3Adiscord%3Agroup%3Aops"
    ]
    crons = client.get("/console/", params={"kind": "cron", "q": "job-0"}, headers=AUTH)
    found = re.findall(r'href="/console/sessions/agent%3Amain%3Acron%3Ajob-0(\d)"', crons.text)
    assert sorted(found) == [str(n) for n in range(10)]


def test_a_transcript_shows_provenance_and_masks_secrets(
    client: TestClient, recorded: tuple[str, Recorded]
) -> None:
    _, ids = recorded
    page = client.get(f"/console/sessions/{OPS}", headers=AUTH)
    assert page.status_code == 200
    assert SECRET not in page.text
    assert "api_key=[redacted:api-key]" in page.text
    text = words(page.text)
    assert f"a2a from {MAIN} · trace {ids.trace_id[:8]}" in text
    assert f'href="/console/traces/{ids.trace_id}"' in page.text
    assert "Policy refusals" in text
    assert "sessions_history by agent:main:discord:group:ops refused" in text


def test_the_log_keeps_the_secret_the_console_masks(recorded: tuple[str, Recorded]) -> None:
    url, _ = recorded
    path = Path(url.removeprefix("sqlite:///"))
    assert SECRET.encode() in path.read_bytes()


def test_an_exchange_is_drawn_as_a_sequence_diagram(client: TestClient) -> None:
    session = client.get(f"/console/sessions/{OPS}", headers=AUTH).text
    (exchange,) = set(re.findall(r'href="(/console/exchanges/[0-9a-f-]+)"', session))
    page = client.get(exchange, headers=AUTH)
    svg = re.search(r"<svg.*?</svg>", page.text, re.S)
    assert svg is not None
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg.group(0))
    assert labels[:3] == [MAIN, OPS, "discord channel:ops"]
    steps = labels[3:]
    assert steps[:4] == [
        "deploy?",
        "deploying now",
        "turn 1: no, thanks",
        "turn 2: done, anything else?",
    ]
    assert "failed: ConnectionError: channel unreachable" in steps
    failed = re.search(r'<g class="arrow failure"><line x1="(\d+)"[^>]*x2="(\d+)"', svg.group(0))
    assert failed is not None
    assert int(failed.group(2)) > int(failed.group(1)), "the failed announce points at the channel"
    assert steps[-1] == "attempt 2 delivered"
    assert 'role="img"' in svg.group(0)
    assert "<title" in svg.group(0)


def test_the_spawn_tree_runs_refusals_and_verify_status(
    client: TestClient, recorded: tuple[str, Recorded]
) -> None:
    _, ids = recorded
    tree = words(client.get(f"/console/traces/{ids.spawn_trace_id}", headers=AUTH).text)
    assert "spawn agent:main:subagent:" in tree
    assert "subagent_task run queued" in tree
    runs = words(client.get("/console/runs", headers=AUTH).text)
    assert "subagent_announce ok" in runs
    assert "primary ok" in runs
    assert "No runs." in words(client.get("/console/runs?status=error", headers=AUTH).text)
    refusals = words(client.get("/console/refusals", headers=AUTH).text)
    assert "agent_to_agent (tools.agentToAgent.enabled)" in refusals
    before = words(client.get("/console/store", headers=AUTH).text)
    assert "Verify the store now" in before
    verified = words(client.get("/console/store?check=true", headers=AUTH).text)
    assert re.search(r"Clean: \d+ event\(s\) checked", verified)


def test_unknown_things_are_404(client: TestClient) -> None:
    for path in (
        "/console/sessions/agent:main:nobody",
        "/console/exchanges/not-a-uuid",
        "/console/exchanges/00000000-0000-0000-0000-000000000000",
        "/console/traces/nope",
    ):
        assert client.get(path, headers=AUTH).status_code == 404, path


def test_every_page_docs_console_names_is_served(
    client: TestClient, recorded: tuple[str, Recorded]
) -> None:
    """docs/console.md's table of pages stays true: each path answers, placeholders
    filled in with things the store holds."""
    _, ids = recorded
    page = (Path(__file__).resolve().parents[2] / "docs" / "console.md").read_text()
    paths = re.findall(r"^\| [^|]+ \| `(/console/[^`]*)` \|", page, re.MULTILINE)
    assert len(paths) == 8
    session = client.get(f"/console/sessions/{OPS}", headers=AUTH).text
    exchange = re.search(r'href="/console/exchanges/([0-9a-f-]+)"', session)
    assert exchange is not None
    filled = {"KEY": OPS, "ID": exchange.group(1), "TRACE_ID": ids.trace_id}
    for path in paths:
        for placeholder, value in filled.items():
            path = re.sub(rf"/{placeholder}$", f"/{value}", path)
        assert client.get(path, headers=AUTH).status_code == 200, path


def test_the_store_page_shows_the_last_signed_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    asyncio.run(record_scenario(url))
    config = GatewayConfig.load(before_scopes())
    app = FastAPI()
    store = open_event_store(url, config)
    awaited = OffLoopStore(store)
    try:
        app.mount("/console", create_console(awaited, config, TokenSet.operator(TOKEN)))
        client = TestClient(app)
        assert "None recorded yet" in client.get("/console/store", headers=AUTH).text
        key = tmp_path / "keys" / "checkpoint.key"
        assert main(["--store", url, "--json", "audit", "checkpoint", "--key", str(key)]) == 0
        page = words(client.get("/console/store", headers=AUTH).text)
        assert f"Log size {store.log_position()} event(s)" in page
        assert "Key id" in page
    finally:
        awaited.close_now()


def test_the_console_reads_a_bearer_token_as_the_api_does(tmp_path: Path) -> None:
    # One parser for both (adapters/access/auth.py): a token beyond ASCII is sent as UTF-8
    # and opened the API, but the console read it as Latin-1 and sent it to the login.
    token = "opérateur-tøken-0123456789"
    config = GatewayConfig.load(before_scopes())
    awaited = OffLoopStore(open_event_store(f"sqlite:///{tmp_path}/store.db", config))
    try:
        app = FastAPI()
        app.mount("/console", create_console(awaited, config, TokenSet.operator(token)))
        header = {"Authorization": f"Bearer {token}".encode()}
        page = TestClient(app).get("/console/", headers=header, follow_redirects=False)
        assert page.status_code == 200
    finally:
        awaited.close_now()


def test_a_forks_page_links_its_source(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"

    async def forked() -> None:
        gateway = await Gateway.open(store=url)
        await gateway.record_message("main", role="user", content="before the fork")
        await gateway.fork_session("main", new_key="retry")
        await gateway.close()

    asyncio.run(forked())
    config = GatewayConfig.load(before_scopes())
    app = FastAPI()
    awaited = OffLoopStore(open_event_store(url, config))
    try:
        app.mount("/console", create_console(awaited, config, TokenSet.operator(TOKEN)))
        html = TestClient(app).get("/console/sessions/agent:main:retry", headers=AUTH).text
    finally:
        awaited.close_now()

    assert '<a href="/console/sessions/agent%3Amain%3Amain">agent:main:main</a>' in html
    assert "Forked from agent:main:main at version 2 (1 messages inherited" in words(html)
    assert "before the fork" in html  # the inherited line, flagged where it came from
    assert "inherited from agent:main:main" in words(html)
