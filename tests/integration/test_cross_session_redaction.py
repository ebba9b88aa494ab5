"""Secrets are masked when a session reads another session's messages (sessions_history,
sessions_list with messages), and only there: the session's own view, the stored
transcript, the event log and an audit export keep them as recorded."""

from __future__ import annotations

import pytest
from audit_rig import run_cli
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.audit import StoreAuditLog
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.audit.export import export_lines
from sessionwire.testing import VirtualClock

AWS = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "Bearer 8f14e45fceea167a5a36dedd4bea2543"
BADGE = "ACME-12345678"
SAID = f"deploy with {AWS}, header {TOKEN}, badge {BADGE}"


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig.load({"redaction": {"patterns": [r"ACME-\d{8}"]}})


def texts(messages: list[dict[str, object]]) -> list[str]:
    return [block["text"] for m in messages for block in m["content"]]  # type: ignore[attr-defined,index]


async def test_another_sessions_secrets_are_masked_in_its_views_only(gateway: Gateway) -> None:
    await gateway.record_message("discord:group:ops", role="user", content=SAID)
    await gateway.record_message("main", role="user", content=f"my own {AWS}")

    other = await gateway.call_tool("main", "sessions_history", {"sessionKey": "discord:group:ops"})
    (text,) = texts(other["messages"])
    assert AWS not in text
    assert "8f14e45fceea167a5a36dedd4bea2543" not in text
    assert BADGE not in text
    assert text == (
        "deploy with [redacted:aws-access-key], header Bearer [redacted:bearer-token], "
        "badge [redacted:configured]"
    )

    own = await gateway.call_tool(
        "discord:group:ops", "sessions_history", {"sessionKey": "discord:group:ops"}
    )
    assert texts(own["messages"]) == [SAID]

    listed = await gateway.call_tool("main", "sessions_list", {"messageLimit": 1})
    rows = {row["key"]: row for row in listed["sessions"]}
    assert texts(rows["agent:main:discord:group:ops"]["messages"]) == [text]
    assert texts(rows["main"]["messages"]) == [f"my own {AWS}"]  # its own row

    # Stored, logged and exported as recorded.
    stored = store_of(gateway).session("agent:main:discord:group:ops")
    assert stored is not None
    assert SAID in store_of(gateway).transcript(stored.id, limit=5, include_tools=False)[0]
    assert isinstance(store_of(gateway), EventSourcedStore)
    exported = "\n".join(export_lines(StoreAuditLog(store_of(gateway))))
    assert AWS in exported
    assert BADGE in exported


async def test_masking_can_be_turned_off(store_url: str, clock: VirtualClock) -> None:
    config = GatewayConfig.load({"redaction": {"crossSession": False}})
    gateway = await Gateway.open(config=config, store=store_url, clock=clock)
    try:
        await gateway.record_message("discord:group:ops", role="user", content=SAID)
        other = await gateway.call_tool(
            "main", "sessions_history", {"sessionKey": "discord:group:ops"}
        )
        assert texts(other["messages"]) == [SAID]
    finally:
        await gateway.close()


def test_the_cli_reads_another_session_masked(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    store = f"sqlite:///{tmp_path}/cli.db"
    assert run_cli(capsys, "--store", store, "record", "discord:group:ops", SAID)[0] == 0
    code, out, err = run_cli(capsys, "--store", store, "sessions", "history", "discord:group:ops")
    assert code == 0, err
    assert AWS not in out
    assert "[redacted:aws-access-key]" in out
