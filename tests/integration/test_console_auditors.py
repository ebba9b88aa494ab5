"""The console as an auditor reads it (issue 24, issue 27 finding 8).

A store where main sends twice into the ops group (a secret in the first message), a
sub-agent is spawned with a secret in its task, a primary run fails, and a cross-agent
read is refused. The refusals page names the target; a session's exchanges are told
apart; the session page shows its channel and route; failed runs stand out; and no
page shows the secret (exchange diagram, trace page, spawn summaries).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.http.app import create_app
from sessionwire.testing import ScriptedRuntime, VirtualClock

MAIN = "agent:main:main"
OPS = "agent:main:discord:group:ops"
OTHER = "agent:other:main"
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
TOKEN = "console-auditor-operator-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCRIPT = {
    "rules": [
        {"step": "primary", "match": "explode", "fail": "the model is overloaded"},
        {"step": "primary", "reply": "on it"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "subagent_task", "reply": f"found the key {SECRET}"},
        {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
    ]
}


async def record(url: str) -> dict[str, str]:
    clock = VirtualClock(start=datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    gw = await Gateway.open(
        config=GatewayConfig.load({"session": {"agentToAgent": {"maxPingPongTurns": 1}}}),
        store=url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    try:
        await gw.record_message(MAIN, role="user", content="hi", channel="whatsapp", to="+1555")
        await gw.record_message(
            OPS,
            role="user",
            content="standup",
            channel="discord",
            chat_type="group",
            display_name="#ops",
            to="channel:ops",
            account_id="bot-7",
        )
        await gw.record_message(OTHER, role="user", content="elsewhere")
        first = f"deploy with api_key={SECRET} please"
        sent = await gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": OPS, "message": first, "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        await clock.advance(5)
        await gw.call_tool(
            MAIN, "sessions_send", {"sessionKey": OPS, "message": "status?", "timeoutSeconds": 0}
        )
        await gw.wait_idle()
        await gw.call_tool(
            MAIN,
            "sessions_send",
            {"sessionKey": OPS, "message": "explode now", "timeoutSeconds": 0},
        )
        await gw.wait_idle()
        spawned = await gw.call_tool(
            MAIN, "sessions_spawn", {"task": f"rotate api_key={SECRET} today"}
        )
        await gw.wait_idle()
        await gw.call_tool(OPS, "sessions_history", {"sessionKey": OTHER})
    finally:
        await gw.close()
    return {"send_trace": str(sent["runId"]), "spawn_trace": str(spawned["runId"])}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('auditors')}/store.db"
    return url, asyncio.run(record(url))


@pytest.fixture
def client(recorded: tuple[str, dict[str, str]]) -> Iterator[TestClient]:
    url, _ = recorded
    loop = asyncio.new_event_loop()
    gateway = loop.run_until_complete(Gateway.open(store=url))
    try:
        with TestClient(create_app(gateway, TOKEN)) as test_client:
            yield test_client
    finally:
        loop.run_until_complete(gateway.close())
        loop.close()


def words(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr.*?</tr>", body, re.S)


def test_the_refusals_page_names_the_target(client: TestClient) -> None:
    page = client.get("/console/refusals", headers=AUTH).text
    assert '<th scope="col">Target</th>' in page
    [row] = rows(page)
    cells = [words(cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
    assert cells[1:4] == [OPS, OTHER, "sessions_history"]
    assert f'href="/console/sessions/{OTHER.replace(":", "%3A")}"' in row


def test_a_sessions_exchanges_are_told_apart(client: TestClient) -> None:
    page = client.get(f"/console/sessions/{OPS}", headers=AUTH).text
    section = page.split('id="exchanges-heading"', 1)[1].split("</section>", 1)[0]
    listed = [words(row).strip() for row in rows(section)]
    assert len(listed) == 3
    assert len(set(listed)) == 3, "each exchange is a line of its own, not the same words"
    assert all(f"received from {MAIN}" in line for line in listed)
    assert "status?" in listed[1]
    assert "explode now" in listed[2]
    ids = re.findall(r'href="/console/exchanges/([0-9a-f-]{36})"', section)
    assert len(set(ids)) == 3


def test_the_session_page_shows_its_channel_and_route(client: TestClient) -> None:
    text = words(client.get(f"/console/sessions/{OPS}", headers=AUTH).text)
    assert "Channel discord (group) · #ops" in text
    assert "Route replies go to discord channel:ops (account bot-7)" in text
    main = words(client.get(f"/console/sessions/{MAIN}", headers=AUTH).text)
    assert "Channel whatsapp" in main
    assert "Route replies go to whatsapp +1555" in main


def test_failed_runs_are_highlighted(client: TestClient) -> None:
    page = client.get("/console/runs", headers=AUTH).text
    failed = [row for row in rows(page) if 'class="failed"' in row]
    assert len(failed) == 1
    assert "✗ failed: error" in failed[0]
    assert "the model is overloaded" in failed[0]
    ok = [row for row in rows(page) if 'class="failed"' not in row]
    assert ok
    assert not any("failed" in words(row) for row in ok)
    css = client.get("/console/static/console.css").text
    assert "tr.failed" in css


def test_no_page_shows_the_secret(client: TestClient, recorded: tuple[str, dict[str, str]]) -> None:
    _, ids = recorded
    session = client.get(f"/console/sessions/{OPS}", headers=AUTH).text
    main = client.get(f"/console/sessions/{MAIN}", headers=AUTH).text
    exchange_ids = re.findall(r'href="/console/exchanges/([0-9a-f-]{36})"', session)
    pages = {
        "session": session,
        "main (spawn summaries)": main,
        "exchange diagram": client.get(f"/console/exchanges/{exchange_ids[0]}", headers=AUTH).text,
        "send trace": client.get(f"/console/traces/{ids['send_trace']}", headers=AUTH).text,
        "spawn trace": client.get(f"/console/traces/{ids['spawn_trace']}", headers=AUTH).text,
        "runs": client.get("/console/runs", headers=AUTH).text,
        "refusals": client.get("/console/refusals", headers=AUTH).text,
    }
    for name, html in pages.items():
        assert SECRET not in html, name
    assert "[redacted:" in pages["exchange diagram"]
    assert "[redacted:" in pages["spawn trace"]
    assert "[redacted:" in pages["main (spawn summaries)"]


@pytest.mark.parametrize(
    "path",
    [
        "/console/runs?before=99999999999999999999999",
        "/console/runs?before=9223372036854775808",
        "/console/?after=99999999999999999999999:agent:main:main",
        "/console/?after=-99999999999999999999999:agent:main:main",
    ],
)
def test_huge_integers_in_a_query_are_no_500(client: TestClient, path: str) -> None:
    """Issue 27 finding 8: a position or time past 64 bits was an internal error."""
    answer = client.get(path, headers=AUTH)
    assert answer.status_code in {200, 422}, answer.text
    if "before=" in path:
        assert answer.status_code == 422  # refused: no position is that large
    else:
        assert "<title>Sessions" in answer.text  # not a cursor of ours: the first page


# Logins (issue 27 finding 8) ------------------------------------------------------------


def logged_in(client: TestClient) -> str:
    answer = client.post(
        "/console/login",
        content=f"token={TOKEN}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    match = re.match(r"sessionwire_console=([^;]+);", cookie)
    assert match is not None
    client.cookies.clear()  # each request below says which cookie it sends
    return match.group(1)


def cookie(value: str) -> dict[str, str]:
    return {"Cookie": f"sessionwire_console={value}"}


def test_the_console_cookie_is_a_login_id_not_the_operator_token(client: TestClient) -> None:
    login_id = logged_in(client)
    assert TOKEN not in login_id
    assert len(login_id) >= 40  # 32 random bytes
    page = client.get("/console/runs", headers=cookie(login_id), follow_redirects=False)
    assert page.status_code == 200
    # It opens the console and nothing else: not a bearer token on the API.
    api = client.get("/v1/tools", headers={"Authorization": f"Bearer {login_id}"})
    assert api.status_code == 401
    forged = client.get("/console/runs", headers=cookie(TOKEN), follow_redirects=False)
    assert forged.status_code == 303, "the token itself in the cookie opens nothing"


def test_the_cookie_is_secure_except_on_loopback(
    recorded: tuple[str, dict[str, str]], client: TestClient
) -> None:
    beyond = client.post(
        "/console/login",
        content=f"token={TOKEN}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert "secure" in beyond.headers["set-cookie"].lower()  # http://testserver
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        local = client.post(
            "/console/login",
            content=f"token={TOKEN}",
            headers={"Content-Type": "application/x-www-form-urlencoded", "Host": host},
            follow_redirects=False,
        )
        assert "secure" not in local.headers["set-cookie"].lower(), host


def test_logout_ends_the_login(client: TestClient) -> None:
    login_id = logged_in(client)
    jar = cookie(login_id)
    opened = client.get("/console/", headers=jar, follow_redirects=False)
    assert opened.status_code == 200
    assert 'action="/console/logout"' in opened.text
    out = client.post("/console/logout", headers=jar, follow_redirects=False)
    assert out.status_code == 303
    assert out.headers["location"] == "/console/login"
    assert 'sessionwire_console=""' in out.headers["set-cookie"]
    again = client.get("/console/", headers=jar, follow_redirects=False)
    assert again.status_code == 303, "the login id opens nothing once logged out"


def test_a_token_in_an_address_is_never_taken(client: TestClient) -> None:
    refused = client.get(f"/console/login?token={TOKEN}", follow_redirects=False)
    assert refused.status_code == 400
    assert "set-cookie" not in refused.headers
    assert "paste it in the form" in refused.text


def test_a_login_link_carries_a_code_that_logs_in_once(tmp_path: Path) -> None:
    from fastapi import FastAPI
    from sessionwire.adapters.access.tokens import TokenSet
    from sessionwire.adapters.bootstrap import open_event_store
    from sessionwire.adapters.console.app import create_console
    from sessionwire.adapters.console.logins import ConsoleLogins
    from sessionwire.adapters.store.off_loop import OffLoopStore

    config = GatewayConfig()
    store = open_event_store(f"sqlite:///{tmp_path}/s.db", config)
    logins = ConsoleLogins()
    app = FastAPI()
    app.mount(
        "/console",
        create_console(OffLoopStore(store), config, TokenSet.operator(TOKEN), None, logins),
    )
    try:
        with TestClient(app) as browser:
            code = logins.invite(TOKEN)
            opened = browser.get(f"/console/login?code={code}", follow_redirects=False)
            assert opened.status_code == 303
            assert opened.headers["location"] == "/console/"
            assert TOKEN not in opened.headers["set-cookie"]
            again = browser.get(f"/console/login?code={code}", follow_redirects=False)
            assert again.status_code == 401, "a spent code logs in no one"
    finally:
        store.close()
