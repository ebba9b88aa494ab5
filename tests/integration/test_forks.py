"""Forks (decision 34, ADR 0048) on every store: ``Gateway.fork_session``, the spawn tool's
``context: "fork"`` (Python API and HTTP), ``sessions_history`` of a fork, the fork point
in ``audit verify``, and the CLI's ``sessions fork``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from audit_rig import audit_log_of, run_cli
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig, RunReply, RunRequest, SyncGateway
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.audit.verify import verify
from sessionwire.application.forks import ForkRefused
from sessionwire.application.gateway import SessionNotFound
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.keys import agent_id_of
from sessionwire.domain.session import ForkPoint, Session
from sessionwire.testing import VirtualClock

OPERATOR_TOKEN = "operator-secret-fork"


def texts(answer: dict[str, Any]) -> list[str]:
    return [block["text"] for m in answer["messages"] for block in m["content"]]


async def history(gw: Gateway, key: str, requester: str = "main", **params: Any) -> Any:
    answer = await gw.call_tool(requester, "sessions_history", {"sessionKey": key, **params})
    assert "messages" in answer, answer
    return answer


async def test_a_fork_shows_the_source_up_to_its_position_then_its_own(gateway: Gateway) -> None:
    for text in ("one", "two", "three"):
        await gateway.record_message("main", role="user", content=text)
    # Version 1 opened the session; "two" is version 3.
    forked = await gateway.fork_session("main", new_key="rewind", at_version=3)
    await gateway.record_message("main", role="user", content="later in the source")
    await gateway.record_message("rewind", role="assistant", content="the fork's own")

    answer = await history(gateway, "rewind")

    assert forked["sessionKey"] == "agent:main:rewind"
    point = forked["forkedFrom"]
    assert (point["sessionKey"], point["version"], point["messages"]) == ("agent:main:main", 3, 2)
    assert len(point["streamHash"]) == 64
    assert texts(answer) == ["one", "two", "the fork's own"]
    assert [m.get("forkedFrom") for m in answer["messages"]] == [
        "agent:main:main",
        "agent:main:main",
        None,
    ]
    # The source is unchanged by its fork.
    assert texts(await history(gateway, "main"))[-1] == "later in the source"


async def test_history_pages_through_the_inherited_lines_and_the_forks_own(
    gateway: Gateway,
) -> None:
    await gateway.record_many("main", [{"role": "user", "content": f"s{i}"} for i in range(5)])
    await gateway.fork_session("main", new_key="paged")
    await gateway.record_message("main", role="user", content="never in the fork")
    for i in range(4):
        await gateway.record_message("paged", role="user", content=f"f{i}")

    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await history(gateway, "paged", offset=offset, limit=3)
        assert page["totalMessages"] == 9
        pages[:0] = texts(page)
        offset = page.get("nextOffset")
    tail = await history(gateway, "paged", limit=6)

    assert pages == [*(f"s{i}" for i in range(5)), *(f"f{i}" for i in range(4))]
    assert texts(tail) == ["s3", "s4", "f0", "f1", "f2", "f3"]


async def test_a_fork_inside_a_batch_inherits_the_batch_up_to_its_position(
    gateway: Gateway,
) -> None:
    await gateway.record_many("main", [{"role": "user", "content": f"b{i}"} for i in range(4)])
    # The batch takes versions 2-5: version 3 is its second message.
    forked = await gateway.fork_session("main", new_key="mid", at_version=3)

    assert forked["forkedFrom"]["messages"] == 2
    assert texts(await history(gateway, "mid")) == ["b0", "b1"]
    with audit_log_of(gateway) as log:
        assert verify(log).clean


async def test_a_fork_of_a_fork_inherits_both_levels(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="root")
    await gateway.fork_session("main", new_key="child")
    await gateway.record_message("child", role="user", content="child's")
    await gateway.record_message("main", role="user", content="root later")
    grandchild = await gateway.fork_session("child", new_key="grandchild")
    await gateway.record_message("child", role="user", content="child later")

    assert grandchild["forkedFrom"]["messages"] == 2
    assert texts(await history(gateway, "grandchild")) == ["root", "child's"]


@pytest.mark.parametrize(
    ("position", "reason"),
    [
        (0, "invalid fork position 0: versions start at 1"),
        (-2, "invalid fork position -2: versions start at 1"),
        (99, "invalid fork position 99: agent:main:main is at version 2"),
        ("2", "invalid fork position '2': a stream version (integer)"),
        (True, "invalid fork position True: a stream version (integer)"),
    ],
)
async def test_bad_positions_are_refused_with_the_reason(
    gateway: Gateway, position: Any, reason: str
) -> None:
    await gateway.record_message("main", role="user", content="hello")

    with pytest.raises(ForkRefused) as refused:
        await gateway.fork_session("main", at_version=position)

    assert str(refused.value) == reason
    assert [
        row["key"] for row in (await gateway.call_tool("main", "sessions_list"))["sessions"]
    ] == ["main"]


async def test_a_taken_key_and_a_missing_source_are_refused(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="hello")
    await gateway.record_message("other", role="user", content="there")

    with pytest.raises(ForkRefused, match="already stored under agent:main:other"):
        await gateway.fork_session("main", new_key="other")
    with pytest.raises(SessionNotFound, match="Session not found: agent:main:nowhere"):
        await gateway.fork_session("nowhere")


async def test_a_fork_is_the_callers_and_a_hidden_source_is_not_found(
    store_url: str, clock: VirtualClock
) -> None:
    config = GatewayConfig.load(before_scopes(visibility="tree"))
    gw = await Gateway.open(config=config, store=store_url, clock=clock)
    bob = "webchat:dm:bob"  # not main: under "tree" it sees its own tree only
    try:
        await gw.record_message(bob, role="user", content="mine")
        await gw.record_message("secret", role="user", content="not the caller's")
        mine = await gw.fork_session(bob, requester=bob)
        with pytest.raises(SessionNotFound) as hidden:
            await gw.fork_session("secret", requester=bob)
        with pytest.raises(SessionNotFound) as missing:
            await gw.fork_session("nowhere", requester=bob)
        listed = await gw.call_tool(bob, "sessions_list")
        seen = await history(gw, mine["sessionKey"], requester=bob)
    finally:
        await gw.close()

    assert str(hidden.value) == str(missing.value)
    assert str(hidden.value) == (
        "Session not found, or not visible under tools.sessions.visibility=tree."
    )
    assert mine["sessionKey"] in [row["key"] for row in listed["sessions"]]
    assert texts(seen) == ["mine"]


async def test_audit_verify_checks_the_fork_point_against_the_sources_chain(
    gateway: Gateway,
) -> None:
    await gateway.record_message("main", role="user", content="hello")
    await gateway.record_message("main", role="user", content="again")
    real = await gateway.fork_session("main", new_key="honest")
    service = internals(gateway)
    # A fork point the source's chain does not have: written as any event is, chained.
    forged = ForkPoint(
        source_key="agent:main:main",
        version=2,
        record_version=2,
        stream_hash="00" * 32,
        messages=1,
    )
    async for uow in retrying(service.store, "forged"):
        with uow:
            fork = uow.add(
                Session.open(
                    key="agent:main:forged",
                    session_id=service.ids.new_id(),
                    agent_id=agent_id_of("agent:main:forged"),
                    at=service.clock.now(),
                )
            )
            fork.fork_from(forged, at=service.clock.now())
            await uow.commit()

    with audit_log_of(gateway) as log:
        report = verify(log)

    assert real["forkedFrom"]["streamHash"] != forged.stream_hash
    assert [(f.kind, f.session_key) for f in report.findings] == [("fork", "agent:main:forged")]
    assert "its source's chain has" in report.findings[0].detail


class TranscriptSeen:
    """A runtime that answers a sub-agent's task with what its transcript held."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "subagent_task":
            lines = await request.transcript(50)
            self.seen[request.session_key] = [
                block.get("text", "") for line in lines for block in line["content"]
            ]
            return RunReply(text="done")
        return RunReply(text="ANNOUNCE_SKIP")


