"""GET /v1/events: the live event stream as Server-Sent Events, through real servers.

Kept out of the schemathesis fuzz (an endless stream); its bad input is tested here.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hang_bounds import HANG_SECONDS
from live_http import TOKEN, cli_env, free_port, live_server, scripted_server, seed, serve_process
from sessionwire import SyncGateway
from sessionwire.adapters.access.tokens import TokenSet

WORK_TOKEN = "work-token-0123456789abcdefghijklmnop"
V2_STORE = Path(__file__).parents[1] / "fixtures" / "storage_v2" / "v2_demo.db"


def read_events(response: httpx.Response, count: int) -> list[tuple[Any, dict[str, Any]]]:
    """The next ``count`` events of an open stream, as (id, data): a position's id as an
    int, a sealed one (a session-bound token's) as its text."""
    found: list[tuple[Any, dict[str, Any]]] = []
    event_id: int | str | None = None
    # One line iterator per response: a stream is read once, across several calls.
    lines = response.extensions.setdefault("test_sse_lines", response.iter_lines())
    for line in lines:
        if line.startswith("id: "):
            event_id = int(line[4:]) if line[4:].isdigit() else line[4:]
        elif line.startswith("data: "):
            assert event_id is not None
            found.append((event_id, json.loads(line[6:])))
            if len(found) == count:
                return found
    raise AssertionError(f"the stream ended after {len(found)} of {count} events")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    with scripted_server(f"sqlite:///{tmp_path}/s.db") as live:
        yield live


def test_the_stream_sends_recorded_then_new_events_and_resumes_by_last_event_id(
    server: Any,
) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        with client.stream("GET", "/v1/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            seeded = read_events(response, 8)  # seed(): 3 sessions opened, 5 messages
        assert [i for i, _ in seeded] == list(range(1, 9))
        assert all(event["position"] == i for i, event in seeded)
        assert seeded[0][1]["type"] == "SessionOpened"
        # A reconnect names the last id it got; an explicit ?after= loses to it.
        resume = {"Last-Event-ID": "6"}
        with client.stream("GET", "/v1/events?after=1", headers=resume) as response:
            rest = read_events(response, 2)
            assert [i for i, _ in rest] == [7, 8]
            sent = client.post(
                "/v1/tools/sessions_send",
                json={"sessionKey": "discord:group:ops", "message": "ping", "timeoutSeconds": 0},
                headers={"X-Sessionwire-Session": "main"},
            )
            assert sent.json()["status"] == "accepted", sent.json()
            live = read_events(response, 3)
        assert [i for i, _ in live] == [9, 10, 11]
        assert {e["kind"] for _, e in live} <= {"run", "exchange", "session"}
        assert any(e["type"] == "RunStarted" for _, e in live)


def test_filters_and_a_session_bound_token_see_only_what_they_may(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    seed(store)
    tokens = TokenSet.from_data(
        {
            "tokens": [
                {"token": TOKEN, "role": "operator"},
                {"token": WORK_TOKEN, "session": "agent:work:main"},
            ]
        }
    )
    with live_server(store, token=tokens) as live:
        operator = {"Authorization": f"Bearer {TOKEN}"}
        with (
            httpx.Client(base_url=live.url, headers=operator, timeout=30) as client,
            client.stream("GET", "/v1/events", params={"session": "discord:group:ops"}) as ops,
        ):
            ((_, event),) = read_events(ops, 1)
            assert event["sessionKey"] == "agent:main:discord:group:ops"
            assert event["type"] == "SessionOpened"
        work = {"Authorization": f"Bearer {WORK_TOKEN}"}
        with (
            httpx.Client(base_url=live.url, headers=work, timeout=30) as client,
            client.stream("GET", "/v1/events") as mine,
        ):
            # agent:work:main's two events, then nothing of main's agent (agent-to-agent
            # access is off): the first is the session opening, the second its message.
            events = read_events(mine, 2)
            assert [e["sessionKey"] for _, e in events] == ["agent:work:main"] * 2
        # Its ids are sealed: no log position (which would count the 6 events before
        # that it may not see), each the event's cursor, and it resumes from them.
        ids = [i for i, _ in events]
        assert all(isinstance(i, str) and len(i) == 22 for i in ids), ids
        assert [e["cursor"] for _, e in events] == ids
        assert not any("position" in e for _, e in events)
        with httpx.Client(base_url=live.url, headers=work, timeout=30) as client:
            resumed = client.get(
                "/v1/events",
                params={"follow": "false"},
                headers={"Last-Event-ID": ids[0]},
            )
            assert resumed.status_code == 200
            assert [e["type"] for e in _data(resumed.text)] == ["MessageAppended"]
            # Positions are not taken from it, nor an id sealed for another session.
            for bad in ("7", "7.1", ids[0][::-1], "A" * 22):
                refused = client.get(
                    "/v1/events", params={"follow": "false"}, headers={"Last-Event-ID": bad}
                )
                assert refused.status_code == 400, (bad, refused.text)
            assert client.get("/v1/events", params={"after": 6}).status_code == 400
        with httpx.Client(base_url=live.url, headers=operator, timeout=30) as client:
            # The operator's ids are positions; one of them means nothing to the bound
            # token's stream, and the bound token's means nothing to the operator's.
            assert (
                client.get(
                    "/v1/events", params={"follow": "false"}, headers={"Last-Event-ID": ids[0]}
                ).status_code
                == 400
            )


def _data(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_follow_false_sends_what_is_recorded_and_ends(server: Any) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    answer = httpx.get(
        f"{server.url}/v1/events",
        params={"after": "6", "follow": "false"},
        headers=headers,
        timeout=30,
    )
    assert answer.status_code == 200
    ids = [int(line[4:]) for line in answer.text.splitlines() if line.startswith("id: ")]
    assert ids == [7, 8]


def test_a_client_that_reconnects_inside_a_batch_misses_none_of_it(tmp_path: Path) -> None:
    """A batch written by storage v3 is one record a message; one an upgraded v2 store
    holds is one record of several messages, whose ids are ``position.k``. Resuming after
    any id gets exactly what follows it, in both."""
    fresh = f"sqlite:///{tmp_path}/batch.db"
    with SyncGateway.open(store=fresh) as gateway:
        gateway.record_many("main", [{"role": "user", "content": f"m{n}"} for n in range(3)])
    upgraded = tmp_path / "v2.db"
    shutil.copy(V2_STORE, upgraded)
    for store, batched in ((fresh, False), (f"sqlite:///{upgraded}", True)):
        with live_server(store) as live:
            headers = {"Authorization": f"Bearer {live.token}"}

            def ids_after(
                last: str, url: str = live.url, headers: dict[str, str] = headers
            ) -> list[str]:
                answer = httpx.get(
                    f"{url}/v1/events",
                    params={"follow": "false"},
                    headers={**headers, "Last-Event-ID": last},
                    timeout=30,
                )
                assert answer.status_code == 200
                return [line[4:] for line in answer.text.splitlines() if line.startswith("id: ")]

            every = ids_after("0")
            if batched:
                inside = [i for i in every if "." in i]
                assert inside, "the v2 store's batch is one record of several messages"
            else:
                # The session opened (1), then its three messages, a record each.
                assert every == ["1", "2", "3", "4"]
            for index, last in enumerate(every):
                assert ids_after(last) == every[index + 1 :], last


def test_bad_input_is_refused_before_the_stream_opens(server: Any) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/v1/events").status_code == 401
        for bad in ("abc", "-1", "1.", "1.0", "0.2", "1.x", str(2**64)):
            answer = client.get("/v1/events", headers={**headers, "Last-Event-ID": bad})
            assert answer.status_code == 400, bad
            assert answer.json()["error"]["code"] == "bad_request"
        for params in ({"after": "-1"}, {"after": "x"}, {"after": str(2**64)}, {"session": ""}):
            answer = client.get("/v1/events", headers=headers, params=params)
            assert answer.status_code == 422, params
        answer = client.get("/v1/events", headers=headers, params={"session": "agent:"})
        assert answer.status_code == 400
    document = httpx.get(f"{server.url}/openapi.json", timeout=HANG_SECONDS).json()
    operation = document["paths"]["/v1/events"]["get"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert {p["name"] for p in operation["parameters"]} >= {"after", "session", "trace"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


CONNECTIONS = 1_000


async def open_stream(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    status = await reader.readline()
    assert b" 200 " in status, status
    await reader.readuntil(b": sessionwire events\n\n")  # headers, then the first line
    return reader, writer


async def next_data(reader: asyncio.StreamReader) -> dict[str, Any]:
    while True:
        line = await reader.readline()
        if not line:
            raise AssertionError("the stream closed")
        # Chunked transfer: chunk sizes and blank lines come between the SSE lines.
        if line.startswith(b"data: "):
            return dict(json.loads(line[6:]))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc for memory")
def test_a_thousand_idle_streams_and_the_gateway_still_answers(tmp_path: Path) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path}/s.db"
    seed(store)
    # The server's bound, not a grant's: this one token may hold every stream.
    shares = {"connectionsPerGrant": CONNECTIONS + 10, "streamsPerGrant": CONNECTIONS}
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"http": {"limits": shares}}))
    command = f"sessionwire --store {store} --config {config} serve --port {port}"
    env = cli_env(SESSIONWIRE_TOKEN=TOKEN)
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Sessionwire-Session": "main"}

    async def scenario(pid: int) -> tuple[int, int]:
        before = rss_kib(pid)
        streams = []
        for _ in range(CONNECTIONS // 100):
            streams += await asyncio.gather(*(open_stream(port) for _ in range(100)))
        held = rss_kib(pid)
        async with httpx.AsyncClient(timeout=30) as client:
            listed = await client.post(f"{url}/v1/tools/sessions_list", json={}, headers=auth)
            assert listed.status_code == 200
            assert listed.json()["count"] == 2  # not agent:work:main (another agent)
            # One recorded change reaches every one of the thousand.
            sent = await client.post(
                f"{url}/v1/tools/sessions_send",
                json={"sessionKey": "discord:group:ops", "message": "hi", "timeoutSeconds": 0},
                headers=auth,
            )
            assert sent.json()["status"] == "accepted", sent.json()
        # Each stream started at 0: the seeded 8 events come first, then the new one.
        for reader, _ in streams:
            for _ in range(9):
                event = await asyncio.wait_for(next_data(reader), timeout=60)
            assert event["type"] == "RunStarted"
            assert event["position"] == 9
        for _, writer in streams:
            writer.close()
        return before, held

    with serve_process(command, port=port, env=env, cwd=str(tmp_path)) as process:
        before, held = asyncio.run(scenario(process.pid))
    assert process.returncode == 0
    # Bounded: a cursor and a connection each (well under 100 KiB per stream).
    print(f"RSS {before} KiB before, {held} KiB with {CONNECTIONS} streams")
    assert held - before < CONNECTIONS * 100, (before, held)
