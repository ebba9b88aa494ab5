"""sessions.patch: label, model, levels and the sendPolicy override."""

from __future__ import annotations

import re

import pytest
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.gateway import SessionNotFound
from sessionwire.domain.session import InvalidPatch


async def test_patched_fields_show_in_the_row(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="hi")
    result = await gateway.patch_session(
        "main", thinkingLevel="medium", verboseLevel="off", sendPolicy="deny", label="Briefing"
    )
    assert result["ok"] is True
    assert result["key"] == "agent:main:main"
    row = (await gateway.call_tool("main", "sessions_list", {}))["sessions"][0]
    assert (row["thinkingLevel"], row["verboseLevel"], row["sendPolicy"]) == (
        "medium",
        "off",
        "deny",
    )
    assert row["label"] == row["displayName"] == "Briefing"


async def test_none_clears_a_field(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="hi")
    await gateway.patch_session("main", verboseLevel="on")
    await gateway.patch_session("main", verboseLevel=None)
    row = (await gateway.call_tool("main", "sessions_list", {}))["sessions"][0]
    assert row["verboseLevel"] is None


async def test_labels_are_unique(gateway: Gateway) -> None:
    await gateway.record_message("cron:a", role="user", content="x")
    await gateway.record_message("cron:b", role="user", content="x")
    await gateway.patch_session("cron:a", label="Briefing")
    with pytest.raises(InvalidPatch, match="label already in use: Briefing"):
        await gateway.patch_session("cron:b", label="Briefing")
    # Setting its own label again is fine.
    await gateway.patch_session("cron:a", label="Briefing")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sendPolicy": "maybe"}, re.escape('invalid sendPolicy (use "allow"|"deny")')),
        ({"thinkingLevel": "banana"}, "invalid thinkingLevel"),
        ({"label": "   "}, "invalid label: empty"),
        ({"label": "x" * 65}, r"invalid label: too long \(max 64\)"),
        ({"colour": "red"}, "unknown session field 'colour'"),
        ({"model": 7}, "invalid model: must be a string or null"),
    ],
)
async def test_bad_patches_are_refused_and_write_nothing(
    gateway: Gateway, changes: dict[str, object], message: str
) -> None:
    await gateway.record_message("main", role="user", content="hi")
    before = store_of(gateway).read_model_snapshot()
    with pytest.raises(InvalidPatch, match=message):
        await gateway.patch_session("main", **changes)
    assert store_of(gateway).read_model_snapshot() == before


async def test_patching_a_missing_session_is_an_error(gateway: Gateway) -> None:
    with pytest.raises(SessionNotFound, match="Session not found: agent:main:cron:nope"):
        await gateway.patch_session("cron:nope", label="x")