async def test_a_forked_child_starts_with_the_requesters_transcript(
    store_url: str, clock: VirtualClock
) -> None:
    runtime = TranscriptSeen()
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), store=store_url, clock=clock, runtime=runtime
    )
    try:
        await gw.record_message("main", role="user", content="context to carry")
        forked = await gw.call_tool("main", "sessions_spawn", {"task": "go", "context": "fork"})
        isolated = await gw.call_tool("main", "sessions_spawn", {"task": "go"})
        await gw.wait_idle()
        refused = await gw.call_tool("main", "sessions_spawn", {"task": "go", "context": "x"})
        child = await history(gw, forked["childSessionKey"])
    finally:
        await gw.close()

    assert runtime.seen[forked["childSessionKey"]][0] == "context to carry"
    assert "context to carry" not in runtime.seen[isolated["childSessionKey"]]
    assert texts(child)[0] == "context to carry"
    assert child["messages"][0]["forkedFrom"] == "agent:main:main"
    assert refused["status"] == "error"
    assert "invalid context 'x'" in refused["error"]


async def test_spawn_with_context_fork_over_http(clock: VirtualClock) -> None:
    runtime = TranscriptSeen()
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes()), clock=clock, runtime=runtime
    )
    transport = httpx.ASGITransport(app=create_app(gw, OPERATOR_TOKEN))
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "X-Sessionwire-Session": "main"}
    try:
        await gw.record_message("main", role="user", content="over http")
        async with httpx.AsyncClient(
            transport=transport, base_url="http://gateway", headers=headers
        ) as http:
            spawned = (
                await http.post("/v1/tools/sessions_spawn", json={"task": "go", "context": "fork"})
            ).json()
            await gw.wait_idle()
            child = (
                await http.post(
                    "/v1/tools/sessions_history", json={"sessionKey": spawned["childSessionKey"]}
                )
            ).json()
            method = (
                await http.post(
                    "/v1/methods/chat.history", json={"sessionKey": spawned["childSessionKey"]}
                )
            ).json()
    finally:
        await gw.close()

    assert spawned["status"] == "accepted", spawned
    assert runtime.seen[spawned["childSessionKey"]][0] == "over http"
    assert texts(child)[0] == "over http"
    assert texts(method)[0] == "over http"  # the chat.history method shows it too


def test_the_cli_forks_at_a_position_and_refuses_a_bad_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    url = f"sqlite:///{tmp_path}/fork.db"
    with SyncGateway.open(store=url) as gw:
        gw.record_message("main", role="user", content="first")
        gw.record_message("main", role="user", content="second")

    code, out, _ = run_cli(capsys, "--store", url, "sessions", "fork", "main", "--at", "2")
    bad, _, err = run_cli(capsys, "--store", url, "sessions", "fork", "main", "--at", "7")
    audited, verified, _ = run_cli(capsys, "--store", url, "audit", "verify")
    rebuilt, differences, _ = run_cli(capsys, "--store", url, "audit", "rebuild", "--check")
    with SyncGateway.open(store=url) as gw:
        (row,) = [
            r
            for r in gw.call_tool("main", "sessions_list", {"kinds": ["other"]})["sessions"]
            if ":fork:" in r["key"]
        ]
        seen = gw.call_tool("main", "sessions_history", {"sessionKey": row["key"]})

    assert code == 0
    assert out.startswith("forked agent:main:main at version 2 (1 messages) into agent:main:fork:")
    assert bad == 1
    assert "invalid fork position 7: agent:main:main is at version 3" in err
    assert audited == 0, verified
    assert rebuilt == 0, differences  # the fork's row (forked_from) is what a rebuild makes
    assert texts(seen) == ["first"]


async def test_inherited_lines_are_masked_as_reading_the_source_would_mask_them(
    store_url: str, clock: VirtualClock
) -> None:
    config = GatewayConfig.load(before_scopes({"redaction": {"patterns": [r"ACME-\d{8}"]}}))
    gw = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        await gw.record_message("main", role="user", content="badge ACME-12345678")
        forked = await gw.fork_session("main", new_key="mine")
        await gw.record_message("mine", role="user", content="own ACME-87654321")
        # The fork reads its own history: its own line as written, the inherited one
        # masked, as the fork reading main's history would see it.
        seen = await history(gw, forked["sessionKey"], requester=forked["sessionKey"])
        source = await history(gw, "main", requester=forked["sessionKey"])
        by_source = await history(gw, forked["sessionKey"], requester="main")
    finally:
        await gw.close()

    assert texts(seen) == ["badge [redacted:configured]", "own ACME-87654321"]
    assert seen["contentRedacted"] is True
    assert texts(source) == ["badge [redacted:configured]"]
    assert texts(by_source)[0] == "badge ACME-12345678"  # main's own line, read by main


async def test_a_forks_view_without_tool_results_pages_as_the_view_with_them(
    gateway: Gateway,
) -> None:
    for role, text in (("user", "ask"), ("toolResult", "tool said"), ("assistant", "answer")):
        await gateway.record_message("main", role=role, content=text)
    await gateway.fork_session("main", new_key="tools")
    await gateway.record_message("main", role="toolResult", content="later tool line")
    await gateway.record_message("tools", role="user", content="own")

    plain = await history(gateway, "tools", offset=0, limit=2)
    older = await history(gateway, "tools", offset=2, limit=2)
    with_tools = await history(gateway, "tools", offset=0, limit=10, includeTools=True)

    assert (texts(older), texts(plain)) == (["ask"], ["answer", "own"])
    assert plain["totalMessages"] == 3
    assert texts(with_tools) == ["ask", "tool said", "answer", "own"]
    assert with_tools["totalMessages"] == 4


async def test_a_fork_is_in_its_requesters_tree_before_the_requester_wrote_anything(
    store_url: str, clock: VirtualClock
) -> None:
    config = GatewayConfig.load(before_scopes(visibility="agent"))
    gw = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        await gw.record_message("main", role="user", content="shared")
        carol = "agent:main:webchat:dm:carol"  # no session recorded under it
        forked = await gw.fork_session("main", requester=carol)
        row = (await gw.session_as_of(forked["sessionKey"])).row
    finally:
        await gw.close()

    assert row.spawned_by == carol
    assert row.forked_from is not None
    assert row.forked_from.source_key == "agent:main:main"
